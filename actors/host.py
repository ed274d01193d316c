"""AgentHost: one agent's engine, as a plain class. ``actors.remote`` makes it a Ray actor; the local
executor uses it as it is. Either way, one host serves every run of its agent at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from core.agent import AgentSpec
from core.chunks import Chunk
from core.engine import Operation, RunEngine
from core.requests import AgentPort, DecideRequest, StartRequest
from core.results import ResultBuilder, RunResult
from core.store import Store

_END = object()


class AgentHost:
    def __init__(self, spec: AgentSpec, store: Store, subagents: dict[str, AgentPort] | None = None) -> None:
        self.spec = spec
        self.store = store
        self.engine = RunEngine(spec, store, subagents or {})
        # Operations keep running when their reader goes away; hold them so they are not collected.
        self._running: set[asyncio.Task[None]] = set()

    async def open_start(self, request: StartRequest) -> AsyncIterator[list[Chunk]]:
        operation = await self.engine.begin_start(request)
        async for batch in self._drive(operation):
            yield batch

    async def open_decision(self, request: DecideRequest) -> AsyncIterator[list[Chunk]]:
        operation = await self.engine.begin_decision(request)
        async for batch in self._drive(operation):
            yield batch

    async def generate_start(self, request: StartRequest) -> RunResult:
        return await self._collect(await self.engine.begin_start(request))

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        return await self._collect(await self.engine.begin_decision(request))

    async def ping(self) -> str:
        return self.spec.id

    def active_operations(self) -> int:
        return len(self._running)

    async def _collect(self, operation: Operation) -> RunResult:
        builder = ResultBuilder(operation.run_id)
        await operation.execute(lambda chunk: builder.feed((chunk,)))
        return builder.result

    async def _drive(self, operation: Operation) -> AsyncIterator[list[Chunk]]:
        """Run the operation in its own task and hand its chunks out in batches: whatever piled up since
        the last batch goes in one, so a fast run crosses the actor boundary in few messages."""
        queue: asyncio.Queue[object] = asyncio.Queue()
        task = asyncio.get_running_loop().create_task(operation.execute(queue.put_nowait))
        self._running.add(task)
        task.add_done_callback(lambda t: (self._running.discard(t), queue.put_nowait(_END)))
        while True:
            item = await queue.get()
            batch: list[Chunk] = []
            while item is not _END:
                assert isinstance(item, Chunk)
                batch.append(item)
                if queue.empty():
                    break
                item = queue.get_nowait()
            if batch:
                yield batch
            if item is _END:
                return


__all__ = ["AgentHost"]
