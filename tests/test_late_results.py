"""A result is never lost to a takeover (issues 36 and 41): another host takes a run over while its first
host still runs an approved tool. The call asked about again is in doubt: it cannot be approved or
declined before its deadline. The tool finishes; its host cannot write the run any more, so it records
the outcome in the run's audit log and, the call still being in doubt, takes the run back and goes on
with the result; or, if the run was taken by a host that then died, tells the approver where the run
went, and the host that recovers it uses the outcome instead of the call's interruption. Two runtimes on
one SQLite file, as two processes would; the takeover is made happen while the tool runs (a gate the
test opens), not waited for."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from troupe.core.run import late_results
from troupe.core.vocabulary.state import CallStatus, RunState, ToolCallState

from troupe import Agent, MemoryStore, Runtime, SqliteStore, create_tool
from troupe.errors import RunTakenOverError, ToolCallCompletedError, ToolCallInDoubtError
from troupe.testing import CallLog, FunctionModel, text, tool_call


class Payment(BaseModel):
    to: str
    amount: int


def paying_agent(ledger: CallLog, gate: asyncio.Event | None) -> Agent:
    async def pay(inp: Payment, ctx: Any) -> dict[str, Any]:
        if gate is not None:
            await gate.wait()  # the payment goes out while the test takes the run over
        ledger.record("pay", to=inp.to, amount=inp.amount)
        return {"paid": inp.amount, "to": inp.to}

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        told = [m["content"] for m in messages if m["role"] == "tool"]
        return (
            text("told: " + told[-1]) if told else tool_call("pay", {"to": "vendor", "amount": 10}, id="p1")
        )

    tool = create_tool("pay", "Pay someone", Payment, pay, require_approval=True)
    return Agent("ops", model=FunctionModel(turn), tools=[tool])


async def _approved_and_running(first: Runtime, gate: asyncio.Event) -> tuple[Any, str, asyncio.Task[Any]]:
    """A run paused and approved on the first runtime's host, whose tool is now running there (held by
    ``gate``): the run, that host's owner id, and the approval's task."""
    agent = first.get_agent("ops")
    paused = await agent.generate("pay the vendor")
    owner = first.handle("ops").host.owner  # type: ignore[attr-defined]
    approving = asyncio.create_task(agent.approve_tool_call_generate(run_id=paused.run_id))
    await asyncio.wait_for(_until(lambda: gate._waiters), 30)
    return paused, owner, approving


async def _given_up(approving: asyncio.Task[Any] | None) -> None:
    """Cancel the approval's task if it is still going, and take its outcome: a test that failed leaves
    no task whose error nobody retrieved (its report at the session's end broke pytest once)."""
    if approving is not None:
        approving.cancel()
        await asyncio.gather(approving, return_exceptions=True)


async def _take_over(second: Runtime, run_id: str, owner: str) -> None:
    """What the second runtime's reconciler does once the first host's lease has run out."""
    host = second.handle("ops").host  # type: ignore[attr-defined]
    operation = await host.engine.begin_recovery(run_id, owner)
    assert operation is not None, "the run was not taken over"
    await operation.execute(lambda chunk: None)


@pytest.mark.parametrize("order", ["tool-finishes-after-the-takeover", "recovered-after-it-finished"])
async def test_a_tool_that_finishes_after_a_takeover_keeps_its_result(tmp_path: Path, order: str):
    ledger, gate, db = CallLog(tmp_path / "ledger.jsonl"), asyncio.Event(), tmp_path / "t.db"
    first = Runtime([paying_agent(ledger, gate)], storage=SqliteStore(db), executor="local")
    second = Runtime([paying_agent(ledger, None)], storage=SqliteStore(db), executor="local")
    approving = None
    try:
        agent_b = second.get_agent("ops")
        paused, owner, approving = await _approved_and_running(first, gate)

        if order == "tool-finishes-after-the-takeover":
            await _take_over(second, paused.run_id, owner)  # the call is asked about again, in doubt
            asked = await agent_b.list_suspended_runs()
            pending = [c for r in asked.runs for c in r.pending]
            assert [(c.interrupted, (c.in_doubt or {}).get("owner")) for c in pending] == [(True, owner)]
            with pytest.raises(ToolCallInDoubtError):  # its first host may still be running it
                await agent_b.approve_tool_call_generate(run_id=paused.run_id)
            gate.set()
            # The first host's result completes the call: it takes the run back and goes on with it.
            done = await approving
            # (The model's turn that went ahead of the write the takeover refused is in the stream too.)
            assert done.finish_reason == "stop" and done.text.endswith('told: {"paid": 10, "to": "vendor"}')
        else:  # a host took the run but died before it handled the call, which is still running
            await _claim_ownership(SqliteStore(db), paused.run_id, owner="dead-host")
            gate.set()
            with pytest.raises(RunTakenOverError) as told:
                await approving
            assert told.value.details["outcomes"][0]["result"] == {"paid": 10, "to": "vendor"}
            assert "completed at" in told.value.message
            assert "still marked running there: the run goes on there with this outcome" in told.value.message
            await _take_over(second, paused.run_id, "dead-host")  # recovery takes the recorded outcome
        finished = await _finished(second, paused.run_id)
    finally:
        gate.set()
        await _given_up(approving)
        await first.shutdown()
        await second.shutdown()
    assert ledger.count("pay") == 1, "the payment went out twice"
    assert finished == [{"paid": 10, "to": "vendor"}], "the model was not told the payment happened"


async def _claim_ownership(store: SqliteStore, run_id: str, owner: str) -> None:
    stored = await store.load_run(run_id)
    assert stored is not None and stored.state.calls[0].status == "running"
    stored.state.owner = owner
    await store.save_run(stored.state, expected_version=stored.version)
    await store.close()


async def _until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


async def _finished(runtime: Runtime, run_id: str) -> list[Any]:
    """The tool results the run's model was given, once the run has finished."""
    store = runtime.store()
    async with asyncio.timeout(30):
        while (await store.load_run(run_id)) is not None:
            await asyncio.sleep(0.02)
    kinds = [e.kind for e in await store.list_audit(run_id)]
    assert "completed" in kinds, kinds
    told = [e for e in await store.list_audit(run_id) if e.kind == "completed"]
    return [e.result for e in told]


async def test_a_decision_after_the_deadline_on_a_call_whose_outcome_was_recorded_does_not_run_it_again(
    tmp_path: Path,
):
    """The first host recorded its tool's outcome in the audit log and died before it could take the
    run back; the call's deadline has passed, so a person may decide it on the host that took over. The
    decision finds the recorded outcome: the tool is not run again, the decider is told, and the run goes
    on with that result."""
    ledger, gate, db = CallLog(tmp_path / "ledger.jsonl"), asyncio.Event(), tmp_path / "t.db"
    first = Runtime([paying_agent(ledger, gate)], storage=SqliteStore(db), executor="local")
    second = Runtime(
        [paying_agent(ledger, None)],
        storage=SqliteStore(db),
        executor="local",
        in_doubt_default_s=0,  # the deadline is when the call started: passed already
        in_doubt_margin_s=0,
    )
    approving = None
    try:
        agent_b = second.get_agent("ops")
        paused, owner, approving = await _approved_and_running(first, gate)
        await _take_over(second, paused.run_id, owner)
        # What the first host writes when its tool ends (the payment went out there), before it dies.
        stored = await second.store().load_run(paused.run_id)
        assert stored is not None
        ran = stored.state.calls[0].model_copy(deep=True)
        ran.output, ran.is_error = {"paid": 10, "to": "vendor"}, False
        await late_results.append(second.store(), stored.state, [ran])

        with pytest.raises(ToolCallCompletedError) as told:  # the decider hears it, and why
            await agent_b.approve_tool_call_generate(run_id=paused.run_id)
        assert told.value.details["result"] == {"paid": 10, "to": "vendor"}
        finished = await _finished(second, paused.run_id)  # the run goes on with the recorded result
        assert ledger.count("pay") == 0, "the recorded payment was made again"
        assert finished == [{"paid": 10, "to": "vendor"}]
    finally:
        await _given_up(approving)
        await first.shutdown()
        await second.shutdown()


async def test_a_late_outcome_is_recorded_from_the_call_as_it_ran_and_never_reaches_the_live_call():
    """A sync tool's thread outlives its call (a timeout, a stop): the run goes on with the call's error
    while the thread runs. What the thread returns later is recorded from the copy taken when the call
    started, and the live call, which the model is told about, keeps what the run gave it."""
    store = MemoryStore()
    recorder = late_results.LateOutcomes(store)
    state = RunState(run_id="r1", agent_id="ops")
    call = ToolCallState(
        tool_call_id="c1", tool_name="work", args={"name": "job-1"}, status=CallStatus.RUNNING
    )
    arrived = recorder.later(state, call, lambda: "the call had timed out after 0.5 s")

    # Meanwhile the call timed out, and the run went on with that (its args edited for the record).
    call.output, call.is_error, call.status = {"error": "timed out"}, True, CallStatus.DONE
    call.exec_args = {"name": "changed after the call started"}
    arrived({"done": "job-1"}, None)
    await recorder.drain()

    assert (call.output, call.is_error) == ({"error": "timed out"}, True), "the late outcome reached the run"
    [late] = [e for e in await store.list_audit("r1") if e.kind == "completed"]
    assert (late.result, late.is_error, late.args) == ({"done": "job-1"}, False, {"name": "job-1"})
    assert late.reason == "the call had timed out after 0.5 s"
