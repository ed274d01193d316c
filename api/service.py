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
from troupe.api.auth import Gate, Principal
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

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` to its end in the background (its errors are the run's own, reported in it)."""

        async def settle() -> None:
            # The run's outcome is in its chunks and the store; nobody waits for it here.
            with contextlib.suppress(Exception):
                await work

        task = asyncio.get_running_loop().create_task(settle())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background work (at shutdown, before the runtime goes)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


# The security scheme shows in the OpenAPI document; the header itself is read by ``Gate``, which also
# handles open mode and malformed headers.
bearer = HTTPBearer(auto_error=False, description="An API key: 'Authorization: Bearer <key>'")


def service(request: Request) -> Service:
    found: Service = request.app.state.troupe
    return found


def caller(request: Request, _: Annotated[Any, Depends(bearer)]) -> Principal:
    return service(request).gate.authenticate(request.headers.get("authorization"))


ServiceDep = Annotated[Service, Depends(service)]
CallerDep = Annotated[Principal, Depends(caller)]

__all__ = ["CallerDep", "Service", "ServiceDep", "bearer", "caller", "service"]
