"""AgentHost: one agent's engine, as a plain class. ``troupe.actors.remote`` makes it a Ray actor; the local
executor uses it as it is. Either way, one host serves every run of its agent at once.

An operation runs in its own task, so it finishes even if its reader goes away. Its chunks pile up in an
``Outbox`` that readers drain with ``open_*`` (which also hands out the first batch) and ``next_batch``.
Batches cross the actor boundary as plain call results: one call costs 0.1-1 ms (channel or Ray), so whatever
piles up within ``linger`` seconds (or until the operation ends) goes out in one batch.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import time
import uuid
from typing import Any, NamedTuple

from troupe.actors.mcp.sources import MCPSources
from troupe.actors.remote import current_actor_id, current_node_id
from troupe.actors.webhook_sender import HttpSender
from troupe.core.cancellation import stop_if_cancelled
from troupe.core.deciding.handoff import handed_off
from troupe.core.notifying.dispatcher import Dispatcher
from troupe.core.run.agent import AgentSpec
from troupe.core.run.engine import Operation, RunEngine
from troupe.core.run.settings import RunSettings
from troupe.core.tracing import configure as configure_tracing
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import (
    AgentUnavailableError,
    DecisionConflictError,
    PauseExpiredError,
    RunInFlightError,
    ToolCallNotSuspendedError,
)
from troupe.core.vocabulary.requests import (
    AgentPort,
    CancelledRun,
    CancelRequest,
    DecideRequest,
    StartRequest,
)
from troupe.core.vocabulary.results import ResultBuilder, RunResult
from troupe.core.vocabulary.store import Store
from troupe.core.vocabulary.tool_threads import ToolThreads

# Hosts renew their lease every HEARTBEAT_S; a host silent for OWNER_TTL_S is dead and its running runs
# may be taken over (the Runtime's reconciler looks as often). A shorter lifetime recovers sooner but risks
# taking over from a host that is only slow; TROUPE_HEARTBEAT_S sets the beat (the lifetime is three beats).
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
    """The chunks of one operation that its reader has not taken yet. A reader is whoever opened the
    operation (or first attached to it); each later one that attaches while it goes on reads an outbox
    of its own (``follower``), so that no reader takes the chunks of another."""

    def __init__(self) -> None:
        self.pending: list[Chunk] = []
        self.done = False
        self.finished_at = 0.0
        self.read = False  # a reader has asked for a batch
        self.followers: list[Outbox] = []
        self._changed = asyncio.Event()
        # How many pending chunks wake a waiting reader: 1 while it waits for a batch's first chunk, a
        # full batch while it lingers (a chunk per wake-up would cost a timer and a task switch each).
        self._wake_at = 1

    def put(self, chunk: Chunk) -> None:
        self.pending.append(chunk)
        if len(self.pending) >= self._wake_at:
            self._changed.set()
        for follower in self.followers:
            follower.put(chunk)

    def close(self) -> None:
        self.done = True
        self.finished_at = time.monotonic()
        self._changed.set()
        for follower in self.followers:
            follower.close()

    def follower(self) -> Outbox:
        """An outbox for another reader, from what this one's reader has not taken yet to the end: an
        observer of the run, or a reader that replaces one gone (its chunks since are all there)."""
        follower = Outbox()
        follower.pending = list(self.pending)
        if self.done:
            follower.close()
        else:
            self.followers.append(follower)
        return follower

    async def gather(self, linger: float, first_wait: float | None = None) -> tuple[list[Chunk], bool]:
        """Wait for chunks (for at most ``first_wait`` s if given: then nothing may come back); then keep
        gathering for up to ``linger`` s unless the operation ends or a batch fills up."""
        self.read = True
        loop = asyncio.get_running_loop()
        until = None if first_wait is None else loop.time() + first_wait
        while not self.pending and not self.done:
            if not await self._changed_before(until):
                return [], False
        if linger > 0 and not self.done and len(self.pending) < _MAX_BATCH:
            self._wake_at = _MAX_BATCH
            try:
                await self._changed_before(loop.time() + linger)
            finally:
                self._wake_at = 1
        chunks, self.pending = self.pending, []
        return chunks, self.done

    async def _changed_before(self, deadline: float | None) -> bool:
        """Wait for the next wake-up (see ``_wake_at``) or the end; False if the loop's clock passed
        ``deadline`` first."""
        self._changed.clear()
        if deadline is None:  # the in-process reader's every batch: no timeout to set up
            await self._changed.wait()
            return True
        if deadline <= asyncio.get_running_loop().time():
            return False
        try:
            async with asyncio.timeout_at(deadline):  # no task per wait, unlike wait_for
                await self._changed.wait()
        except TimeoutError:
            return False
        return True


class AgentHost:
    def __init__(
        self,
        spec: AgentSpec,
        store: Store,
        subagents: dict[str, AgentPort] | None = None,
        owner: str | None = None,
        settings: RunSettings | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        settings = settings or RunSettings()
        # A Ray actor keeps its id across restarts, so a restarted host knows which runs were its own.
        self.owner = owner or current_actor_id() or f"local:{uuid.uuid4().hex}"
        self.threads = ToolThreads(settings.tool_threads)
        self.engine = RunEngine(spec, store, subagents or {}, self.owner, settings, self.threads)
        self.notifications = settings.notifications
        # Every host sends due notifications (its own runs' and any dead host's), in its own task.
        self.dispatcher: Dispatcher | None = None
        self._sending: asyncio.Task[None] | None = None
        self._outboxes: dict[str, Outbox] = {}
        # run id -> op id of its latest operation here, until that operation's chunks are all read
        self._live: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._lease: asyncio.Task[None] | None = None
        # The agent's MCP servers: sessions of this host's own, opened before it runs anything.
        self.mcp = MCPSources(spec.mcp_servers, self.engine.loop) if spec.mcp_servers else None

    # ---- operations ---------------------------------------------------------------------------------

    async def open_start(self, request: StartRequest, linger: float = 0.0) -> Batch:
        await self._startup()
        return await self._launch(self._accept(await self.engine.begin_start(request)), linger)

    async def open_decision(self, request: DecideRequest, linger: float = 0.0) -> Batch:
        await self._startup()
        # A decision's stream opens with the decided call's outcome, which may take a while (the tool
        # runs first): the caller waits at most ``linger`` for the first chunks (a quick tool's whole
        # answer then comes back with the call, saving a round trip), else gets the operation at once
        # and its chunks as they come.
        op_id = self._spawn(await self._begin_decision(request))
        return await self._next(op_id, linger, first_wait=linger)

    async def next_batch(self, op_id: str, linger: float = 0.0) -> Batch:
        return await self._next(op_id, linger)

    async def _next(self, op_id: str, linger: float, first_wait: float | None = None) -> Batch:
        outbox = self._outboxes.get(op_id)
        if outbox is None:
            raise KeyError(
                f"no operation {op_id!r} on agent {self.spec.id!r} (finished and read, or expired)"
            )
        chunks, done = await outbox.gather(linger, first_wait)
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
                outbox = self._outboxes[op_id]
                if outbox.read:  # its reader reads on: this one gets an outbox of its own
                    op_id = f"{op_id}+{next(self._ids)}"
                    self._outboxes[op_id] = outbox.follower()
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
        ``troupe.core.deciding.handoff``). A refusal (say, edited args the tool rejects) is raised to
        the parent, which puts its own claim back, as it does when a routed decision is refused."""
        log.info("run %s takes the decision its parent holds for it", request.run_id)
        try:
            return self._accept(await self.engine.begin_decision(request))
        except (DecisionConflictError, ToolCallNotSuspendedError, RunInFlightError):
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

    # ---- cancelling ------------------------------------------------------------------------------------

    async def cancel(self, request: CancelRequest) -> CancelledRun:
        """Cancel a run of this agent (``troupe.core.run.cancels``) and answer once the cancel is
        durable. A run driven here is stopped at once (its stream ends it); a run this host took (it was
        paused, or its host is gone) is ended here, in the background (``attach`` follows it); a run
        another live host drives is stopped by that host as soon as it learns (``poke``, its next write,
        or its next heartbeat). A crash before the run has ended leaves it to recovery, which ends it."""
        await self._startup()
        recorded = await self.engine.cancel(request)
        run_id = request.run_id
        if self.mcp is not None:  # an elicitation it waits on here will never be answered now
            await self.mcp.release(run_id)
        # An operation here that holds the run but does not drive it yet stops as soon as it begins.
        driven = self.engine.loop.stop(run_id, recorded.cancellation, about_to=self.engine.is_busy(run_id))
        if not driven and recorded.taken:
            task = asyncio.get_running_loop().create_task(self._end_taken(run_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return recorded.answer

    async def _end_taken(self, run_id: str) -> None:
        """End a cancelled run this host took, once nothing else here holds it."""
        operation = await self.engine.begin_ending(run_id)
        if operation is not None:
            self._spawn(operation)

    async def poke(self, run_id: str) -> bool:
        """Look at once whether a run driven here was cancelled elsewhere (a sibling replica recorded
        it); if so, stop it. True if this host drives the run."""
        if run_id not in self.engine.loop.driving:
            return False
        stored = await self.store.load_run(run_id)
        if stored is not None and stored.state.cancel is not None:
            self.engine.loop.stop(run_id, stored.state.cancel)
        return True

    async def _stop_cancelled(self) -> None:
        """Each heartbeat: stop every run driven here that was cancelled elsewhere (another process)."""
        loop = self.engine.loop
        for run_id in list(loop.driving):
            if run_id in loop.ending or run_id in loop.stops:
                continue
            stored = await self.store.load_run(run_id)
            if stored is not None and stored.state.cancel is not None:
                loop.stop(run_id, stored.state.cancel)

    def _accept(self, operation: Operation) -> Operation:
        if operation.refusal is not None:
            self._spawn(operation)  # the run catches up in the background; the caller hears why not
            raise operation.refusal
        return operation

    # ---- what the Runtime's reconciler asks of a host (see troupe.supervisor.reconciler) ---------------

    async def supervise(self, held: list[tuple[str, str | None]]) -> tuple[str, list[str]]:
        """The reconciler's call to every host each round. ``held`` are the agent's runs in flight under a
        live lease; those under this host's own lease that nothing here drives (left by a failed write,
        or by a decision that could not be routed down) are driven on. Returns this host's owner id (so
        the reconciler can tell its own hosts' runs from another process's) and the runs picked up."""
        await self._startup()
        mine: list[tuple[str, str | None]] = [
            (run_id, owner) for run_id, owner in held if owner == self.owner
        ]
        return self.owner, await self.take_over(mine)

    async def take_over(self, runs: list[tuple[str, str | None]]) -> list[str]:
        """Drive on each ``(run_id, owner)`` from its last checkpoint, unless it is busy here or no longer
        ``owner``'s (the takeover is a compare-and-set: of two hosts, or two runtimes, one wins)."""
        await self._startup()
        taken = []
        for run_id, owner in runs:
            if self.engine.is_busy(run_id):
                continue
            operation = await self.engine.begin_recovery(run_id, owner)
            if operation is not None:
                self._spawn(operation)
                taken.append(run_id)
        return taken

    async def expire(self, run_ids: list[str]) -> list[str]:
        """Decline each run's overdue pause (the reconciler found them due); the runs move on in the
        background. Returns the runs that had one still due."""
        await self._startup()
        return [
            run_id for run_id in run_ids if not self.engine.is_busy(run_id) and await self._expire(run_id)
        ]

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

    async def stats(self) -> dict[str, Any]:
        """What this host holds right now (for operators and benchmarks)."""
        loop = asyncio.get_running_loop()
        return {
            "agent_id": self.spec.id,
            "pid": os.getpid(),
            # uvloop in a Ray actor (Troupe depends on it where it builds; docs/how-to/ray.md).
            "event_loop": f"{type(loop).__module__}.{type(loop).__qualname__}",
            "node_id": current_node_id() or "",
            "owner": self.owner,
            "operations": len(self._tasks),
            "unread_outboxes": len(self._outboxes),
            "runs_locked": len(self.engine.locks),
            # Paused states kept for their decisions (bounded; troupe.core.run.paused).
            "paused_states_kept": len(self.engine.loop.paused),
            # Objects the collector no longer traces (an actor's heap once built; troupe.actors.remote).
            "gc_frozen": gc.get_freeze_count(),
            **({"mcp_servers": self.mcp.stats()} if self.mcp is not None else {}),
        }

    # ---- following a run -----------------------------------------------------------------------------

    async def _orphaned(self, run_id: str, owner: str | None) -> bool:
        if self.engine.is_busy(run_id):
            return False
        if owner == self.owner:
            return True  # ours, yet nothing here drives it: from before a restart, or a failed write
        return owner not in await self.store.live_owners()

    async def _startup(self) -> None:
        """Once per event loop: start renewing this host's lease and, with notification targets, sending."""
        loop = asyncio.get_running_loop()
        if self.mcp is not None:
            await self.mcp.ensure_open()  # before any run or decision can need one of their tools
        if self._lease is not None and not self._lease.done() and self._lease.get_loop() is loop:
            return
        configure_tracing()  # export this process's spans too, if the environment asks for it
        await self.store.touch_owner(self.owner, OWNER_TTL_S)
        self._lease = loop.create_task(self._renew())
        if self.notifications is not None and self.notifications.targets:
            self.dispatcher = Dispatcher(self.store, self.notifications, self.owner, HttpSender())
            self.engine.loop.writer.on_outbox = self.dispatcher.poke
            self._sending = loop.create_task(self.dispatcher.run())

    async def _renew(self) -> None:
        """Keep this host's lease on its runs alive while its process lives. Only the host can say it is
        alive: a lease renewed by someone else would outlive a dead host, and a lease that lapsed with its
        supervisor would let another process take over runs this host still drives. Reading the store and
        acting on what it finds is the reconciler's job, not the host's."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await self.store.touch_owner(self.owner, OWNER_TTL_S)
                await self._stop_cancelled()
                if self.mcp is not None:  # cancelled elsewhere (a routed cancel, another process)
                    await self.mcp.release_ended(self.store)
                # Outcomes of tools that completed here during an outage: on record for whoever takes
                # their runs over (another process, if this host's lease lapsed meanwhile).
                await self.engine.record_kept()
            except Exception:
                log.warning("lease renewal of %s failed", self.owner, exc_info=True)
            stop_if_cancelled()  # the store may have swallowed a cancel (troupe.core.cancellation)

    async def close(self) -> None:
        if self._lease is not None:
            self._lease.cancel()
            self._lease = None
        if self._sending is not None:
            self._sending.cancel()
            self._sending = None
        if self.dispatcher is not None:
            await self.dispatcher.close()
        if self.mcp is not None:
            await self.mcp.close()
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
