"""Mastra's scenarios g-k replayed on both executors: two gated calls in one step, a supervisor tree,
a second runtime (and a second process) on the same file, auto-resume with memory, and the error paths. See
test_mastra_scenarios.py for what is compared and the deliberate differences (D1-D6)."""

from __future__ import annotations

import asyncio
import json
import sys

from conftest import TESTS
from mastra_reference import (
    ADA_ARGS,
    FINAL,
    TASK,
    approver,
    ask_age,
    find_user,
    flag_tool,
    load,
    mastra_chunks,
    mastra_like_model,
    mastra_model_inputs,
    names,
    one_call,
    refused,
    replay,
    troupe_model_inputs,
)

from troupe import Agent, Memory, MemoryStore, Runtime, SqliteStore


async def test_g_two_gated_calls_in_one_step(make_runtime, calls):
    trace, steps = load("g_parallel_approvals")
    two = [[("sendEmail", {"name": "Ada"}, "call-A"), ("chargeCard", {"name": "Bob"}, "call-B")]]
    same = [[("findUser", {"name": "Ada"}, "call-A"), ("findUser", {"name": "Bob"}, "call-B")]]
    gated = {"require_approval": True}
    g1 = Agent(
        "g1",
        model=mastra_like_model(calls, "agent-model", two, FINAL),
        tools=[flag_tool(calls, "sendEmail", **gated), flag_tool(calls, "chargeCard", **gated)],
    )
    g2 = Agent(
        "g2", model=mastra_like_model(calls, "agent-model-g2", same, FINAL), tools=[find_user(calls, **gated)]
    )
    g3 = Agent(
        "g3",
        model=mastra_like_model(calls, "agent-model-g3", two, FINAL),
        tools=[flag_tool(calls, "sendEmail", **gated), flag_tool(calls, "chargeCard", **gated)],
    )
    make_runtime([g1, g2, g3])
    opened = [
        "start",
        "step-start",
        "tool-call",
        "tool-call",
        "tool-call-approval",
        "tool-call-approval",
    ]  # D1
    for agent, case in ((g1, "g1"), (g2, "g2")):
        paused = await replay(
            agent.stream("go"),
            steps[case + ".stream" + (" (same tool twice)" if case == "g2" else "")],
            opened,
        )
        listed = await agent.list_suspended_runs()
        assert listed.total == steps[case + ".listSuspendedRuns"]["result"]["total"]
        assert [c.tool_call_id for c in listed.runs[0].tool_calls] == ["call-A", "call-B"]  # D1: both listed
        # D1: call-A runs when approved (its result streams now); call-B is still announced as waiting.
        await replay(
            agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-A"),
            steps[f"{case}.approveToolCall(call-A)"],
            ["tool-result", "tool-call-approval"],
        )
        last = names(mastra_chunks(steps[f"{case}.approveToolCall(call-B)"]))
        await replay(
            agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-B"),
            steps[f"{case}.approveToolCall(call-B)"],
            last[1:],
        )
    # D1: deciding the second call first is allowed (Mastra refused it as not suspended).
    paused = await replay(g3.stream("go"), steps["g3.stream"], opened)
    await replay(
        g3.approve_tool_call(run_id=paused.run_id, tool_call_id="call-B"),
        steps["g3.approveToolCall(call-A)"],
        ["tool-result", "tool-call-approval"],
    )
    done = await g3.approve_tool_call(run_id=paused.run_id, tool_call_id="call-A")
    assert (await done.result()).text == steps["g3.approveToolCall(call-B) after call-A"]["result"]["text"]
    for model in ("agent-model", "agent-model-g2", "agent-model-g3"):
        assert troupe_model_inputs(calls, model) == mastra_model_inputs(trace, model)
    assert calls.count("tool") == 6


