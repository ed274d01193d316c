"""Fault injection (bounded form for CI): crash the driver at every checkpoint boundary, redis-server at
every one too, and an agent actor at every third; each time the run must settle with the guarantees
intact. The full matrix (every boundary for every target) is ``python tests/fault_harness.py full``.

With a seed, the client cancels the run at random instead of deciding (issue 41): cancels mixed with
approvals and kills lose nothing (an acknowledged cancel is on record and the run never goes on after
it) and run nothing twice.

Also races: the same call approved from ten clients at once, and approve racing decline, run the tool
at most once, every time, within one runtime and across two processes' runtimes on one store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fault_cases import run_matrix
from helpers import delete_tool, one_call

from troupe import Agent, Runtime, SqliteStore
from troupe.errors import DecisionConflictError
from troupe.testing import CallLog


@pytest.mark.parametrize(("target", "every"), [("driver", 1), ("redis", 1), ("actor", 3)])
def test_every_checkpoint_boundary_survives_a_crash(target: str, every: int, ray_session):
    address = ray_session.get_runtime_context().gcs_address if target == "actor" else None

    failures = run_matrix([target], every=every, ray_address=address)

    assert failures == [], "\n".join(
        f"boundary {f['boundary']} ({f['at']}): {f['problems']}" for f in failures
    )


# Seeds whose client cancels the run at different points: at its first pause (seed 1), and at its second,
# once it has decided the first call (seed 10): ``random.Random(seed).random() < 0.5`` at each pause.
CANCEL_SEEDS = (1, 10)


@pytest.mark.parametrize("seed", CANCEL_SEEDS)
@pytest.mark.parametrize(("target", "every"), [("driver", 1), ("redis", 2)])
def test_random_cancels_mixed_with_decisions_and_kills_lose_nothing_and_run_nothing_twice(
    target: str, every: int, seed: int
):
    failures = run_matrix([target], every=every, seed=seed)

    assert failures == [], "\n".join(
        f"boundary {f['boundary']} ({f['at']}): {f['problems']}" for f in failures
    )


def _approval_agent(log: CallLog) -> Agent:
    return Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(log)])


async def _race(decisions: list, log: CallLog) -> None:
    outcomes = await asyncio.gather(*decisions, return_exceptions=True)
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, DecisionConflictError) for o in losers), losers
    assert log.count("delete_record") == (1 if "deleted" in winners[0].text else 0)


async def test_ten_clients_approving_one_call_run_it_once_every_time(make_runtime, tmp_path: Path):
    for attempt in range(10):
        log = CallLog(tmp_path / f"calls-{attempt}.jsonl")
        agent = _approval_agent(log)
        make_runtime([agent], storage=SqliteStore(tmp_path / f"race-{attempt}.db"))
        paused = await agent.generate("delete x")

        await _race(
            [
                agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1")
                for _ in range(10)
            ],
            log,
        )


async def test_approve_racing_decline_decides_once_every_time(make_runtime, tmp_path: Path):
    for attempt in range(10):
        log = CallLog(tmp_path / f"calls-{attempt}.jsonl")
        agent = _approval_agent(log)
        make_runtime([agent], storage=SqliteStore(tmp_path / f"race-{attempt}.db"))
        paused = await agent.generate("delete x")
        decide = [agent.approve_tool_call_generate, agent.decline_tool_call_generate]

        await _race([decide[i % 2](run_id=paused.run_id, tool_call_id="call-1") for i in range(10)], log)


async def test_two_runtimes_on_one_store_racing_to_approve_run_the_tool_once(tmp_path: Path):
    """Two hosts (as two processes would have) share only the store: its compare-and-set decides."""
    for attempt in range(10):
        log = CallLog(tmp_path / f"calls-{attempt}.jsonl")
        db = tmp_path / f"shared-{attempt}.db"
        first, second = _approval_agent(log), _approval_agent(log)
        one = Runtime([first], storage=SqliteStore(db), executor="local")
        two = Runtime([second], storage=SqliteStore(db), executor="local")
        try:
            paused = await first.generate("delete x")
            await _race(
                [
                    agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1")
                    for agent in (first, second) * 5
                ],
                log,
            )
        finally:
            await one.shutdown()
            await two.shutdown()
