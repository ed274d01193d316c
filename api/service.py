"""What every route needs: the runtime, who is calling, whose a run is, and a place for work that outlives
its request (a ``send-tool-approval`` answered with JSON while its run carries on).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPBearer
from troupe.api.auth import Gate, Principal, own_resource
from troupe.api.bodies import RunBody
from troupe.api.identity import binding, caller_of
from troupe.api.streams import MIN_INTERVAL_S, OpenStreams
from troupe.core.vocabulary.errors import SnapshotNotFoundError
from troupe.supervisor.agent import Agent
from troupe.supervisor.runtime import Runtime


@dataclass
class Service:
    runtime: Runtime
    gate: Gate
    # The inbox's event streams: how many are open, and how often each may re-read the store.
    streams: OpenStreams = field(default_factory=OpenStreams)
    min_event_interval_s: float = MIN_INTERVAL_S
    _background: set[asyncio.Task[Any]] = field(default_factory=set)

    def agent(self, agent_id: str) -> Agent:
        return self.runtime.get_agent(agent_id)

    async def run_agent(self, caller: Principal, agent_id: str, run_id: str) -> Agent:
        """The agent, once ``caller`` is known to be allowed to act on its run ``run_id``."""
        agent = self.agent(agent_id)
        await self.check_run(caller, agent, run_id)
        return agent

    async def check_run(self, caller: Principal, agent: Agent, run_id: str) -> None:
        """Let ``caller`` act on the run only if it belongs to one of the caller's resources. Someone
        else's run is answered exactly like an unknown one, so its existence is not given away. An admin
        is not checked here: the agent's engine refuses a run that is not its own before claiming."""
        if caller.admin:
            return
        info = await self.runtime.run_info(agent.id, run_id)
        if info is None or not caller.may(info["resource_id"]):
            raise SnapshotNotFoundError(
                f"snapshot not found for run {run_id} of agent {agent.id!r}: unknown or already finished",
                run_id=run_id,
            )

    async def start(self, agent_id: str, body: RunBody, caller: Principal, how: str) -> Any:
        """Start a run for ``caller`` from an HTTP body: a run of one of its resources, started by it,
        with options that may turn approval on but never off (an HTTP caller is not trusted)."""
        self.agent(agent_id)
        options = body.options(own_resource(caller, body.resource()))
        return await self.start_run(agent_id, body.python_messages(), options, caller, how)

    async def start_run(
        self, agent_id: str, messages: Any, options: dict[str, Any], caller: Principal, how: str
    ) -> Any:
        """Start a run of ``agent_id`` for ``caller`` (who is recorded as its starter) with ``options``
        from a caller the runtime does not trust (they may turn approval on, never off). ``how``:
        ``"stream"`` (an ``AgentStream``) or ``"generate"`` (a ``RunResult``)."""
        agent = self.agent(agent_id)
        given: Any = {**options, "started_by": caller}
        request = Agent.start_request(messages, given, remote=True)
        if how == "stream":
            return await self.runtime.stream(agent.id, request)
        return await self.runtime.generate(agent.id, request)

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` to its end in the background (its errors are the run's own, reported in it)."""

        async def run_quietly() -> None:
            # The run's outcome is in its chunks and the store; nobody waits for it here.
            with contextlib.suppress(Exception):
                await work

        task = asyncio.get_running_loop().create_task(run_quietly())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background work (at shutdown, before the runtime goes)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


# The security scheme shows in the OpenAPI document; the header itself is read by ``Gate``, which also
# handles open mode and malformed headers (or the host app's identity answers first: troupe.api.identity).
bearer = HTTPBearer(
    auto_error=False, description="An API key or an OIDC token: 'Authorization: Bearer <credential>'"
)


def service(request: Request) -> Service:
    found: Service = binding(request).service
    return found


async def caller(request: Request, _: Annotated[Any, Depends(bearer)]) -> Principal:
    return await caller_of(request)


def surface(request: Request) -> str:
    """Where a decision over HTTP came from, for the audit: the route it came through says (the inbox
    page's own routes are ``inbox``, the others ``http``), never anything the client sends."""
    return str(getattr(request.scope.get("route"), "surface", "http"))


async def decider(request: Request, principal: Annotated[Principal, Depends(caller)]) -> dict[str, Any]:
    """Who decides, as the decision methods take it: the caller, through this surface."""
    return {"decided_by": principal, "surface": surface(request)}


ServiceDep = Annotated[Service, Depends(service)]
CallerDep = Annotated[Principal, Depends(caller)]
DeciderDep = Annotated[dict[str, Any], Depends(decider)]

__all__ = ["CallerDep", "DeciderDep", "Service", "ServiceDep", "bearer", "caller", "service", "surface"]
