"""Troupe replays Mastra 1.71's recorded scenarios a-k (``shared/mastra/traces``) on both executors and
gives what Mastra gave: chunk types in order, payload keys, error codes, final texts, and what the model
was sent after each decision. Where Troupe deliberately differs, the test says so and why (the same
table is in the README):

- D1 every gated call of a step is announced at once and may be decided in any order (Mastra announces
  one at a time and refuses to decide the second first); an approved call runs when approved, so its
  tool-result streams in that decision's stream.
- D2 a second or concurrent decision on one call is refused with AGENT_DECISION_CONFLICT (Mastra reports
  the run as not found after the first, and ran the tool twice for two concurrent approvals).
- D3 resume data that fails the tool's resume_schema raises ResumeDataValidationError and leaves the run
  paused (Mastra hands the model a validation error as the tool's result).
- D4 a subagent's pause is announced once, at the top, with agent_path, after the top's checkpoint holds
  it (Mastra also relays it as a nested tool-output first).
- D5 auto-resume answers the paused call itself (the model extracts the answer; it never re-issues the
  call, and can never approve one): no new tool-call chunk, and an approval is never taken from chat.
- D6 an Agent is always backed by a store (an Agent without a Runtime runs on a process default one), so
  there is no storage-less "standalone agent" whose pause cannot be decided (Mastra's k5).
- Never compared: AI SDK / provider plumbing in payloads (``mastra_reference.PROVIDER_KEYS``), and how
  finely a model splits its text into deltas.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from helpers import chunks_of
from mastra_reference import (
    ask_age,
    find_user,
    flag_tool,
    mastra_chunks,
    mastra_like_model,
    mastra_model_inputs,
    missing_keys,
    names,
    pay_tool,
    reference,
    steps_of,
    troupe_chunks,
    troupe_model_inputs,
)

from troupe import Agent, Memory, MemoryStore, Runtime, SqliteStore
from troupe.errors import TroupeError
from troupe.testing import CallLog

FINAL = "Final answer. Tool results seen: "
ADA = [[("findUser", {"name": "Ada"}, "call-1")]]


def load(name: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    trace = reference(f"traces/{name}.json")
    return trace, steps_of(trace)


async def replay(opening: Any, step: dict[str, Any], expected: list[str] | None = None) -> Any:
    """Run one operation and compare its chunks with the recorded step's; returns the stream."""
    stream = await opening
    got = troupe_chunks(await chunks_of(stream))
    want = mastra_chunks(step)
    assert names(got) == (expected if expected is not None else names(want)), step["op"]
    if expected is None:
        assert missing_keys(want, got) == [], step["op"]
    result = step.get("result") or {}
    if expected is None and result.get("status") == "success":
        assert (await stream.result()).text == result["text"], step["op"]
    return stream


async def refused(opening: Any, step: dict[str, Any], code: str | None = None) -> TroupeError:
    """The operation is refused with the recorded error code (or ``code``, a deliberate difference)."""
    with pytest.raises(TroupeError) as info:
        await opening  # a refused decision raises when asked, before any stream
    assert info.value.code == (code or step["threw"]["id"]), step["op"]
    return info.value


def approver(log: CallLog, agent_id: str = "approver", model: str = "agent-model", **tool: Any) -> Agent:
    options = {"require_approval": True, **tool}
    return Agent(
        agent_id,
        instructions="Use findUser.",
        model=mastra_like_model(log, model, ADA, FINAL),
        tools=[find_user(log, **options)],
    )


@pytest.fixture
def log(tmp_path: Any) -> CallLog:
    return CallLog(tmp_path / "log.jsonl")


async def test_a_approve_and_resume_an_approval_pause(make_runtime, log):
    trace, steps = load("a_approve_stream")
    agent = approver(log)
    make_runtime([agent])
    for case, decide in (
        ("a1.approveToolCall", lambda r: agent.approve_tool_call(run_id=r, tool_call_id="call-1")),
        (
            "a2.resumeStream({approved:true})",
            lambda r: agent.resume_stream({"approved": True}, run_id=r, tool_call_id="call-1"),
        ),
    ):
        paused = await replay(agent.stream("Find the user Ada"), steps[case[:2] + ".stream"])
        await replay(decide(paused.run_id), steps[case])
    assert troupe_model_inputs(log) == mastra_model_inputs(trace)
    assert log.count("tool") == 2