async def test_h_a_subagents_approval_bubbles_to_the_supervisor(make_runtime, calls):
    trace, steps = load("h_supervisor")
    gated = {"tools": [find_user(calls, require_approval=True)]}
    worker = one_call(calls, "worker", ("findUser", ADA_ARGS, "worker-call-1"), "worker result: ", **gated)
    supervisor = one_call(
        calls, "supervisor", ("agent-worker", TASK, "sup-call-1"), agents={"worker": worker}
    )
    leaf = one_call(calls, "leaf", ("findUser", ADA_ARGS, "leaf-call-1"), "leaf result: ", **gated)
    mid = one_call(calls, "mid", ("agent-leaf", TASK, "mid-call-1"), "mid result: ", agents={"leaf": leaf})
    top = one_call(calls, "top", ("agent-mid", TASK, "top-call-1"), agents={"mid": mid})
    make_runtime([supervisor, top])
    for agent, case, call in ((supervisor, "h1.supervisor", "sup-call-1"), (top, "h2.top", "top-call-1")):
        paused = await replay(agent.stream("Find the user Ada"), steps[case + ".stream"])
        [pause] = [c for c in paused.chunks if c.type == "tool-call-approval"]
        assert pause.payload["tool_call_id"] == call and pause.payload["tool_name"] == "findUser"
        await replay(
            agent.approve_tool_call(run_id=paused.run_id, tool_call_id=call), steps[case + ".approveToolCall"]
        )
    for model in ("supervisor-model", "worker-model", "top-model", "mid-model", "leaf-model"):
        assert troupe_model_inputs(calls, model) == mastra_model_inputs(trace, model), model


async def test_i_a_second_runtime_on_the_same_file_lists_and_approves(executor, tmp_path, calls):
    trace, steps = load("i_restart_libsql")
    db = tmp_path / "shared.db"
    first_agent = approver(calls, model="model-instance-1")
    first = Runtime([first_agent], storage=SqliteStore(db), executor=executor)
    try:
        paused = await replay(
            first_agent.stream("Find the user Ada", thread_id="t-1", resource_id="u-1"),
            steps["i1.instance1.stream"],
        )
    finally:
        await first.shutdown()
    agent = approver(calls, model="model-instance-2")
    second = Runtime([agent], storage=SqliteStore(db), executor=executor)
    try:
        for op, filters in (
            ("i1.instance2.listSuspendedRuns()", {}),
            (
                "i1.instance2.listSuspendedRuns({threadId:'t-1', resourceId:'u-1'})",
                {"thread_id": "t-1", "resource_id": "u-1"},
            ),
            ("i1.instance2.listSuspendedRuns({threadId:'other'})", {"thread_id": "other"}),
        ):
            listed = await agent.list_suspended_runs(**filters)
            recorded = steps[op]["result"]
            assert listed.total == recorded["total"], op
            assert [[c.tool_call_id for c in r.tool_calls] for r in listed.runs] == [
                [c["toolCallId"] for c in r["toolCalls"]] for r in recorded["runs"]
            ], op
            assert all(r.status == "suspended" for r in listed.runs)
        [run] = (await agent.list_suspended_runs()).runs
        assert run.run_id == paused.run_id
        await replay(
            agent.approve_tool_call(run_id=run.run_id, tool_call_id=run.tool_calls[0].tool_call_id),
            steps["i1.instance2.approveToolCall(from listSuspendedRuns)"],
        )
        assert (await agent.list_suspended_runs()).total == steps[
            "i1.instance2.listSuspendedRuns() after approve"
        ]["result"]["total"]
    finally:
        await second.shutdown()
    assert troupe_model_inputs(calls) == mastra_model_inputs(trace)[:2]


