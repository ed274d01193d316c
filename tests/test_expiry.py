"""Expiry: a pause that waits past its approval_timeout is declined, and the model is told why."""

from __future__ import annotations

import asyncio

import pytest
from helpers import chunks_of, delete_tool, one_call

from troupe import Agent
from troupe.errors import DecisionConflictError, PauseExpiredError


async def test_a_pause_carries_its_deadline_and_a_late_decision_is_refused(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = make_runtime([agent])

    stream = await agent.stream("delete a", approval_timeout=0.3)
    approval = next(c for c in await chunks_of(stream) if c.type == "tool-call-approval")
    assert "expires_at" in approval.payload
    listed = await agent.list_suspended_runs()
    assert listed.runs[0].pending[0].expires_at is not None
    await asyncio.sleep(0.5)

    with pytest.raises(PauseExpiredError, match="expired") as refused:
        await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
    assert isinstance(refused.value, DecisionConflictError)

    # The refusal also set the expiry going: the run continues without the tool.
    observed = await agent.observe_stream(run_id=stream.run_id)
    result = await observed.result()
    assert "No decision was made in time" in result.text
    assert calls.count() == 0
    [entry] = await runtime.store().list_audit(stream.run_id)
    assert (entry.kind, entry.decided_by) == ("expired", "expiry")


async def test_expired_pauses_are_declined_without_anyone_deciding(make_runtime, calls):
    agent = Agent(
        "ops",
        model=one_call("delete_record", {"id": "a"}),
        tools=[delete_tool(calls)],
        default_options={"approval_timeout": 0.2},
    )
    runtime = make_runtime([agent])
    slow = await agent.generate("delete a")
    patient = await agent.generate("delete a", approval_timeout=3600)
    await asyncio.sleep(0.4)

    swept = await runtime.expire_due()

    assert swept == {"ops": [slow.run_id]}
    result = await (await agent.observe_stream(run_id=slow.run_id)).result()
    assert result.text.startswith("call-1=No decision was made in time")
    still = await agent.list_suspended_runs()
    assert [r.run_id for r in still.runs] == [patient.run_id]
    assert calls.count() == 0