async def test_b_decline_with_the_default_and_a_custom_reason(make_runtime, log):
    trace, steps = load("b_decline_stream")
    agent = approver(log)
    make_runtime([agent])
    for case, reason in (
        ("b1.declineToolCall", None),
        ("b2.declineToolCall(reason)", "Budget approval is required first"),
    ):
        paused = await replay(agent.stream("Find the user Ada"), steps[case[:2] + ".stream"])
        declined = await replay(
            agent.decline_tool_call(run_id=paused.run_id, tool_call_id="call-1", reason=reason), steps[case]
        )
        [denied] = [c for c in declined.chunks if c.type == "tool-output-denied"]
        recorded = steps[case]["fullPayloads"][0]["payload"]
        assert denied.to_wire()["payload"] == recorded
    assert troupe_model_inputs(log) == mastra_model_inputs(trace)
    assert log.count("tool") == 0


async def test_c_approval_asked_for_by_the_request_or_the_agents_defaults(make_runtime, log):
    trace, steps = load("c_request_option")
    plan = [[("findUser", {"name": "Ada"}, "call-1")], [("findUser", {"name": "Bob"}, "call-2")]]
    agent = Agent(
        "c",
        instructions="Use findUser.",
        model=mastra_like_model(log, "agent-model", plan, FINAL),
        tools=[find_user(log)],
    )
    c3 = Agent(
        "c3",
        instructions="Use findUser.",
        model=mastra_like_model(log, "agent-model-c3", ADA, FINAL),
        tools=[find_user(log)],
        default_options={"require_tool_approval": True},
    )
    make_runtime([agent, c3])
    paused = await replay(
        agent.stream("Find Ada and Bob", require_tool_approval=True),
        steps["c1.stream({requireToolApproval:true})"],
    )
    for call in ("call-1", "call-2"):
        op = f"c1.approveToolCall#{call[-1]} (no requireToolApproval repeated)"
        await replay(agent.approve_tool_call(run_id=paused.run_id, tool_call_id=call), steps[op])
    await replay(agent.stream("Find Ada and Bob"), steps["c2.stream (no option) -> no approval expected"])
    paused = await replay(
        c3.stream("Find the user Ada"), steps["c3.stream (defaultOptions.requireToolApproval)"]
    )
    await replay(c3.approve_tool_call(run_id=paused.run_id), steps["c3.approveToolCall"])
    assert troupe_model_inputs(log, "agent-model") == mastra_model_inputs(trace, "agent-model")
    assert troupe_model_inputs(log, "agent-model-c3") == mastra_model_inputs(trace, "agent-model-c3")


def _deletes_only(tool_name: str, args: Any, request_context: Any, workspace: Any) -> bool:
    return tool_name.startswith("delete")


def _throws(tool_name: str, args: Any, request_context: Any, workspace: Any) -> bool:
    raise RuntimeError("policy failed")


