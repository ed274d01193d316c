"""AgentHost: one agent's engine, as a plain class. ``troupe.actors.remote`` makes it a Ray actor; the local
executor uses it as it is. Either way, one host serves every run of its agent at once.

An operation runs in its own task, so it finishes even if its reader goes away. Its chunks pile up in an
``Outbox`` that readers drain with ``open_*`` (which also hands out the first batch) and ``next_batch``.
Batches cross the actor boundary as plain call results: one call costs 0.1-1 ms (channel or Ray), so whatever
piles up within ``linger`` seconds (or until the operation ends) goes out in one batch.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
import uuid
from typing import NamedTuple

from troupe.actors.remote import current_actor_id, current_node_id
from troupe.core.agent import AgentSpec
from troupe.core.approvers import ApproverPolicies
from troupe.core.cancellation import stop_if_cancelled, wait_or_timeout
from troupe.core.chunks import Chunk
from troupe.core.engine import Operation, RunEngine
from troupe.core.errors import (
    AgentUnavailableError,
    DecisionConflictError,
    PauseExpiredError,
    ToolCallNotSuspendedError,
)
from troupe.core.handoff import handed_off
from troupe.core.outbox import Notifications
from troupe.core.requests import AgentPort, DecideRequest, StartRequest
from troupe.core.results import ResultBuilder, RunResult
from troupe.core.state import Clock, utcnow
from troupe.core.store import Store
from troupe.core.tools import DEFAULT_TOOL_THREADS, ToolThreads
from troupe.core.tracing import configure as configure_tracing
from troupe.core.webhooks import Dispatcher

# Hosts renew their heartbeat every HEARTBEAT_S; a host silent for OWNER_TTL_S is dead and its running
# runs may be taken over. A shorter lifetime recovers sooner but risks taking over from a host that is
# only slow; TROUPE_HEARTBEAT_S sets the beat (the lifetime is three beats).
HEARTBEAT_S = float(os.environ.get("TROUPE_HEARTBEAT_S", "2.0"))
OWNER_TTL_S = 3 * HEARTBEAT_S
# How long a finished operation's unread chunks are kept for a reader that may still come back.
_UNREAD_TTL_S = 300.0
_MAX_BATCH = 512
# How long attach() waits for a run that another live host is driving before giving up on it.
_FOLLOW_WAIT_S = 30.0

log = logging.getLogger(__name__)


class Batch(NamedTuple):
    op_id: str
    chunks: list[Chunk]
    done: bool


class Outbox:
    """The chunks of one operation that no reader has taken yet."""

    def __init__(self) -> None:
        self.pending: list[Chunk] = []
        self.done = False
        self.finished_at = 0.0
        self._changed = asyncio.Event()

    def put(self, chunk: Chunk) -> None:
        self.pending.append(chunk)
        self._changed.set()

    def close(self) -> None:
        self.done = True
        self.finished_at = time.monotonic()
        self._changed.set()

    async def take(self, linger: float) -> tuple[list[Chunk], bool]:
        """Wait for chunks; then keep gathering for up to ``linger`` s unless the operation ends."""
        while not self.pending and not self.done:
            self._changed.clear()
            await self._changed.wait()
        if linger > 0:
            deadline = asyncio.get_running_loop().time() + linger
            while not self.done and len(self.pending) < _MAX_BATCH:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except TimeoutError:
                    break
        chunks, self.pending = self.pending, []
        return chunks, self.done


class AgentHost:
    def __init__(
        self,
        spec: AgentSpec,
        store: Store,
        subagents: dict[str, AgentPort] | None = None,
        owner: str | None = None,
        notifications: Notifications | None = None,
        policies: ApproverPolicies | None = None,
        clock: Clock = utcnow,
        tool_threads: int = DEFAULT_TOOL_THREADS,
    ) -> None:
        self.spec = spec
        self.store = store
        # A Ray actor keeps its id across restarts, so a restarted host knows which runs were its own.
        self.owner = owner or current_actor_id() or f"local:{uuid.uuid4().hex}"
        self.threads = ToolThreads(tool_threads)
        self.engine = RunEngine(
            spec,
            store,
            subagents or {},
            owner=self.owner,
            notifications=notifications,
            policies=policies,
            clock=clock,
            threads=self.threads,
        )
        self.notifications = notifications
        # Every host sends due notifications (its own runs' and any dead host's), in its own task.
        self.dispatcher: Dispatcher | None = None
        self._sending: asyncio.Task[None] | None = None
        self._outboxes: dict[str, Outbox] = {}
        # run id -> op id of its latest operation here, until that operation's chunks are all read
        self._live: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._heartbeat: asyncio.Task[None] | None = None
        self._taken_over: list[str] = []  # runs this host recovered, in order
        self._wake = asyncio.Event()
        self.beats = 0  # heartbeats completed, so a caller of wake() can tell when the next one is done
        self._beating = False

    # ---- operations ---------------------------------------------------------------------------------

    async def open_start(self, request: StartRequest, linger: float = 0.0) -> Batch:
        await self._startup()
        return await self._launch(self._accept(await self.engine.begin_start(request)), linger)

    async def open_decision(self, request: DecideRequest, linger: float = 0.0) -> Batch:
        await self._startup()
        # A decision's stream opens with the decided call's outcome, which may take a while (the tool
        # runs first): the caller gets the operation at once and its chunks as they come.
        return Batch(self._spawn(await self._begin_decision(request)), [], False)

    async def next_batch(self, op_id: str, linger: float = 0.0) -> Batch:
        outbox = self._outboxes.get(op_id)
        if outbox is None:
            raise KeyError(
                f"no operation {op_id!r} on agent {self.spec.id!r} (finished and read, or expired)"
            )
        chunks, done = await outbox.take(linger)
        if done:
            self._forget(op_id)
        return Batch(op_id, chunks, done)

    async def attach(
        self, run_id: str, linger: float = 0.0, follow_wait: float = _FOLLOW_WAIT_S
    ) -> Batch | None:
        """Follow ``run_id`` from here on: its live operation here, a recovery of it if it was orphaned,
        or (once nothing drives it) a replay of where it stands. None if there is no such run. A run
        another live host drives is waited for up to ``follow_wait`` s (a replica asks with 0: a sibling
        may be the one to follow it)."""
        await self._startup()
        started = time.monotonic()
        while True:
            op_id = self._live.get(run_id)
            if op_id is not None and op_id in self._outboxes:
                return await self.next_batch(op_id, linger)
            stored = await self.store.load_run(run_id)
            if stored is None:
                return None
            if stored.state.status != "running":
                request = await handed_off(self.store, stored.state)
                if request is None:
                    chunks = await self.engine.describe(run_id)
                    return None if chunks is None else Batch(f"{run_id}#replay", chunks, True)
                operation = await self._take_handoff(request)
                if operation is not None:
                    return await self._launch(operation, linger)
                continue  # decided meanwhile (the routed decision landed after all): follow that
            if await self._orphaned(run_id, stored.state.owner):
                operation = await self.engine.begin_recovery(run_id, stored.state.owner)
                if operation is not None:
                    return await self._launch(operation, linger)
            elif time.monotonic() - started > (
                _FOLLOW_WAIT_S if stored.state.owner == self.owner else follow_wait
            ):
                raise AgentUnavailableError(
                    f"run {run_id} is being driven by {stored.state.owner}, which cannot be followed from "
                    f"here; it will be listed once it pauses",
                    run_id=run_id,
                )
            # Driven here by an operation still being set up, or taken over by another host: look again.
            await asyncio.sleep(0.02)

    async def _take_handoff(self, request: DecideRequest) -> Operation | None:
        """Apply the decision the parent claimed for this run but could not route here (see
        ``troupe.core.handoff``). A refusal (say, edited args the tool rejects) is raised to the parent,
        which puts its own claim back, as it does when a routed decision is refused."""
        log.info("run %s takes the decision its parent holds for it", request.run_id)
        try:
            return self._accept(await self.engine.begin_decision(request))
        except (DecisionConflictError, ToolCallNotSuspendedError):
            return None

    async def generate_start(self, request: StartRequest) -> RunResult:
        await self._startup()
        return await self._collect(self._accept(await self.engine.begin_start(request)))

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        await self._startup()
        return await self._collect(await self._begin_decision(request))

    async def _begin_decision(self, request: DecideRequest) -> Operation:
        try:
            return self._accept(await self.engine.begin_decision(request))
        except PauseExpiredError:
            await self._expire(request.run_id)  # too late to decide: the run moves on without it
            raise

    def _accept(self, operation: Operation) -> Operation:
        if operation.refusal is not None:
            self._spawn(operation)  # the run catches up in the background; the caller hears why not
            raise operation.refusal
        return operation

    # ---- expiry -------------------------------------------------------------------------------------

    async def expire_due(self) -> list[str]:
        """Decline every pause of this agent whose time has run out; the runs move on in the background."""
        expired = []
        now = self.engine.loop.clock().timestamp()
        for run_id in await self.store.list_expiring_runs(self.spec.id, now):
            if not self.engine.is_busy(run_id) and await self._expire(run_id):
                expired.append(run_id)
        return expired

    async def _expire(self, run_id: str) -> bool:
        operation = await self.engine.begin_expiry(run_id)
        if operation is None:
            return False
        self._spawn(operation)
        return True

    async def ping(self) -> str:
        await self._startup()
        return self.spec.id

    def active_operations(self) -> int:
        return len(self._tasks)

    async def stats(self) -> dict[str, int | str]:
        """What this host holds right now (for operators and benchmarks)."""
        return {
            "agent_id": self.spec.id,
            "pid": os.getpid(),
            "node_id": current_node_id() or "",
            "owner": self.owner,
            "operations": len(self._tasks),
            "unread_outboxes": len(self._outboxes),
            "runs_locked": len(self.engine.locks),
        }

    # ---- recovery -----------------------------------------------------------------------------------

    async def recover(self, wait_s: float = OWNER_TTL_S + 1.0) -> list[str]:
        """Take over this agent's orphaned runs (their host is gone) and drive each on from its last
        checkpoint. Waits up to ``wait_s`` for the heartbeats of recently dead hosts to run out; runs a
        live host still drives are left to it. Returns the runs this host took over meanwhile (the
        heartbeat may be the one that got to a run first)."""
        await self._startup()
        deadline = time.monotonic() + wait_s
        first = len(self._taken_over)
        while await self._take_over_orphans() and time.monotonic() < deadline:  # noqa: ASYNC110 - polls the store
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        return self._taken_over[first:]

    async def _take_over_orphans(self) -> int:
        """One pass over this agent's running runs; returns how many are still driven by a live host."""
        waiting = 0
        for run_id in await self.store.list_running_runs(self.spec.id):
            stored = None if self.engine.is_busy(run_id) else await self.store.load_run(run_id)
            if stored is None or stored.state.status != "running":
                continue
            if not await self._orphaned(run_id, stored.state.owner):
                waiting += 1
                continue
            operation = await self.engine.begin_recovery(run_id, stored.state.owner)
            if operation is not None:
                self._taken_over.append(run_id)
                self._spawn(operation)
        return waiting

    async def _orphaned(self, run_id: str, owner: str | None) -> bool:
        if self.engine.is_busy(run_id):
            return False
        if owner == self.owner:
            return True  # ours, yet nothing here drives it: from before a restart, or a failed write
        return owner not in await self.store.live_owners()

    async def _startup(self) -> None:
        """Once per event loop: start the heartbeat (which also picks up orphaned runs)."""
        loop = asyncio.get_running_loop()
        if self._heartbeat is not None and not self._heartbeat.done() and self._heartbeat.get_loop() is loop:
            return
        configure_tracing()  # export this process's spans too, if the environment asks for it
        await self.store.touch_owner(self.owner, OWNER_TTL_S)
        self._heartbeat = loop.create_task(self._beat())
        if self.notifications is not None and self.notifications.targets:
            self.dispatcher = Dispatcher(self.store, self.notifications, self.owner)
            self.engine.loop.on_outbox = self.dispatcher.poke
            self._sending = loop.create_task(self.dispatcher.run())

    async def _beat(self) -> None:
        """Keep this host's claim on its runs alive; take over runs whose host died (or whose last write
        failed while storage was down); decline pauses whose time has run out."""
        while True:
            self._wake.clear()
            self._beating = True
            try:
                await self.store.touch_owner(self.owner, OWNER_TTL_S)
                await self._take_over_orphans()
                await self.expire_due()
            except Exception:
                log.warning("heartbeat of %s failed", self.owner, exc_info=True)
            self.beats += 1
            self._beating = False
            stop_if_cancelled()
            await wait_or_timeout(self._wake, HEARTBEAT_S)

    def wake(self) -> int:
        """Beat now rather than at the end of the interval (after a peer is known to be dead). Returns
        the count ``beats`` must exceed for a whole beat to have run since this call."""
        self._wake.set()
        return self.beats + self._beating  # a beat already under way may have looked too early

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        if self._sending is not None:
            self._sending.cancel()
            self._sending = None
        if self.dispatcher is not None:
            await self.dispatcher.close()
        self.threads.close()

    # ---- plumbing -----------------------------------------------------------------------------------

    async def _collect(self, operation: Operation) -> RunResult:
        builder = ResultBuilder(operation.run_id)
        await operation.execute(lambda chunk: builder.feed((chunk,)))
        return builder.result

    async def _launch(self, operation: Operation, linger: float) -> Batch:
        """Start the operation and hand its first batch to the caller who opened it."""
        return await self.next_batch(self._spawn(operation), linger)

    def _spawn(self, operation: Operation) -> str:
        """Start the operation with nobody reading yet (its chunks wait for an ``attach``)."""
        self._sweep()
        run_id = operation.run_id
        op_id = f"{run_id}#{next(self._ids)}"
        outbox = self._outboxes[op_id] = Outbox()
        self._live[run_id] = op_id
        task = asyncio.get_running_loop().create_task(operation.execute(outbox.put))
        self._tasks.add(task)

        def finished(done: asyncio.Task[None]) -> None:
            self._tasks.discard(done)
            outbox.close()

        task.add_done_callback(finished)
        return op_id

    def _sweep(self) -> None:
        """Forget operations that ended long ago and were never read to the end."""
        now = time.monotonic()
        stale = [k for k, o in self._outboxes.items() if o.done and now - o.finished_at > _UNREAD_TTL_S]
        for key in stale:
            self._forget(key)

    def _forget(self, op_id: str) -> None:
        self._outboxes.pop(op_id, None)
        run_id = op_id.rsplit("#", 1)[0]
        if self._live.get(run_id) == op_id:
            del self._live[run_id]


__all__ = ["HEARTBEAT_S", "OWNER_TTL_S", "AgentHost", "Batch", "Outbox"]
