"""Handles: how callers reach an agent's host, in-process or in a Ray actor, through one interface.

Opening an operation returns once the host has accepted it (so an unknown run or a conflicting
decision raises at the call), then the chunk batches follow.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self

from troupe.actors.host import AgentHost, Batch
from troupe.actors.remote import RayActor, RayActorError
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import (
    AgentUnavailableError,
    DecisionConflictError,
    ToolCallNotSuspendedError,
)
from troupe.core.vocabulary.requests import (
    CallerPulledBatches,
    CancelledRun,
    CancelRequest,
    ChunkBatches,
    DecideRequest,
    StartRequest,
)
from troupe.core.vocabulary.results import ResultBuilder, RunResult

log = logging.getLogger(__name__)

# A run in flight and the host whose lease it is under (``RunState.owner``).
OwnedRun = tuple[str, str | None]

# A call costs about 0.1 ms over a channel and 1 ms through Ray (another node): chunks gather this long
# on the actor before a batch is sent, so a fast stream does not become a call per chunk.
RAY_LINGER_S = 0.010

Fetch = Callable[[str], Awaitable[Batch]]


class _Batches:
    """The first batch (already taken, so the host accepted the operation), then the rest as they come.

    Moves on only once ``fetch`` has returned: a pull cancelled while it waits leaves it where it was.
    """

    def __init__(self, first: Batch, fetch: Fetch) -> None:
        self._batch: Batch | None = first
        self._fetch = fetch
        self._given = False  # whether ``_batch``'s chunks were handed out

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> list[Chunk]:
        while self._batch is not None:
            batch = self._batch
            if not self._given:
                self._given = True
                if batch.chunks:
                    return batch.chunks
            if batch.done:
                self._batch = None
                break
            self._batch, self._given = await self._fetch(batch.op_id), False
        raise StopAsyncIteration


class _PulledBatches(_Batches, CallerPulledBatches):
    """Batches a reader may pull in its own task: those of a host in this process (its outbox keeps what
    is not read yet, and its ``next_batch`` takes chunks only once it returns), or those of an operation
    whose first batch was its last (nothing is left to fetch from anywhere)."""


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
    async def cancel(self, request: CancelRequest) -> CancelledRun:
        """Cancel a run of the agent; returns once the cancel is durable (``AgentHost.cancel``)."""

    @abc.abstractmethod
    async def generate_decision(self, request: DecideRequest) -> RunResult: ...

    # What the Runtime's reconciler asks (troupe.supervisor.reconciler); each is idempotent.

    @abc.abstractmethod
    async def supervise(self, held: list[OwnedRun]) -> tuple[set[str], list[str]]:
        """Every host of the agent: its owner id, and the runs of ``held`` it owns and picked up again."""

    @abc.abstractmethod
    async def take_over(self, runs: list[OwnedRun]) -> list[str]:
        """One host takes over these runs of dead owners; returns those it took."""

    @abc.abstractmethod
    async def expire(self, run_ids: list[str]) -> list[str]:
        """One host declines these runs' overdue pauses; returns the runs that had one."""

    @abc.abstractmethod
    async def close(self) -> None: ...


class LocalHandle(AgentHandle):
    def __init__(self, host: AgentHost) -> None:
        self.host = host
        self.agent_id = host.spec.id

    async def start(self, request: StartRequest) -> ChunkBatches:
        return _PulledBatches(await self.host.open_start(request), self.host.next_batch)

    async def decide(self, request: DecideRequest) -> ChunkBatches:
        return _PulledBatches(await self.host.open_decision(request), self.host.next_batch)

    async def attach(self, run_id: str) -> ChunkBatches | None:
        first = await self.host.attach(run_id)
        return None if first is None else _PulledBatches(first, self.host.next_batch)

    async def generate(self, request: StartRequest) -> RunResult:
        return await self.host.generate_start(request)

    async def cancel(self, request: CancelRequest) -> CancelledRun:
        return await self.host.cancel(request)

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        return await self.host.generate_decision(request)

    async def supervise(self, held: list[OwnedRun]) -> tuple[set[str], list[str]]:
        owner, taken = await self.host.supervise(held)
        return {owner}, taken

    async def take_over(self, runs: list[OwnedRun]) -> list[str]:
        return await self.host.take_over(runs)

    async def expire(self, run_ids: list[str]) -> list[str]:
        return await self.host.expire(run_ids)

    async def close(self) -> None:
        await self.host.close()