async def test_d_approval_decided_by_functions(make_runtime, log):
    trace, steps = load("d_policy_function")
    d1_plan = [[("lookup", {"name": "Ada"}, "call-1")], [("deleteUser", {"name": "Ada"}, "call-2")]]
    d3_plan = [[("pay", {"amount": 50}, "call-1")], [("pay", {"amount": 500}, "call-2")]]
    d1 = Agent(
        "d1",
        model=mastra_like_model(log, "agent-model", d1_plan, FINAL),
        tools=[flag_tool(log, "lookup"), flag_tool(log, "deleteUser")],
    )
    d2 = Agent(
        "d2",
        model=mastra_like_model(log, "agent-model-d2", [[("lookup", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[flag_tool(log, "lookup")],
    )
    d3 = Agent(
        "d3",
        model=mastra_like_model(log, "agent-model-d3", d3_plan, FINAL),
        tools=[pay_tool(log, require_approval=lambda inp, ctx: inp.amount > 100)],
    )
    make_runtime([d1, d2, d3])
    for agent, case, policy in ((d1, "d1", _deletes_only), (d2, "d2", _throws), (d3, "d3", None)):
        options = {} if policy is None else {"require_tool_approval": policy}
        [opening] = [op for op in steps if op.startswith(case + ".stream")]
        paused = await replay(agent.stream("go", **options), steps[opening])
        await replay(agent.approve_tool_call(run_id=paused.run_id), steps[case + ".approveToolCall"])
    for model in ("agent-model", "agent-model-d2", "agent-model-d3"):
        assert troupe_model_inputs(log, model) == mastra_model_inputs(trace, model)


async def test_e_generate_then_decide_with_the_generate_forms(make_runtime, log):
    trace, steps = load("e_generate")
    agent = approver(log)
    make_runtime([agent])
    for case, decide in (
        (
            "e1.approveToolCallGenerate",
            lambda r: agent.approve_tool_call_generate(run_id=r, tool_call_id="call-1"),
        ),
        (
            "e2.declineToolCallGenerate(reason)",
            lambda r: agent.decline_tool_call_generate(run_id=r, tool_call_id="call-1", reason="Not allowed"),
        ),
        ("e3.approveToolCallGenerate (no toolCallId)", lambda r: agent.approve_tool_call_generate(run_id=r)),
    ):
        recorded = steps[case[:2] + ".generate"]["output"]
        paused = await agent.generate("Find the user Ada")
        assert paused.finish_reason == recorded["finishReason"] == "suspended"
        assert paused.text == recorded["text"]
        wire = {k: v for k, v in (paused.suspend_payload or {}).items()}
        assert set(recorded["suspendPayload"]) <= set(_camel_keys(wire))
        done = await decide(paused.run_id)
        output = steps[case]["output"]
        assert (done.finish_reason, done.text) == (output["finishReason"], output["text"])
        assert [c["tool_call_id"] for c in done.tool_calls] == [c["toolCallId"] for c in output["toolCalls"]]
        assert [r["tool_call_id"] for r in done.tool_results] == [
            r["toolCallId"] for r in output["toolResults"]
        ]
    assert troupe_model_inputs(log) == mastra_model_inputs(trace)


def _camel_keys(payload: dict[str, Any]) -> set[str]:
    from troupe.core.chunks import camelize

    return set(camelize(payload))


async def test_f_suspend_and_resume(make_runtime, log):
    trace, steps = load("f_suspend_resume")
    agent = Agent(
        "suspender",
        instructions="Use askAge.",
        model=mastra_like_model(log, "agent-model", [[("askAge", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[ask_age(log)],
    )
    make_runtime([agent])
    paused = await replay(agent.stream("How old is Ada?"), steps["f1.stream"])
    [pause] = [c for c in paused.chunks if c.type == "tool-call-suspended"]
    # The tool's own schema, a JSON string as Mastra's (pydantic writes it, not zod: titles differ).
    ours = json.loads(pause.to_wire()["payload"]["resumeSchema"])
    theirs = json.loads(steps["f1.stream"]["fullPayloads"][0]["payload"]["resumeSchema"])
    assert (ours["required"], ours["properties"]["age"]["type"]) == (theirs["required"], "number")
    await replay(agent.resume_stream({"age": 37}, run_id=paused.run_id), steps["f1.resumeStream({age:37})"])
    paused = await replay(agent.stream("How old is Ada?"), steps["f2.stream"])
    # D3: invalid resume data raises and the run stays paused (Mastra ran the tool with an error).
    await refused(
        agent.resume_stream({"age": "old"}, run_id=paused.run_id), {"op": "f2"}, "AGENT_RESUME_DATA_INVALID"
    )
    assert (await agent.list_suspended_runs()).total == 1
    await agent.decline_tool_call_generate(run_id=paused.run_id)  # settles it; not in the recording
    generated = await agent.generate("How old is Ada?")
    assert generated.finish_reason == "suspended"
    done = await agent.resume_generate({"age": 52}, run_id=generated.run_id)
    assert done.text == steps["f3.resumeGenerate({age:52})"]["output"]["text"]
    mastra = mastra_model_inputs(trace)
    troupe = troupe_model_inputs(log)
    # D3: Mastra's f2 resume reached the model as a validation error; Troupe's f2 was declined instead.
    assert troupe[:3] + troupe[4:] == mastra[:3] + mastra[4:]
    assert troupe[3] == [["call-1", {"type": "text", "value": "Tool call was not approved by the user"}]]


async def test_g_two_gated_calls_in_one_step(make_runtime, log):
    trace, steps = load("g_parallel_approvals")
    two = [[("sendEmail", {"name": "Ada"}, "call-A"), ("chargeCard", {"name": "Bob"}, "call-B")]]
    same = [[("findUser", {"name": "Ada"}, "call-A"), ("findUser", {"name": "Bob"}, "call-B")]]
    gated = {"require_approval": True}
    g1 = Agent(
        "g1",
        model=mastra_like_model(log, "agent-model", two, FINAL),
        tools=[flag_tool(log, "sendEmail", **gated), flag_tool(log, "chargeCard", **gated)],
    )
    g2 = Agent(
        "g2", model=mastra_like_model(log, "agent-model-g2", same, FINAL), tools=[find_user(log, **gated)]
    )
    g3 = Agent(
        "g3",
        model=mastra_like_model(log, "agent-model-g3", two, FINAL),
        tools=[flag_tool(log, "sendEmail", **gated), flag_tool(log, "chargeCard", **gated)],
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
        assert troupe_model_inputs(log, model) == mastra_model_inputs(trace, model)
    assert log.count("tool") == 6


async def test_h_a_subagents_approval_bubbles_to_the_supervisor(make_runtime, log):
    trace, steps = load("h_supervisor")
    worker = Agent(
        "worker",
        model=mastra_like_model(
            log, "worker-model", [[("findUser", {"name": "Ada"}, "worker-call-1")]], "worker result: "
        ),
        tools=[find_user(log, require_approval=True)],
    )
    supervisor = Agent(
        "supervisor",
        model=mastra_like_model(
            log,
            "supervisor-model",
            [[("agent-worker", {"prompt": "Find the user Ada"}, "sup-call-1")]],
            FINAL,
        ),
        agents={"worker": worker},
    )
    leaf = Agent(
        "leaf",
        model=mastra_like_model(
            log, "leaf-model", [[("findUser", {"name": "Ada"}, "leaf-call-1")]], "leaf result: "
        ),
        tools=[find_user(log, require_approval=True)],
    )
    mid = Agent(
        "mid",
        model=mastra_like_model(
            log,
            "mid-model",
            [[("agent-leaf", {"prompt": "Find the user Ada"}, "mid-call-1")]],
            "mid result: ",
        ),
        agents={"leaf": leaf},
    )
    top = Agent(
        "top",
        model=mastra_like_model(
            log, "top-model", [[("agent-mid", {"prompt": "Find the user Ada"}, "top-call-1")]], FINAL
        ),
        agents={"mid": mid},
    )
    make_runtime([supervisor, top])
    for agent, case, call in ((supervisor, "h1.supervisor", "sup-call-1"), (top, "h2.top", "top-call-1")):
        paused = await replay(agent.stream("Find the user Ada"), steps[case + ".stream"])
        [pause] = [c for c in paused.chunks if c.type == "tool-call-approval"]
        assert pause.payload["tool_call_id"] == call and pause.payload["tool_name"] == "findUser"
        await replay(
            agent.approve_tool_call(run_id=paused.run_id, tool_call_id=call), steps[case + ".approveToolCall"]
        )
    for model in ("supervisor-model", "worker-model", "top-model", "mid-model", "leaf-model"):
        assert troupe_model_inputs(log, model) == mastra_model_inputs(trace, model), model


async def test_i_a_second_runtime_on_the_same_file_lists_and_approves(executor, tmp_path, log):
    trace, steps = load("i_restart_libsql")
    db = tmp_path / "shared.db"
    first_agent = approver(log, model="model-instance-1")
    first = Runtime([first_agent], storage=SqliteStore(db), executor=executor)
    try:
        paused = await replay(
            first_agent.stream("Find the user Ada", thread_id="t-1", resource_id="u-1"),
            steps["i1.instance1.stream"],
        )
    finally:
        await first.shutdown()
    agent = approver(log, model="model-instance-2")
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
    # i2 (the same across a real OS process restart) is tests/test_recovery.py's driver tests.
    assert troupe_model_inputs(log) == mastra_model_inputs(trace)[:2]


async def test_j_auto_resume_answers_a_suspend_but_never_an_approval(make_runtime, log):
    _, steps = load("j_auto_resume_memory")
    agent = Agent(
        "j1",
        instructions="Use askAge.",
        model=mastra_like_model(log, "agent-model", [[("askAge", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[ask_age(log)],
        memory=Memory(),
        default_options={"auto_resume_suspended_tools": True},
    )
    j2 = approver(log, "j2", "agent-model-j2")
    j2.memory = Memory()
    make_runtime([agent, j2])
    memory = {"thread_id": "thread-j1", "resource_id": "user-j"}
    await replay(agent.stream("How old is Ada?", **memory), steps["j1.turn1.stream"])
    # D5: the paused call itself is answered (no new model turn re-issuing it).
    turn2 = steps['j1.turn2.stream("She is 37 years old")']
    want = names(mastra_chunks(turn2))
    assert want[:4] == ["start", "step-start", "tool-call", "tool-result"]
    done = await replay(agent.stream("She is 37 years old", **memory), turn2, ["start", *want[3:]])
    # D5: the answer goes to the paused call-1 (Mastra's model re-issued it as call-2).
    assert (await done.result()).text == turn2["result"]["text"].replace("call-2", "call-1")
    memory = {"thread_id": "thread-j2", "resource_id": "user-j"}
    first = await replay(j2.stream("Find the user Ada", **memory), steps["j2.turn1.stream (approval tool)"])
    # "Yes, go ahead" is never an approval: a new turn, gated again, and the first call still waits.
    await replay(j2.stream("Yes, go ahead", **memory), steps['j2.turn2.stream("Yes, go ahead")'])
    assert first.run_id in [r.run_id for r in (await j2.list_suspended_runs()).runs]
    assert log.count("tool") == 2 and [e["tool"] for e in log.entries("tool")] == ["askAge", "askAge"]


async def test_k_errors(make_runtime, log):
    _, steps = load("k_errors")
    agent = approver(log, "errs")
    make_runtime([agent])
    unknown = "no-such-run-id"
    await refused(agent.approve_tool_call(run_id=unknown), steps["k1.approveToolCall(unknown runId)"])
    await refused(agent.decline_tool_call(run_id=unknown), steps["k1b.declineToolCall(unknown runId)"])
    await refused(
        agent.approve_tool_call_generate(run_id=unknown), steps["k1c.approveToolCallGenerate(unknown runId)"]
    )
    # k2 and k7: a call is decided once (D2).
    paused = await replay(agent.stream("Find the user Ada"), steps["k2.stream"])
    await replay(
        agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1"), steps["k2.approveToolCall#1"]
    )
    await refused(
        agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1"),
        steps["k2.approveToolCall#2 (same run again)"],
        "AGENT_DECISION_CONFLICT",
    )
    # k3: two concurrent approvals: one runs the tool, the other is refused (D2; Mastra ran it twice).
    paused = await replay(agent.stream("Find the user Ada"), steps["k3.stream"])
    outcomes = await asyncio.gather(
        *(agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1") for _ in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["DecisionConflictError", "RunResult"]
    # k4: no storage configured means a memory store here; k5 has no Troupe counterpart (D6).
    k4 = approver(log, "k4")
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
    paused = await replay(agent.stream("Find the user Ada"), steps["k7.stream"])
    await replay(
        agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1"), steps["k7.approveToolCall"]
    )
    await refused(
        agent.decline_tool_call(run_id=paused.run_id, tool_call_id="call-1"),
        steps["k7.declineToolCall after approve"],
        "AGENT_DECISION_CONFLICT",
    )
    assert log.count("tool") == 5, "k2, k3 once, k4, k6, k7: no decision ran a tool twice"
