"""Supervision: one reconciliation loop per Runtime, in place of every host polling the store.

The pattern is Ray Serve's controller: one loop compares the desired state with the actual one and acts
on the difference. Desired: every run in flight is driven by a live host, and no pause waits past its
deadline. Actual: what the store says (the runs in flight and whose lease each is under, the live
leases, the pauses due). Each round reads that once per agent and asks the hosts for the operations
that close the gap: take over run X (its host is dead), drive on run Y (its own host holds it but
nothing drives it), expire run Z. Hosts keep the operations themselves, the outbox and their lease.

Why hosts renew their own lease (``AgentHost._renew``) instead of this loop renewing it for them: a
lease says "this process is alive and drives these runs", which only that process can say. Renewed from
here, it would outlive a dead host; lapsing with this loop, it would hand runs a live host still drives
to whoever looks next.

When the Runtime running this loop dies while hosts live on: hosts of the local executor die with it,
and so do Ray actors, which Ray kills with the driver that made them; their leases lapse and the next
Runtime over the store (a restarted server, another process, ``recover()``) takes their runs over from
the last checkpoints. The one kind of host that outlives its Runtime is an actor re-placed after Ray gave
up on it (it is detached, see ``troupe.actors.remote.RayActor.handle``): it keeps its lease and finishes
what it drives, but a run it holds without driving waits until it is killed (``Runtime.shutdown``).

Several Runtimes over one store (processes, replicas of a server) each run this loop, so two loops may
find the same orphan in the same round: a takeover is a compare-and-set on the run's version and owner
(``RunEngine.begin_recovery``), so exactly one host gets it and the other's does nothing; an expiry is a
claim on the pause, compare-and-set too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from troupe.actors.handle import AgentHandle, OwnedRun
from troupe.actors.host import HEARTBEAT_S, OWNER_TTL_S
from troupe.core.cancellation import stop_if_cancelled, wait_or_timeout
from troupe.core.vocabulary.state import UNREADABLE, Clock
from troupe.core.vocabulary.store import Store

log = logging.getLogger(__name__)

Handles = Callable[[], Mapping[str, AgentHandle]]


class Reconciler:
    """``handles()`` gives the agents to supervise (those whose hosts exist) and ``store()`` the store as
    the hosts see it; ``clock`` is what pause deadlines are measured against."""

    def __init__(self, handles: Handles, store: Callable[[], Store], clock: Clock) -> None:
        self._handles = handles
        self._store = store
        self.clock = clock
        self.beats = 0  # rounds completed, so a caller of wake() can tell when the next one is done
        self._beating = False
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._taken: list[tuple[str, str]] = []  # (agent id, run id) taken over here, in order
        self._unreadable: set[str] = set()  # runs found unreadable (and said so) so far

    def __getstate__(self) -> dict[str, Any]:
        # A copy is a stopped reconciler: its task and event belong to this process's event loop. (A
        # Runtime gets pickled when a tool's closure reaches it, e.g. through a pydantic model defined
        # beside it, whose parent namespace holds the function's locals.)
        state = self.__dict__.copy()
        state.update(_task=None, _wake=None)
        return state

    # ---- the loop -----------------------------------------------------------------------------------

    def ensure_running(self) -> None:
        """Start the loop on the running event loop, if it is not running there yet (no loop: later)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._task is not None and not self._task.done() and self._task.get_loop() is loop:
            return
        self._wake = asyncio.Event()
        self._task = loop.create_task(self._run(self._wake))

    async def _run(self, wake: asyncio.Event) -> None:
        while True:
            wake.clear()
            self._beating = True
            try:
                await self.reconcile(self._handles())
                await self.expire_due(self._handles())
            except Exception:
                log.warning("supervision round failed", exc_info=True)
            self.beats += 1
            self._beating = False
            stop_if_cancelled()  # the store may have swallowed a cancel (troupe.core.cancellation)
            await wait_or_timeout(wake, HEARTBEAT_S)

    def wake(self) -> int:
        """Run a round now rather than at the end of the interval (after a host is known to be dead).
        Returns the count ``beats`` must exceed for a whole round to have run since this call."""
        if self._wake is not None:
            self._wake.set()
        return self.beats + self._beating  # a round already under way may have looked too early

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        loop = task.get_loop()
        if loop is asyncio.get_running_loop():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        elif not loop.is_closed():  # started on another thread's loop (a server's): stop it there
            loop.call_soon_threadsafe(task.cancel)

    # ---- one round ----------------------------------------------------------------------------------

    async def reconcile(self, handles: Mapping[str, AgentHandle]) -> int:
        """Get every run in flight of these agents driven: runs of dead hosts are taken over, runs this
        runtime's own hosts hold idle are driven on. Returns how many runs are left to hosts of other
        processes whose leases still run."""
        store = self._store()
        # The runs in flight first, the live leases after. A host takes its lease before it writes a
        # run, so the owner of every run found here is in the leases read next unless it has died.
        # Read the other way round, a host that started between the two reads would look dead, and
        # its run would be taken over while it still drives it.
        in_flight = await asyncio.gather(
            *(_in_flight(store, agent_id, self._unreadable) for agent_id in handles)
        )
        live = await store.live_owners()
        waiting = await asyncio.gather(
            *(
                self._reconcile_agent(live, agent_id, h, runs)
                for (agent_id, h), runs in zip(handles.items(), in_flight, strict=True)
            )
        )
        return sum(waiting)

    async def _reconcile_agent(
        self, live: set[str], agent_id: str, handle: AgentHandle, runs: list[OwnedRun]
    ) -> int:
        orphans: list[OwnedRun] = []
        held: list[OwnedRun] = []
        for run_id, owner in runs:
            (held if owner in live else orphans).append((run_id, owner))
        owners, adopted = await handle.supervise(held)
        taken = adopted + (await handle.take_over(orphans) if orphans else [])
        self._taken += [(agent_id, run_id) for run_id in taken]
        return sum(1 for _, owner in held if owner not in owners)

    async def expire_due(self, handles: Mapping[str, AgentHandle]) -> dict[str, list[str]]:
        """Decline every pause of these agents whose time has run out; the runs move on in the background."""
        now = self.clock().timestamp()
        store = self._store()

        async def one(handle: AgentHandle) -> list[str]:
            due = await store.list_expiring_runs(handle.agent_id, now)
            return await handle.expire(due) if due else []

        found = await asyncio.gather(*(one(h) for h in handles.values()))
        return dict(zip(handles, found, strict=True))

    async def recover(self, handles: Mapping[str, AgentHandle], wait_s: float) -> dict[str, list[str]]:
        """Reconcile until no run of these agents is left to another process's live host, or ``wait_s``
        has passed (a host that died moments ago still has its lease). Returns the runs taken over here
        meanwhile, per agent (the background loop may be the one that got to a run first)."""
        first = len(self._taken)
        deadline = time.monotonic() + wait_s
        while await self.reconcile(handles) and time.monotonic() < deadline:  # noqa: ASYNC110 - polls the store
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        return _per_agent(handles, self._taken[first:])


async def _in_flight(store: Store, agent_id: str, unreadable: set[str]) -> list[OwnedRun]:
    """The agent's runs in flight, each with the owner whose lease it is under; a run that cannot be
    read is left out (and said so once, into ``unreadable``)."""
    runs: list[OwnedRun] = []
    for run_id in await store.list_running_runs(agent_id):
        try:
            stored = await store.load_run(run_id)
        except UNREADABLE as exc:
            if run_id not in unreadable:
                unreadable.add(run_id)
                log.error("run %s of agent %r cannot be read; not recovered: %s", run_id, agent_id, exc)
            continue
        if stored is None or stored.state.status != "running":
            continue  # finished or paused since it was listed
        runs.append((run_id, stored.state.owner))
    return runs


def _per_agent(agent_ids: Iterable[str], taken: list[tuple[str, str]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {agent_id: [] for agent_id in agent_ids}
    for agent_id, run_id in taken:
        if agent_id in found:
            found[agent_id].append(run_id)
    return found


__all__ = ["OWNER_TTL_S", "Reconciler"]
