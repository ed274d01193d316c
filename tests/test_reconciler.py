"""Supervision from one reconciliation loop per Runtime (``troupe.supervisor.reconciler``): runs of dead
hosts are taken over exactly once even when two runtimes look at the same store at the same moment; a
run its own live host holds without driving it is driven on; hosts of other processes are left alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from blocking import wait_for
from store_hooks import HookedStore
from troupe.core.vocabulary.state import RunState

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import FunctionModel, text


def answering(turns: list[str], id: str = "ops") -> Agent:
    def reply(messages: list[dict[str, Any]], tools: Any) -> Any:
        turns.append(id)
        return text("done")

    return Agent(id, model=FunctionModel(reply))


def orphan(run_id: str, owner: str) -> RunState:
    """A run a host left in flight: status running, under ``owner``'s lease, one user message."""
    return RunState(run_id=run_id, agent_id="ops", owner=owner, messages=[{"role": "user", "content": "go"}])


async def test_two_runtimes_finding_one_orphan_at_once_take_it_over_once(tmp_path: Path):
    """Both runtimes' hosts read the orphan and decide to take it before either writes (a barrier in
    front of the takeover's save): the compare-and-set lets one through and the other does nothing."""
    db = tmp_path / "t.db"
    await SqliteStore(db).create_run(orphan("lost", "a-host-that-died"))
    turns: list[str] = []
    stores = [HookedStore(SqliteStore(db), name) for name in ("first", "second")]
    meet = asyncio.Barrier(2)
    for store in stores:
        store.meet_before_save("lost", meet)
    runtimes = [Runtime([answering(turns)], storage=s, executor="local") for s in stores]
    try:
        found = await asyncio.wait_for(asyncio.gather(*(r.recover(0.0) for r in runtimes)), 30)

        assert sorted(found, key=lambda f: len(f["ops"])) == [{"ops": []}, {"ops": ["lost"]}]
        assert [e[0] for e in stores[0].events + stores[1].events].count("before-save") == 2, (
            "both runtimes got as far as writing the takeover"
        )
        winner = runtimes[[f["ops"] for f in found].index(["lost"])]
        result = await (await winner.get_agent("ops").observe_stream(run_id="lost")).result()
        assert result.text == "done"
        assert turns == ["ops"], "the recovered run was driven once"
    finally:
        for runtime in runtimes:
            await runtime.shutdown()


async def test_a_run_its_own_live_host_holds_idle_is_driven_on(tmp_path: Path):
    """A run left in flight under a live host's own lease with nothing driving it (its last write failed,
    or a decision could not be routed down) is picked up by that host on the next round."""
    turns: list[str] = []
    runtime = Runtime([answering(turns)], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        host = runtime.handle("ops").host
        await host.ping()  # its lease is live
        await runtime.store().create_run(orphan("idle", host.owner))

        assert await runtime.recover(0.0) == {"ops": ["idle"]}
        result = await (await runtime.get_agent("ops").observe_stream(run_id="idle")).result()
        assert result.text == "done" and turns == ["ops"]
    finally:
        await runtime.shutdown()


async def test_a_run_another_processes_live_host_holds_is_left_to_it(tmp_path: Path):
    """Under a live lease of a host that is not this runtime's, a run is waited for, never taken."""
    turns: list[str] = []
    store = SqliteStore(tmp_path / "t.db")
    await store.touch_owner("another-process-host", 60)
    await store.create_run(orphan("theirs", "another-process-host"))
    runtime = Runtime([answering(turns)], storage=store, executor="local")
    try:
        assert await runtime.recover(0.2) == {"ops": []}
        assert await runtime.reconciler.reconcile({"ops": runtime.handle("ops")}) == 1, "still theirs"
        stored = await store.load_run("theirs")
        assert stored is not None and stored.state.owner == "another-process-host"
        assert turns == []
    finally:
        await runtime.shutdown()


def test_a_runtime_used_again_from_a_new_event_loop_is_supervised_there(tmp_path: Path):
    """``asyncio.run`` twice with one runtime (a script, a blocking wrapper): the first loop's reconciler
    ended with it, and the runtime's next use starts one on the new loop."""
    turns: list[str] = []
    runtime = Runtime([answering(turns)], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    agent = runtime.get_agent("ops")
    assert asyncio.run(agent.generate("hi")).text == "done"

    async def later() -> None:
        try:
            await runtime.store().create_run(orphan("lost", "a-host-that-died"))
            await agent.generate("hi again")
            asked = runtime.reconciler.wake()
            await wait_for(lambda: runtime.reconciler.beats > asked, within=10, what="a round on this loop")
            result = await (await agent.observe_stream(run_id="lost")).result()
            assert result.text == "done"
        finally:
            await runtime.shutdown()

    asyncio.run(later())
    assert turns == ["ops"] * 3, "both runs, and the orphan taken over on the second loop"


class HostStartsMidRound:
    """The store, with a host of another process starting while a round reads it: once armed, right
    after the next read of the leases or of the runs in flight answers, that host takes its lease and
    then writes its run, as a host does."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def live_owners(self) -> set[str]:
        found = await self.inner.live_owners()
        await self._a_host_starts()
        return found

    async def list_running_runs(self, agent_id: str) -> list[str]:
        found = await self.inner.list_running_runs(agent_id)
        await self._a_host_starts()
        return found

    async def _a_host_starts(self) -> None:
        if self.armed:
            self.armed = False
            await self.inner.touch_owner("a-host-just-started", 60)
            await self.inner.create_run(orphan("new", "a-host-just-started"))


async def test_a_host_that_starts_during_a_round_is_not_taken_for_dead(tmp_path: Path):
    """Whichever of its reads a round makes first, a run whose host started in between is left to it:
    its lease was written before its run, and the round reads the leases after the runs."""
    turns: list[str] = []
    store = HostStartsMidRound(SqliteStore(tmp_path / "t.db"))
    runtime = Runtime([answering(turns)], storage=store, executor="local")  # type: ignore[arg-type]
    try:
        handle = runtime.handle("ops")
        await handle.host.ping()  # type: ignore[attr-defined]
        await runtime.reconciler.close()  # no round of its own: the one below is the round that reads
        store.armed = True
        await runtime.reconciler.reconcile({"ops": handle})
        assert not store.armed, "the host started during the round"
        stored = await store.load_run("new")
        assert stored is not None and stored.state.owner == "a-host-just-started", "taken from a live host"
        assert turns == []
    finally:
        await runtime.shutdown()
