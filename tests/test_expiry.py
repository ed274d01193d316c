"""Expiry: a pause that waits past its approval_timeout is declined, and the model is told why.

Time is a clock the test moves (``Runtime(clock=...)``), so nothing here depends on how often the runtime's
reconciler sweeps: until the clock moves, nothing is due; once it has, whichever of its rounds or an
explicit ``expire_due()`` gets there first declines the pause, exactly once.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest
from clocks import FileClock
from helpers import chunks_of, delete_tool, one_call

from troupe import Agent, Runtime, SqliteStore
from troupe.errors import DecisionConflictError, PauseExpiredError
from troupe.testing import CallLog


@pytest.fixture
def clock(tmp_path) -> FileClock:
    return FileClock(tmp_path / "now")


async def test_a_pause_carries_its_deadline_and_a_late_decision_is_refused(make_runtime, calls, clock):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = make_runtime([agent], clock=clock)

    stream = await agent.stream("delete a", approval_timeout=30)
    approval = next(c for c in await chunks_of(stream) if c.type == "tool-call-approval")
    assert datetime.fromisoformat(approval.payload["expires_at"]) == clock() + timedelta(seconds=30)
    listed = await agent.list_suspended_runs()
    assert listed.runs[0].pending[0].expires_at is not None
    assert await runtime.expire_due() == {"ops": []}, "not due while the clock stands still"
    clock.advance(31)

    with pytest.raises(PauseExpiredError, match="expired") as refused:
        await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
    assert isinstance(refused.value, DecisionConflictError)

    # The refusal also set the expiry going (if a round had not already): the run goes on without it.
    observed = await agent.observe_stream(run_id=stream.run_id)
    result = await observed.result()
    assert "No decision was made in time" in result.text
    assert calls.count() == 0
    [entry] = await runtime.store().list_audit(stream.run_id)
    assert (entry.kind, entry.decided_by) == ("expired", "expiry")


def timing_out(calls: CallLog) -> Agent:
    """An agent whose call to ``delete_record`` pauses for at most 60 s."""
    return Agent(
        "ops",
        model=one_call("delete_record", {"id": "a"}),
        tools=[delete_tool(calls)],
        default_options={"approval_timeout": 60},
    )

async def test_expired_pauses_are_declined_without_anyone_deciding(make_runtime, calls, clock):
    agent = timing_out(calls)
    runtime = make_runtime([agent], clock=clock)
    slow = await agent.generate("delete a")
    patient = await agent.generate("delete a", approval_timeout=3600)
    assert await runtime.expire_due() == {"ops": []}
    clock.advance(61)

    swept = await runtime.expire_due()

    assert swept["ops"] in ([slow.run_id], []), "only the overdue run (unless a round swept it first)"
    result = await (await agent.observe_stream(run_id=slow.run_id)).result()
    assert result.text.startswith("call-1=No decision was made in time")
    still = await agent.list_suspended_runs()
    assert [r.run_id for r in still.runs] == [patient.run_id]
    assert [e.kind for e in await runtime.store().list_audit(slow.run_id)] == ["expired"], "declined once"
    assert await runtime.store().list_audit(patient.run_id) == []
    assert await runtime.expire_due() == {"ops": []}
    assert calls.count() == 0


async def test_a_sweep_working_from_a_stale_listing_declines_nothing_not_yet_due(tmp_path, calls, clock):
    """The sweep lists overdue runs first and locks each one after; by then a decision may have moved a
    run on to a fresh pause. Under the lock the deadline is read again, so a pause not yet due stays."""
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local", clock=clock)
    try:
        paused = await agent.generate("delete a", approval_timeout=60)
        engine = runtime.handle("ops").host.engine
        clock.advance(59)

        assert await engine.begin_expiry(paused.run_id) is None
        assert await runtime.store().list_audit(paused.run_id) == []
        listed = await agent.list_suspended_runs()
        assert [r.run_id for r in listed.runs] == [paused.run_id]
    finally:
        await runtime.shutdown()


async def test_a_run_that_cannot_be_read_does_not_keep_other_pauses_from_expiring(make_runtime, calls, clock):
    """The most overdue pause is in a run this Troupe cannot read (a newer Troupe wrote it): the sweep
    leaves it as it is and declines the next one. Before the fix the sweep stopped at it, every round,
    so no pause of the agent ever expired."""
    import json
    import sqlite3
    from contextlib import closing

    agent = timing_out(calls)
    runtime = make_runtime([agent], clock=clock)
    unreadable = await agent.generate("delete a")
    clock.advance(1)
    overdue = await agent.generate("delete a")
    with closing(sqlite3.connect(runtime.store().path)) as raw, raw:
        [raw_body] = raw.execute("SELECT body FROM runs WHERE run_id = ?", (unreadable.run_id,)).fetchone()
        body = json.loads(raw_body)
        body["schema_version"] = 99
        raw.execute("UPDATE runs SET body = ? WHERE run_id = ?", (json.dumps(body), unreadable.run_id))
    clock.advance(61)

    swept = await runtime.expire_due()

    assert swept["ops"] in ([overdue.run_id], []), "only the readable run (unless a round swept it first)"
    result = await (await agent.observe_stream(run_id=overdue.run_id)).result()
    assert result.text.startswith("call-1=No decision was made in time")
    assert await runtime.store().list_audit(unreadable.run_id) == [], "the unreadable run is left as it is"
    assert calls.count() == 0


async def test_a_run_whose_time_ran_out_while_it_waited_is_stopped_on_the_runtimes_clock(
    make_runtime, calls, clock
):
    """With ``duration_counts_waiting`` the pause expires when the run's ``max_duration_s`` does. Once
    the runtime's clock passes that, the run is stopped (``max-duration``): its pause is not declined
    as if nobody had answered, which would give its model another turn past its time."""
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = make_runtime([agent], clock=clock)
    paused = await agent.generate("delete a", max_duration_s=60, duration_counts_waiting=True)
    assert await runtime.expire_due() == {"ops": []}
    clock.advance(600)  # well past the end (the run was created a moment after the clock was set)

    await runtime.expire_due()  # (or a round of the runtime's own, first)

    store = runtime.store()
    async with asyncio.timeout(30):
        while await store.load_run(paused.run_id) is not None:
            await asyncio.sleep(0.02)
    audit = await store.list_audit(paused.run_id)
    assert [(e.kind, e.decided_by) for e in audit] == [("cancelled", "max-duration")] * 2
    assert "max_duration_s of 60 s" in (audit[0].reason or "")
    assert calls.count() == 0


async def test_a_run_cancelled_while_the_sweep_claims_its_expiry_is_no_error_of_the_sweep(
    tmp_path, calls, clock
):
    """The sweep reads an overdue run, and the run is cancelled before the sweep's claim lands (the
    cancel wins the compare-and-set). Nothing in it is overdue any more: the sweep goes on to the next
    run, and its caller gets no error about a run it never asked about."""
    from store_hooks import HookedStore

    store = HookedStore(SqliteStore(tmp_path / "t.db"))
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=store, executor="local", clock=clock)
    try:
        paused = await agent.generate("delete a", approval_timeout=30)
        clock.advance(31)
        reached, release = store.hold_next_save(paused.run_id)
        sweeping = asyncio.create_task(runtime.expire_due())
        await reached.wait()  # the expiry read the run, ruled, and is about to write its decline

        await agent.cancel_run(paused.run_id, reason="not needed")
        release.set()

        assert paused.run_id not in (await sweeping)["ops"]
        audit = await runtime.store().list_audit(paused.run_id)
        assert [(e.kind, e.reason) for e in audit] == [("cancelled", "not needed")] * 2, "never declined"
        assert calls.count() == 0
    finally:
        await runtime.shutdown()
