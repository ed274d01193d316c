"""Handles: how callers reach an agent's host, in-process or in a Ray actor, through one interface.

Opening an operation returns once the host has accepted it (so an unknown run or a conflicting
decision raises at the call), then the chunk batches follow.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from typing import Any

from troupe.actors.host import AgentHost, Batch
from troupe.actors.remote import RayActor, RayActorError
from troupe.core.errors import AgentUnavailableError
from troupe.core.requests import ChunkBatches, DecideRequest, StartRequest
from troupe.core.results import ResultBuilder, RunResult

# A call costs about 0.1 ms over a channel and 1 ms through Ray (another node): chunks gather this long
# on the actor before a batch is sent, so a fast stream does not become a call per chunk.
RAY_LINGER_S = 0.010

Fetch = Callable[[str], Awaitable[Batch]]


def _batches(first: Batch, fetch: Fetch) -> ChunkBatches:
    """The first batch (already taken, so the host accepted the operation), then the rest as they come."""

    async def chain() -> ChunkBatches:
        batch = first
        while True:
            if batch.chunks:
                yield batch.chunks
            if batch.done:
                return
            batch = await fetch(batch.op_id)

    return chain()


class AgentHandle(abc.ABC):
    agent_id: str

    @abc.abstractmethod
    async def start(self, request: StartRequest) -> ChunkBatches: ...

    @abc.abstractmethod
    async def decide(self, request: DecideRequest) -> ChunkBatches: ...

    @abc.abstractmethod
    async def attach(self, run_id: str) -> ChunkBatches | None: ...

    @abc.abstractmethod
    async def generate(self, request: StartRequest) -> RunResult: ...

    @abc.abstractmethod
    async def generate_decision(self, request: DecideRequest) -> RunResult: ...

    @abc.abstractmethod
    async def recover(self, wait_s: float | None = None) -> list[str]: ...

    @abc.abstractmethod
    async def expire_due(self) -> list[str]: ...

    @abc.abstractmethod
    async def close(self) -> None: ...


class LocalHandle(AgentHandle):
    def __init__(self, host: AgentHost) -> None:
        self.host = host
        self.agent_id = host.spec.id

    async def start(self, request: StartRequest) -> ChunkBatches:
        return _batches(await self.host.open_start(request), self.host.next_batch)

    async def decide(self, request: DecideRequest) -> ChunkBatches:
        return _batches(await self.host.open_decision(request), self.host.next_batch)

    async def attach(self, run_id: str) -> ChunkBatches | None:
        first = await self.host.attach(run_id)
        return None if first is None else _batches(first, self.host.next_batch)

    async def generate(self, request: StartRequest) -> RunResult:
        return await self.host.generate_start(request)

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        return await self.host.generate_decision(request)

    async def recover(self, wait_s: float | None = None) -> list[str]:
        return await (self.host.recover() if wait_s is None else self.host.recover(wait_s))

    async def expire_due(self) -> list[str]:
        return await self.host.expire_due()

    async def close(self) -> None:
        await self.host.close()


class RayHandle(AgentHandle):
    """Picklable: a supervisor's actor holds these for its subagents.

    If the actor dies while a stream is being read, Ray restarts it and the restarted host recovers the
    run from its checkpoint; the stream re-attaches to it and carries on.
    """

    def __init__(self, actor: RayActor, agent_id: str) -> None:
        self.actor = actor
        self.agent_id = agent_id

    def __reduce__(self) -> Any:
        return (RayHandle, (self.actor, self.agent_id))

    async def start(self, request: StartRequest) -> ChunkBatches:
        run_id = request.options_given.get("run_id")
        try:
            first = await self.actor.call("open_start", request, RAY_LINGER_S)
        except RayActorError:
            # The actor died while taking the run. If the run got as far as the store, its restarted
            # host recovers it and we follow; if not, nothing happened yet and it is started again.
            first = await self._attach(run_id) if run_id else None
            if first is None:
                first = await self.actor.call_while_restarting("open_start", request, RAY_LINGER_S)
        return _batches(first, self._next)

    async def decide(self, request: DecideRequest) -> ChunkBatches:
        try:
            first = await self.actor.call("open_decision", request, RAY_LINGER_S)
        except RayActorError:
            # Whether the decision was claimed before the actor died is unknown: follow the run from its
            # checkpoint (if the claim never landed, its pause is announced again, to be decided again).
            first = await self._attach(request.run_id)
            if first is None:
                raise
        return _batches(first, self._next)

    async def attach(self, run_id: str) -> ChunkBatches | None:
        first = await self._attach(run_id)
        return None if first is None else _batches(first, self._next)

    async def _next(self, op_id: str) -> Batch:
        try:
            batch: Batch = await self.actor.call("next_batch", op_id, RAY_LINGER_S)
            return batch
        except (RayActorError, KeyError):
            # The actor died (or restarted and forgot this operation): follow the recovered run instead.
            run_id = op_id.rsplit("#", 1)[0]
            return await self._attach(run_id) or Batch(op_id, [], True)

    async def _attach(self, run_id: str) -> Batch | None:
        try:
            batch: Batch | None = await self.actor.call_while_restarting("attach", run_id, RAY_LINGER_S)
        except RayActorError as exc:
            raise AgentUnavailableError(
                f"agent {self.agent_id!r} could not be reached to follow run {run_id}: {exc}",
                run_id=run_id,
                agent_id=self.agent_id,
            ) from exc
        return batch

    async def generate(self, request: StartRequest) -> RunResult:
        return await self._generate("generate_start", request, request.options_given.get("run_id"))

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        return await self._generate("generate_decision", request, request.run_id)

    async def _generate(self, method: str, request: Any, run_id: str | None) -> RunResult:
        try:
            result: RunResult = await self.actor.call(method, request)
            return result
        except RayActorError:
            # The actor died mid-run; Ray restarts it and it recovers the run: follow it to its end.
            batches = await self._attach(run_id) if run_id else None
            if batches is None:
                raise
            builder = ResultBuilder(run_id or "")
            async for batch in _batches(batches, self._next):
                builder.feed(batch)
            return builder.result

    async def recover(self, wait_s: float | None = None) -> list[str]:
        args = () if wait_s is None else (wait_s,)
        recovered: list[str] = await self.actor.call_while_restarting("recover", *args)
        return recovered

    async def expire_due(self) -> list[str]:
        expired: list[str] = await self.actor.call_while_restarting("expire_due")
        return expired

    async def close(self) -> None:
        self.actor.kill()


__all__ = ["AgentHandle", "LocalHandle", "RayHandle"]