class RayHandle(AgentHandle):
    """Picklable: a supervisor's actor holds these for its subagents.

    An agent runs on one actor or on several replicas; any replica takes any run or decision (state is in
    the store, and claims are compare-and-set there), so calls go round the replicas, and a replica that
    dies is stepped around. If the actor dies while a stream is being read, Ray restarts it (or another
    replica takes the run over) and the stream re-attaches to the recovered run and carries on.
    """

    def __init__(self, actors: RayActor | Sequence[RayActor], agent_id: str) -> None:
        self.replicas = [actors] if isinstance(actors, RayActor) else list(actors)
        self.agent_id = agent_id
        self._turn = itertools.count(random.randrange(len(self.replicas)))

    @property
    def actor(self) -> RayActor:
        return self.replicas[0]

    def __reduce__(self) -> Any:
        return (RayHandle, (self.replicas, self.agent_id))

    def _order(self) -> list[RayActor]:
        """Every replica, starting with the next in turn: the first takes the call, the rest stand by."""
        first = next(self._turn) % len(self.replicas)
        return self.replicas[first:] + self.replicas[:first]

    async def start(self, request: StartRequest) -> ChunkBatches:
        run_id = request.options_given.get("run_id")
        actor, *others = self._order()
        try:
            return self._stream(await actor.call("open_start", request, RAY_LINGER_S), actor)
        except RayActorError:
            # The actor died while taking the run. If the run got as far as the store, a host recovers it
            # and we follow; if not, nothing happened yet and it is started again (elsewhere, if we can).
            found = await self._attach(run_id) if run_id else None
            if found is not None:
                return self._stream(*found)
        actor = others[0] if others else actor
        return self._stream(await actor.call_while_restarting("open_start", request, RAY_LINGER_S), actor)

    async def decide(self, request: DecideRequest) -> ChunkBatches:
        lost = False
        for actor in self._order():
            try:
                return self._stream(await actor.call("open_decision", request, RAY_LINGER_S), actor)
            except RayActorError:
                lost = True  # whether it claimed the decision is unknown: another replica finds out
            except (DecisionConflictError, ToolCallNotSuspendedError):
                if not lost:
                    raise
                break  # the replica that died had claimed it: follow the run
        # Follow the run from its checkpoint (if the claim never landed, its pause is announced again).
        found = await self._attach(request.run_id)
        if found is None:
            raise AgentUnavailableError(
                f"agent {self.agent_id!r} could not take the decision on run {request.run_id}",
                run_id=request.run_id,
            )
        return self._stream(*found)

    async def attach(self, run_id: str) -> ChunkBatches | None:
        found = await self._attach(run_id)
        return None if found is None else self._stream(*found)

    def _stream(self, first: Batch, actor: RayActor) -> ChunkBatches:
        # A quick operation comes back whole with the call that opened it (see RAY_LINGER_S): then its
        # reader needs no task to keep up with the actor.
        return (_PulledBatches if first.done else _Batches)(first, _Follow(self, actor).next)

    async def _attach(self, run_id: str) -> tuple[Batch, RayActor] | None:
        """Follow ``run_id`` on the replica that can: the one driving it, else any (which recovers it
        once its driver is gone). None if there is no such run."""
        order = self._order()
        if len(order) > 1:
            for actor in order:
                try:
                    batch: Batch | None = await actor.call("attach", run_id, RAY_LINGER_S, 0.0)
                except (RayActorError, AgentUnavailableError):
                    continue  # dead, or another live replica drives the run
                return None if batch is None else (batch, actor)
        try:
            batch = await order[0].call_while_restarting("attach", run_id, RAY_LINGER_S)
        except RayActorError as exc:
            raise AgentUnavailableError(
                f"agent {self.agent_id!r} could not be reached to follow run {run_id}: {exc}",
                run_id=run_id,
                agent_id=self.agent_id,
            ) from exc
        return None if batch is None else (batch, order[0])

    async def generate(self, request: StartRequest) -> RunResult:
        return await self._generate("generate_start", request, request.options_given.get("run_id"))

    async def cancel(self, request: CancelRequest) -> CancelledRun:
        """One replica records the cancel; the others are told to look, so the one driving the run (if
        it is another) stops it now rather than at its next write or heartbeat."""
        actor, *others = self._order()
        answer: CancelledRun = await actor.call_while_restarting("cancel", request)
        if others:
            await asyncio.gather(*(a.call("poke", request.run_id) for a in others), return_exceptions=True)
        return answer

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        return await self._generate("generate_decision", request, request.run_id)

    async def _generate(self, method: str, request: Any, run_id: str | None) -> RunResult:
        try:
            result: RunResult = await self._order()[0].call(method, request)
            return result
        except RayActorError:
            # The actor died mid-run; Ray restarts it and it recovers the run: follow it to its end.
            found = await self._attach(run_id) if run_id else None
            if found is None:
                raise
            builder = ResultBuilder(run_id or "")
            async for batch in self._stream(*found):
                builder.feed(batch)
            return builder.result

    async def supervise(self, held: list[OwnedRun]) -> tuple[set[str], list[str]]:
        """Every replica at once; one being restarted is left for the next round (its runs' leases run
        out meanwhile, or it picks them up on restart when a reader re-attaches)."""
        found = await asyncio.gather(
            *(a.call("supervise", held) for a in self.replicas), return_exceptions=True
        )
        owners: set[str] = set()
        taken: list[str] = []
        for replica, answer in zip(self.replicas, found, strict=True):
            if isinstance(answer, RayActorError):
                log.info(
                    "replica %s of %s missed a supervision round: %s", replica.name, self.agent_id, answer
                )
                continue
            if isinstance(answer, BaseException):
                raise answer
            owners.add(answer[0])
            taken += answer[1]
        return owners, taken

    async def take_over(self, runs: list[OwnedRun]) -> list[str]:
        taken: list[str] = await self._order()[0].call_while_restarting("take_over", runs)
        return taken

    async def expire(self, run_ids: list[str]) -> list[str]:
        expired: list[str] = await self._order()[0].call_while_restarting("expire", run_ids)
        return expired

    async def close(self) -> None:
        for actor in self.replicas:
            actor.kill()


class _Follow:
    """Reads one operation's batches from the replica running it, moving to whichever replica recovers
    the run if that one dies (or restarts and forgets the operation)."""

    def __init__(self, handle: RayHandle, actor: RayActor) -> None:
        self.handle = handle
        self.actor = actor

    async def next(self, op_id: str) -> Batch:
        try:
            batch: Batch = await self.actor.call("next_batch", op_id, RAY_LINGER_S)
            return batch
        except (RayActorError, KeyError):
            found = await self.handle._attach(op_id.rsplit("#", 1)[0])
            if found is None:
                return Batch(op_id, [], True)
            batch, self.actor = found
            return batch


__all__ = ["AgentHandle", "LocalHandle", "OwnedRun", "RayHandle"]
