"""Supervisor trees: pauses below surface at the top with the top's ids; decisions route back down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from blocking import kill_actor, wait_for
from helpers import chunks_of, delete_tool, echo_model, pay_tool, types_of, weather_tool
from trees import delegating, leaf, three_levels, two_levels
from troupe.core.vocabulary.mcp_servers import MCPStdio

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, FunctionModel, text, tool_call


async def test_a_subagent_approval_surfaces_at_the_top_and_the_decision_routes_down(make_runtime, calls):
    sup = two_levels(calls)
    make_runtime([sup])

    stream = await sup.stream("please delete u1")
    chunks = await chunks_of(stream)

    nested = [c.payload["output"]["type"] for c in chunks if c.type == "tool-output"]
    assert nested[:3] == ["start", "step-start", "tool-call"]
    assert all(c.payload["tool_call_id"] == "d1" for c in chunks if c.type == "tool-output")
    [approval] = [c for c in chunks if c.type == "tool-call-approval"]
    assert approval.run_id == stream.run_id
    assert approval.payload["tool_call_id"] == "d1", "the top agent's own delegation call id"
    assert approval.payload["tool_name"] == "delete_record"
    assert approval.payload["args"] == {"id": "u1"}
    assert approval.payload["agent_path"] == ["sup", "data"]
    assert chunks[-1] is approval, "a paused stream ends at its pause"
    assert calls.count() == 0

    approved = await sup.approve_tool_call(run_id=stream.run_id, tool_call_id="d1")
    result = await approved.result()
    assert result.text == 'sup: d1=call-leaf-1={"deleted": "u1"}'.replace("call-leaf-1", "leaf-1")
    assert calls.count("delete_record") == 1


async def test_decline_at_the_top_reaches_the_subagents_model(make_runtime, calls):
    sup = two_levels(calls)
    make_runtime([sup])

    paused = await sup.generate("please delete u1")
    assert paused.finish_reason == "suspended"
    assert paused.suspend_payload["tool_call_id"] == "d1"
    done = await sup.decline_tool_call_generate(run_id=paused.run_id, tool_call_id="d1", reason="not u1")

    assert calls.count() == 0
    assert done.text == "sup: d1=leaf-1=not u1"


@pytest.mark.parametrize("decision", ["approve", "decline"])
async def test_three_levels_deep_via_stream_and_generate(make_runtime, calls, decision):
    top = three_levels(calls)
    make_runtime([top])

    stream = await top.stream("tidy up")
    approval = next(c for c in await chunks_of(stream) if c.type == "tool-call-approval")
    assert approval.payload["agent_path"] == ["top", "mid", "data"]
    assert approval.payload["tool_call_id"] == "t1"
    assert approval.payload["tool_name"] == "delete_record"

    if decision == "approve":
        done = await top.approve_tool_call_generate(run_id=stream.run_id, tool_call_id="t1")
        assert done.text == 'top: t1=mid: m1=leaf-1={"deleted": "u1"}'
        assert calls.count() == 1
    else:
        declined = await top.decline_tool_call(run_id=stream.run_id, tool_call_id="t1", reason="stop")
        assert (await declined.result()).text == "top: t1=mid: m1=leaf-1=stop"
        assert calls.count() == 0


async def test_a_subagent_suspend_is_answered_at_the_top_with_resume_stream(make_runtime, calls):
    planner = Agent(
        "planner", model=echo_model(tool_call("weather", {}, id="w1")), tools=[weather_tool(calls)]
    )
    sup = Agent("sup", model=delegating("sup", ("planner", "weather?", "d1")), agents={"planner": planner})
    make_runtime([sup])

    stream = await sup.stream("what's the weather?")
    suspended = next(c for c in await chunks_of(stream) if c.type == "tool-call-suspended")
    assert suspended.payload["suspend_payload"] == {"message": "Which city?"}
    assert suspended.payload["agent_path"] == ["sup", "planner"]
    assert suspended.payload["resume_schema"]["required"] == ["city"]

    resumed = await sup.resume_stream({"city": "Rome"}, run_id=stream.run_id)
    result = await resumed.result()
    assert result.text == 'sup: d1=w1={"city": "Rome", "forecast": "sunny"}'


async def test_parallel_delegations_are_pending_at_once_and_decided_in_reverse_order(make_runtime, calls):
    billing = Agent(
        "billing",
        model=echo_model(tool_call("pay", {"to": "ann", "amount": 7}, id="p1")),
        tools=[pay_tool(calls, require_approval=True)],
    )
    sup = Agent(
        "sup",
        model=delegating(
            "sup",
            ("data", "delete u1", "d1"),
            ("data", "delete u1 again", "d2"),
            ("billing", "pay ann", "d3"),
        ),
        agents={"data": leaf(calls), "billing": billing},
    )
    make_runtime([sup])

    paused = await sup.generate("do all three")
    # The delegations ran at once: their pauses are listed in the order they happened.
    pending = {p["tool_call_id"]: p["agent_path"] for p in paused.pending_tool_calls}
    assert pending == {"d1": ["sup", "data"], "d2": ["sup", "data"], "d3": ["sup", "billing"]}

    third = await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d3")
    assert sorted(p["tool_call_id"] for p in third.pending_tool_calls) == ["d1", "d2"]
    await sup.decline_tool_call_generate(run_id=paused.run_id, tool_call_id="d2", reason="once is enough")
    done = await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1")

    assert done.text == (
        'sup: d1=leaf-1={"deleted": "u1"} | d2=leaf-1=once is enough | d3=p1={"paid": 7, "to": "ann"}'
    )
    assert calls.count("delete_record") == 1 and calls.count("pay") == 1


async def test_each_agent_lists_its_own_run_and_the_top_shows_the_leaf_action(make_runtime, calls):
    sup = two_levels(calls)
    runtime = make_runtime([sup])
    paused = await sup.generate("please delete u1", resource_id="u1")

    top = await sup.list_suspended_runs()
    below = await runtime.get_agent("data").list_suspended_runs()

    [top_run] = top.runs
    assert top_run.run_id == paused.run_id
    pending = top_run.pending[0]
    assert (pending.tool_call_id, pending.tool_name, pending.args) == ("d1", "delete_record", {"id": "u1"})
    assert pending.agent_path == ["sup", "data"]
    [leaf_run] = below.runs
    assert leaf_run.run_id != paused.run_id
    assert leaf_run.resource_id == "u1"
    assert leaf_run.pending[0].tool_call_id == "leaf-1"
    assert leaf_run.pending[0].agent_path == ["data"]


async def test_a_subagents_own_defaults_gate_its_tools(make_runtime, calls):
    careful = Agent(
        "data",
        model=echo_model(tool_call("pay", {"to": "bo", "amount": 1}, id="p1")),
        tools=[pay_tool(calls)],
        default_options={"require_tool_approval": True},
    )
    sup = Agent("sup", model=delegating("sup", ("data", "pay bo", "d1")), agents={"data": careful})
    make_runtime([sup])

    paused = await sup.generate("pay bo", require_tool_approval=False)

    assert paused.finish_reason == "suspended"
    assert paused.suspend_payload["tool_name"] == "pay"
    assert calls.count() == 0


async def test_two_pauses_inside_one_delegation_are_decided_one_by_one(make_runtime, calls):
    both = Agent(
        "data",
        model=echo_model(
            tool_call("delete_record", {"id": "a"}, id="x1"), tool_call("delete_record", {"id": "b"}, id="x2")
        ),
        tools=[delete_tool(calls)],
    )
    sup = Agent("sup", model=delegating("sup", ("data", "delete a and b", "d1")), agents={"data": both})
    make_runtime([sup])

    paused = await sup.generate("go")
    first, second = paused.pending_tool_calls
    assert first["tool_call_id"] == second["tool_call_id"] == "d1"
    assert first["fingerprint"] != second["fingerprint"]

    # The fingerprint picks which of the two a decision is for.
    after = await sup.decline_tool_call_generate(
        run_id=paused.run_id, tool_call_id="d1", fingerprint=first["fingerprint"], reason="keep a"
    )
    assert [p["args"] for p in after.pending_tool_calls] == [{"id": "b"}]
    done = await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1")

    assert [e["id"] for e in calls.entries()] == ["b"]
    assert done.text == 'sup: d1=x1=keep a | x2={"deleted": "b"}'


async def test_an_expired_pause_below_is_declined_from_the_top(make_runtime, calls):
    sup = two_levels(calls)
    runtime = make_runtime([sup])
    paused = await sup.generate("please delete u1", approval_timeout=0.2)
    import asyncio

    await asyncio.sleep(0.4)
    assert await runtime.expire_due() == {"sup": [paused.run_id], "data": []}
    result = await (await sup.observe_stream(run_id=paused.run_id)).result()

    assert result.text.startswith("sup: d1=leaf-1=No decision was made in time")
    assert calls.count() == 0


async def test_a_cold_restart_between_pause_and_decision_at_depth_two(tmp_path: Path, executor):
    calls = CallLog(tmp_path / "calls.jsonl")
    db = tmp_path / "tree.db"
    first = three_levels(calls)
    runtime = Runtime([first], storage=SqliteStore(db), executor=executor)  # type: ignore[arg-type]
    paused = await first.generate("tidy up")
    await runtime.shutdown()

    again = three_levels(calls)
    fresh = Runtime([again], storage=SqliteStore(db), executor=executor)  # type: ignore[arg-type]
    try:
        listed = await again.list_suspended_runs()
        assert [p.agent_path for r in listed.runs for p in r.pending] == [["top", "mid", "data"]]
        done = await again.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="t1")
        assert done.text == 'top: t1=mid: m1=leaf-1={"deleted": "u1"}'
        assert calls.count() == 1
        store = fresh.store()
        for agent_id in ("top", "mid", "data"):
            assert await store.list_running_runs(agent_id) == []
            assert (await fresh.get_agent("top").list_suspended_runs()).total == 0
    finally:
        await fresh.shutdown()


async def test_a_killed_subagent_actor_is_restarted_and_the_delegated_run_finishes_once(
    tmp_path: Path, ray_session
):
    from blocking import blocking_tool

    calls = CallLog(tmp_path / "calls.jsonl")
    gate = tmp_path / "gate"
    worker = Agent(
        "worker",
        model=echo_model(tool_call("work", {"name": "j"}, id="w1")),
        tools=[blocking_tool(calls, str(gate), idempotent=True)],
    )
    sup = Agent("sup", model=delegating("sup", ("worker", "do the job", "d1")), agents={"worker": worker})
    runtime = Runtime([sup], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        stream = await sup.stream("go")
        await wait_for(lambda: calls.count("work") == 1, what="the subagent's tool to start")
        await kill_actor(runtime.handle("worker").actor)
        gate.touch()
        chunks = await chunks_of(stream)

        nested_starts = [
            c.payload["output"]["payload"]
            for c in chunks
            if c.type == "tool-output" and c.payload["output"]["type"] == "start"
        ]
        assert nested_starts[-1].get("recovered") is True, "the stream says the subagent was recovered"
        assert types_of(chunks).count("finish") == 1
        result = await stream.result()
        assert result.text == 'sup: d1=w1={"done": "j"}'
        finished = [e for e in calls.entries("work") if e["phase"] == "finished"]
        assert len(finished) == 1
    finally:
        await runtime.shutdown()


async def test_a_new_process_on_the_same_redis_decides_a_pause_at_depth_two(
    tmp_path: Path, redis_url: str, redis_prefix: str, ray_session
):
    """The pause was made (and the process that made it has exited) on Ray; a fresh process with its own
    runtime over the same Redis routes the decision down two levels."""
    import os
    import subprocess
    import sys

    from troupe import RedisStore

    log = tmp_path / "calls.jsonl"
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])}
    done = subprocess.run(
        [sys.executable, str(tests / "tree_driver.py"), redis_url, redis_prefix, str(log)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    _, run_id, call_id = next(line for line in done.stdout.splitlines() if line.startswith("PAUSED")).split()

    top = three_levels(CallLog(log))
    runtime = Runtime([top], storage=RedisStore.from_url(redis_url, prefix=redis_prefix), executor="ray")
    try:
        listed = await top.list_suspended_runs()
        assert [(r.run_id, r.pending[0].agent_path) for r in listed.runs] == [
            (run_id, ["top", "mid", "data"])
        ]
        done_result = await top.approve_tool_call_generate(run_id=run_id, tool_call_id=call_id)
        assert done_result.text == 'top: t1=mid: m1=leaf-1={"deleted": "u1"}'
        assert CallLog(log).count("delete_record") == 1
    finally:
        await runtime.shutdown()


async def test_a_subagent_actor_dying_while_it_takes_the_run_is_followed_after_its_restart(
    tmp_path: Path, ray_session
):
    """The subagent's tool kills its own actor process the first time it runs, before the supervisor
    has even had the first answer to its call: the run was already durable, so the restarted actor
    recovers it (the tool is idempotent: it runs again) and the supervisor follows it to the end."""
    import os
    import signal

    from pydantic import BaseModel

    from troupe import create_tool

    calls = CallLog(tmp_path / "calls.jsonl")
    marker = str(tmp_path / "crashed-once")

    class Job(BaseModel):
        name: str

    def crash_once(inp: Job, ctx):
        calls.record("work", run_id=ctx.run_id)
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return {"done": inp.name}

    worker = Agent(
        "worker",
        model=echo_model(tool_call("work", {"name": "j"}, id="w1")),
        tools=[create_tool("work", "work", Job, crash_once, idempotent=True)],
    )
    sup = Agent("sup", model=delegating("sup", ("worker", "do the job", "d1")), agents={"worker": worker})
    runtime = Runtime([sup], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        result = await (await sup.stream("go")).result()
        assert result.text == 'sup: d1=w1={"done": "j"}'
        assert calls.count("work") == 2, "ran, died with its actor, ran again after the restart"
        assert len({e["run_id"] for e in calls.entries("work")}) == 1, "the same subagent run both times"
    finally:
        await runtime.shutdown()


# ---- delegations that go wrong before the subagent runs ---------------------------------------------------


async def test_a_subagent_whose_run_cannot_start_is_a_tool_error_the_supervisor_hears(make_runtime, calls):
    """Its MCP server will not open, so its host cannot start the run: the supervisor's model hears
    that, as it would a subagent that started and failed, and the supervisor's run goes on."""
    broken = MCPStdio("broken", "/nonexistent/mcp-server-binary")
    sub = Agent("data", description="d", model=echo_model(text("never")), mcp_servers=[broken])
    sup = Agent("sup", model=delegating("sup", ("data", "do it", "d1")), agents={"data": sub})
    make_runtime([sup])

    result = await sup.generate("go")

    assert result.finish_reason == "stop"
    assert result.text.startswith('sup: d1={"error": "the subagent could not start: MCPServerError: ')


