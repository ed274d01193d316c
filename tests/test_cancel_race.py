"""A cancel racing an approval of the same call, from another runtime over Redis (issue 41): the two are
claimed by compare-and-set on the run, as two approvals are, so exactly one wins every time, the loser
hears a 409 naming the winner, and the tool runs at most once (and only if the approval won)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from pathlib import Path

import pytest
from helpers import delete_tool, one_call
from store_hooks import HookedStore

from troupe import Agent, RedisStore, Runtime
from troupe.errors import DecisionConflictError, RunCancelledError
from troupe.testing import CallLog

pytestmark = pytest.mark.redis
ROUNDS = 10


def _agent(log: CallLog) -> Agent:
    return Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(log)])


async def test_a_cancel_racing_an_approval_from_another_runtime_has_exactly_one_winner(
    executor: str, redis_url: str, tmp_path: Path
):
    won: Counter[str] = Counter()
    for attempt in range(ROUNDS):
        prefix = f"race-{uuid.uuid4().hex[:8]}:"
        log = CallLog(tmp_path / f"calls-{attempt}.jsonl")
        approver, canceller = _agent(log), _agent(log)
        stores = [HookedStore(RedisStore.from_url(redis_url, prefix=prefix), name) for name in ("one", "two")]
        one = Runtime(
            [approver], storage=stores[0] if executor == "local" else stores[0].inner, executor=executor
        )  # type: ignore[arg-type]
        two = Runtime([canceller], storage=stores[1], executor="local")  # type: ignore[arg-type]
        try:
            paused = await approver.generate("delete x", started_by="alice")
            seen = paused.suspend_payload or {}
            if executor == "local" and attempt % 2 == 0:
                # Both have decided to write before either does: the store's compare-and-set picks one.
                meet = asyncio.Barrier(2)
                for store in stores:
                    store.meet_before_save(paused.run_id, meet)
            call = {"tool_call_id": seen["tool_call_id"], "fingerprint": seen["fingerprint"]}
            approve = approver.approve_tool_call_generate(run_id=paused.run_id, decided_by="bob", **call)
            cancel = canceller.cancel_run(paused.run_id, reason="race", cancelled_by="alice", **call)
            # Each sent first in turn, so each gets its chances to win.
            first, second = (approve, cancel) if attempt % 2 else (cancel, approve)
            outcomes = await asyncio.gather(first, second, return_exceptions=True)
            approved, cancelled = outcomes if attempt % 2 else outcomes[::-1]
            losers = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(losers) == 1, outcomes
            assert isinstance(losers[0], DecisionConflictError), losers
            if isinstance(cancelled, BaseException):  # the approval won
                assert "approved by bob" in str(cancelled), cancelled
                assert log.count("delete_record") == 1
                won["approval"] += 1
            else:
                assert isinstance(approved, RunCancelledError) and "cancelled by alice" in str(approved)
                await asyncio.sleep(0.2)
                assert log.count("delete_record") == 0
                won["cancel"] += 1
        finally:
            await one.shutdown()
            await two.shutdown()
    print(f"\n{executor}: {ROUNDS} races, won by {dict(won)}")
    assert sum(won.values()) == ROUNDS
