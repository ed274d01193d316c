"""``A2AHandle``: how a supervisor reaches an ``A2AAgent``, through the same port as any subagent.

A delegation to a remote A2A agent opens a proxy run (``troupe.actors.a2a.proxy_run``) under the child
run id the delegation gives it, in the store the supervisor uses; the supervisor relays its chunks,
lifts its pauses and routes decisions to it exactly as it does for a subagent of its own. The handle
lives wherever the supervisor's host does (pickled into its Ray actor, or in-process) and reaches the
remote agent from there. Supervision has nothing to do for it: a proxy run is followed again by its
parent when the parent recovers (``attach``), never taken over on its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from troupe.actors.a2a.agent import A2AAgent
from troupe.actors.handle import AgentHandle, OwnedRun
from troupe.core.deciding.cancelling import DEFAULT_REASON
from troupe.core.deciding.handoff import handed_off
from troupe.core.run.cancels import check_cancel
from troupe.core.run.recovery import replay
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DuplicateRunError,
    SnapshotNotFoundError,
    ToolCallNotSuspendedError,
)
from troupe.core.vocabulary.identity import starter_fields
from troupe.core.vocabulary.messages import normalize_messages
from troupe.core.vocabulary.requests import (
    CancelledRun,
    CancelRequest,
    ChunkBatches,
    DecideRequest,
    StartRequest,
)
from troupe.core.vocabulary.results import ResultBuilder, RunResult
from troupe.core.vocabulary.state import Cancellation, RemoteTask, RunState
from troupe.core.vocabulary.store import StaleSnapshotError, Store

# A cancel retries its compare-and-set while the proxy run changes under it (its task's events).
_CANCEL_ATTEMPTS = 20


class A2AHandle(AgentHandle):
    """The port of the remote A2A agent ``spec``, keeping its proxy runs in ``store``."""

    def __init__(self, spec: A2AAgent, store: Store) -> None:
        self.spec = spec
        self.store = store
        self.agent_id = spec.id
        self._remote: Any = None

    def __reduce__(self) -> Any:
        return (A2AHandle, (self.spec, self.store))

    def remote(self) -> Any:
        """The remote agent as this process reaches it (made on first use: the SDK loads then)."""
        if self._remote is None:
            from troupe.actors.a2a.connection import RemoteAgent

            self._remote = RemoteAgent(self.spec)
        return self._remote

    def _run(self, state: RunState, version: int) -> Any:
        from troupe.actors.a2a.proxy_run import ProxyRun

        return ProxyRun(self.remote(), self.store, state, version)

    # ---- the port ------------------------------------------------------------------------------------

    async def start(self, request: StartRequest) -> ChunkBatches:
        """Store the proxy run, then send the prompt as a new remote task. A run already stored under
        this id (a parent starting again after a crash) is followed instead: a prompt is sent once."""
        state = self._new_state(request)
        try:
            version = await self.store.create_run(state)
        except DuplicateRunError:
            found = await self.attach(state.run_id)
            if found is None:
                raise
            return found
        run = self._run(state, version)
        return _batches(run.watched(run.begin()))

    def _new_state(self, request: StartRequest) -> RunState:
        options = request.options_given
        prompt = next(
            (m["content"] for m in reversed(normalize_messages(request.messages)) if m["role"] == "user"), ""
        )
        return RunState(
            run_id=options["run_id"],
            agent_id=self.agent_id,
            resource_id=options.get("resource_id"),
            request_context=options.get("request_context") or {},
            messages=[{"role": "user", "content": str(prompt)}],
            parent=request.parent,
            remote=RemoteTask(url=self.spec.where),
            **starter_fields(options.get("started_by")),
        )

    async def decide(self, request: DecideRequest) -> ChunkBatches:
        stored = await self.store.load_run(request.run_id)
        if stored is None or stored.state.agent_id != self.agent_id:
            raise SnapshotNotFoundError(
                f"snapshot not found for run {request.run_id} of A2A agent {self.agent_id!r}",
                run_id=request.run_id,
            )
        run = self._run(stored.state, stored.version)
        return _batches(run.watched(await run.answer(request)))

    async def attach(self, run_id: str) -> ChunkBatches | None:
        """Follow the proxy run wherever it stands: replay it once it has ended or while it waits (first
        delivering a decision its parent claimed but could not route here), else follow its task."""
        stored = await self.store.load_run(run_id)
        if stored is None or stored.state.agent_id != self.agent_id:
            return None
        state = stored.state
        if state.status == "suspended":
            request = await handed_off(self.store, state)
            if request is not None:
                try:
                    return await self.decide(request)
                except (DecisionConflictError, ToolCallNotSuspendedError):
                    return await self.attach(run_id)  # decided meanwhile: follow that
        if state.status != "running":
            return _batches(_listed(replay(self.agent_id, state)))
        run = self._run(state, stored.version)
        return _batches(run.watched(run.resumed()))

    async def cancel(self, request: CancelRequest) -> CancelledRun:
        """Cancel a proxy run: recorded by compare-and-set (so against an answer to the same question
        exactly one wins), the run ended with the cancel as its outcome (its parent's model is told),
        then the remote task cancelled over A2A (``ProxyRun.cancel``). Only the run's starter or an
        admin may, unless it cascades from the parent's cancel; the approver policies live with the top
        run, where a waiting subagent's cancel is routed (``troupe.supervisor.cancel_route``)."""
        for _ in range(_CANCEL_ATTEMPTS):
            stored = await self.store.load_run(request.run_id)
            if stored is None or stored.state.agent_id != self.agent_id:
                raise SnapshotNotFoundError(
                    f"snapshot not found for run {request.run_id} of A2A agent {self.agent_id!r}",
                    run_id=request.run_id,
                )
            state, was = stored.state, stored.state.status
            # The approver policies live with the top run (a waiting subagent's cancel is routed there).
            await check_cancel(self.store, None, state, request)
            who = request.canceller
            cancellation = Cancellation(
                reason=request.reason or DEFAULT_REASON,
                by=who.identity() if who is not None else None,
                finish_reason=request.finish_reason,
            )
            try:
                await self._run(state, stored.version).cancel(cancellation, request.surface)
            except StaleSnapshotError:
                continue
            return CancelledRun.of(state.run_id, self.agent_id, cancellation, was)
        raise StaleSnapshotError(f"run {request.run_id} kept changing while it was being cancelled; retry")

    async def generate(self, request: StartRequest) -> RunResult:
        return await _collect(await self.start(request), request.options_given.get("run_id", ""))

    async def generate_decision(self, request: DecideRequest) -> RunResult:
        return await _collect(await self.decide(request), request.run_id)

    # ---- supervision: nothing to do (a proxy run is followed by its parent) -------------------------

    async def supervise(self, held: list[OwnedRun]) -> tuple[set[str], list[str]]:
        return set(), []

    async def take_over(self, runs: list[OwnedRun]) -> list[str]:
        return []

    async def expire(self, run_ids: list[str]) -> list[str]:
        return []

    async def close(self) -> None:
        if self._remote is not None:
            await self._remote.close()


async def _listed(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


async def _batches(chunks: AsyncIterator[Chunk]) -> AsyncIterator[list[Chunk]]:
    async for chunk in chunks:
        yield [chunk]


async def _collect(batches: ChunkBatches, run_id: str) -> RunResult:
    builder = ResultBuilder(run_id)
    async for batch in batches:
        builder.feed(batch)
    return builder.result


__all__ = ["A2AHandle"]