async def test_a_call_id_the_model_repeats_in_a_later_step_delegates_afresh(make_runtime):
    """Local OpenAI-compatible servers say ``call_0`` at every step. The second delegation is its own
    call (renamed where the turn enters the run), so it starts a subagent run of its own rather than
    landing on the first one's finished run."""

    def sub_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return text(f"did {[m['content'] for m in messages if m['role'] == 'user'][-1]}")

    def sup_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        results = [f"{m['tool_call_id']}={m['content']}" for m in messages if m["role"] == "tool"]
        if len(results) < 2:
            return tool_call("agent-data", {"prompt": f"task {len(results) + 1}"}, id="call_0")
        return text(" | ".join(results))

    sub = Agent("data", description="d", model=FunctionModel(sub_turn))
    sup = Agent("sup", model=FunctionModel(sup_turn), agents={"data": sub})
    make_runtime([sup])

    stream = await sup.stream("go")
    chunks = await chunks_of(stream)
    result = await stream.result()

    assert result.finish_reason == "stop"
    assert result.text == "call_0=did task 1 | call_0-step2=did task 2"
    said = [c.payload["tool_call_id"] for c in chunks if c.type in ("tool-call", "tool-result")]
    assert said == ["call_0", "call_0", "call_0-step2", "call_0-step2"]