async def test_j_auto_resume_answers_a_suspend_but_never_an_approval(make_runtime, calls):
    _, steps = load("j_auto_resume_memory")
    agent = Agent(
        "j1",
        instructions="Use askAge.",
        model=mastra_like_model(calls, "agent-model", [[("askAge", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[ask_age(calls)],
        memory=Memory(),
        default_options={"auto_resume_suspended_tools": True},
    )
    j2 = approver(calls, "j2", "agent-model-j2")
    j2.memory = Memory()
    make_runtime([agent, j2])
    memory = {"thread_id": "thread-j1", "resource_id": "user-j"}
    await replay(agent.stream("How old is Ada?", **memory), steps["j1.turn1.stream"])
    # D5: the paused call itself is answered (no new model turn re-issuing it).
    turn2 = steps['j1.turn2.stream("She is 37 years old")']
    want = names(mastra_chunks(turn2))
    assert want[:4] == ["start", "step-start", "tool-call", "tool-result"]
    done = await replay(agent.stream("She is 37 years old", **memory), turn2, same_text=False)
    # D5: the answer goes to the paused call-1 (Mastra's model re-issued it as call-2).
    assert (await done.result()).text == turn2["result"]["text"].replace("call-2", "call-1")
    memory = {"thread_id": "thread-j2", "resource_id": "user-j"}
    first = await replay(j2.stream("Find the user Ada", **memory), steps["j2.turn1.stream (approval tool)"])
    # "Yes, go ahead" is never an approval: a new turn, gated again, and the first call still waits.
    await replay(j2.stream("Yes, go ahead", **memory), steps['j2.turn2.stream("Yes, go ahead")'])
    assert first.run_id in [r.run_id for r in (await j2.list_suspended_runs()).runs]
    assert calls.count("tool") == 2 and [e["tool"] for e in calls.entries("tool")] == ["askAge", "askAge"]


async def test_k_errors(make_runtime, calls):
    _, steps = load("k_errors")
    agent = approver(calls, "errs")
    make_runtime([agent])
    unknown = "no-such-run-id"
    await refused(agent.approve_tool_call(run_id=unknown), steps["k1.approveToolCall(unknown runId)"])
    await refused(agent.decline_tool_call(run_id=unknown), steps["k1b.declineToolCall(unknown runId)"])
    await refused(
        agent.approve_tool_call_generate(run_id=unknown), steps["k1c.approveToolCallGenerate(unknown runId)"]
    )
    # k2 and k7: a call is decided once (D2; Mastra said the run was gone).
    for case, again, op in (
        ("k2", agent.approve_tool_call, "k2.approveToolCall#2 (same run again)"),
        ("k7", agent.decline_tool_call, "k7.declineToolCall after approve"),
    ):
        paused = await replay(agent.stream("Find the user Ada"), steps[case + ".stream"])
        first = steps[case + (".approveToolCall#1" if case == "k2" else ".approveToolCall")]
        await replay(agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1"), first)
        await refused(
            again(run_id=paused.run_id, tool_call_id="call-1"), steps[op], "AGENT_DECISION_CONFLICT"
        )
    # k3: two concurrent approvals: one runs the tool, the other is refused (D2; Mastra ran it twice).
    paused = await replay(agent.stream("Find the user Ada"), steps["k3.stream"])
    outcomes = await asyncio.gather(
        *(agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1") for _ in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["DecisionConflictError", "RunResult"]
    # k4: no storage configured means a memory store here; k5 has no Troupe counterpart (D6).
    k4 = approver(calls, "k4")
    make_runtime([k4], storage=MemoryStore())
    paused = await replay(k4.stream("Find the user Ada"), steps["k4.stream (Mastra without storage)"])
    await replay(
        k4.approve_tool_call(run_id=paused.run_id), steps["k4.approveToolCall (Mastra without storage)"]
    )
    paused = await replay(agent.stream("Find the user Ada"), steps["k6.stream"])
    await refused(
        agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-does-not-exist"),
        steps["k6.approveToolCall(wrong toolCallId)"],
    )
    await replay(
        agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1"),
        steps["k6.approveToolCall(right toolCallId afterwards)"],
    )
    assert calls.count("tool") == 5, "k2, k3 once, k4, k6, k7: no decision ran a tool twice"


async def test_i2_a_run_paused_by_a_process_that_exited_is_approved_by_another(executor, tmp_path, calls):
    _, steps = load("i_restart_libsql")
    db = tmp_path / "shared.db"
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(TESTS / "mastra_i2_child.py"), str(db), calls.path, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    assert child.returncode == 0
    first = json.loads(out.decode().strip().splitlines()[-1])
    recorded = steps["i2.child-process phase1 (stream until approval, then exit)"]["result"]
    assert (first["types"], first["finish_reason"]) == (recorded["chunkTypes"], recorded["finishReason"])
    agent = approver(calls, model="model-instance-3")
    runtime = Runtime([agent], storage=SqliteStore(db), executor=executor)
    try:
        [run] = (await agent.list_suspended_runs()).runs
        listed = steps["i2.parent.listSuspendedRuns()"]["result"]["runs"][0]
        assert (run.run_id, run.status, run.thread_id, run.resource_id) == (
            first["run_id"],
            listed["status"],
            listed["threadId"],
            listed["resourceId"],
        )
        assert [c.tool_call_id for c in run.tool_calls] == [c["toolCallId"] for c in listed["toolCalls"]]
        await replay(agent.approve_tool_call(run_id=run.run_id), steps["i2.parent.approveToolCall"])
    finally:
        await runtime.shutdown()
    assert [e["tool"] for e in calls.entries("tool")] == ["findUser"], "ran once, in the second process"
