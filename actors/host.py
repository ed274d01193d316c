"""AgentHost: one agent's engine, as a plain class. ``actors.remote`` makes it a Ray actor; the local
executor uses it as it is. Either way, one host serves every run of its agent at once.

An operation runs in its own task, so it finishes even if its reader goes away. Its chunks pile up in an
``Outbox`` that readers drain with ``open_*`` (which also hands out the first batch) and ``next_batch``.
Batches cross the actor boundary as plain call results: one call costs about 1 ms on Ray, so whatever
piles up within ``linger`` seconds (or until the operation ends) goes out in one batch.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import NamedTuple

from core.agent import AgentSpec
from core.chunks import Chunk
from core.engine import Operation, RunEngine
from core.requests import AgentPort, DecideRequest, StartRequest
from core.results import ResultBuilder, RunResult
from core.store import Store

# How long a finished operation's unread chunks are kept for a reader that may still come back.
_UNREAD_TTL_S = 300.0
_MAX_BATCH = 512


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
    def __init__(self, spec: AgentSpec, store: Store, subagents: dict[str, AgentPort] | None = None) -> None:
        self.spec = spec
        self.store = store
        self.engine = RunEngine(spec, store, subagents or {})
        self._outboxes: dict[str, Outbox] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    async def open_start(self, request: StartRequest, linger: float = 0.0) -> Batch:
        return await self._launch(await self.engine.begin_start(request), linger)

    async def open_decision(self, request: DecideRequest, linger: float = 0.0) -> Batch:
        return await self._launch(await self.engine.begin_decision(request), linger)

    async def next_batch(self, op_id: str, linger: float = 0.0) -> Batch:
        outbox = self._outboxes.get(op_id)
        if outbox is None:
            raise KeyError(
                f"no operation {op_id!r} on agent {self.spec.id!r} (finished and read, or expired)"
            )
        chunks, done = await outbox.take(linger)
        if done:
            self._outboxes.pop(op_id, None)
        return Batch(op_id, chunks, done)

    async def generate_start(self, request: StartRequest) -> RunResult:
        return await self._collect(await self.engine.begin_start(request))

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        return await self._collect(await self.engine.begin_decision(request))

    async def ping(self) -> str:
        return self.spec.id

    def active_operations(self) -> int:
        return len(self._tasks)

    async def _collect(self, operation: Operation) -> RunResult:
        builder = ResultBuilder(operation.run_id)
        await operation.execute(lambda chunk: builder.feed((chunk,)))
        return builder.result

    async def _launch(self, operation: Operation, linger: float) -> Batch:
        self._sweep()
        op_id = f"{operation.run_id}#{next(self._ids)}"
        outbox = self._outboxes[op_id] = Outbox()
        task = asyncio.get_running_loop().create_task(operation.execute(outbox.put))
        self._tasks.add(task)

        def finished(done: asyncio.Task[None]) -> None:
            self._tasks.discard(done)
            outbox.close()

        task.add_done_callback(finished)
        return await self.next_batch(op_id, linger)

    def _sweep(self) -> None:
        """Forget operations that ended long ago and were never read to the end."""
        now = time.monotonic()
        stale = [k for k, o in self._outboxes.items() if o.done and now - o.finished_at > _UNREAD_TTL_S]
        for key in stale:
            del self._outboxes[key]


__all__ = ["AgentHost", "Batch", "Outbox"]
