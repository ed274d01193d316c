"""What an ``Agent`` asks of the runtime it runs on, and the process's default runtime.

An Agent's run methods land on its runtime (``troupe.supervisor.runtime.Runtime``). The runtime hosts
Agents, so it imports them; the Agent knows its runtime only by ``AgentRuntime``, so neither module
imports the other. An Agent used without a Runtime runs on the process's default one, which
``troupe.supervisor.default`` provides here: the package's ``__init__`` imports it, so it is in place
before anyone can use an Agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, Unpack

from troupe.core.vocabulary.options import SuspendedRunFilters
from troupe.core.vocabulary.requests import CancelledRun, CancelRequest, DecideRequest, StartRequest
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList


class AgentRuntime(Protocol):
    """The runtime an Agent is bound to, as the Agent's methods use it (``Runtime`` is the one there
    is)."""

    # ``agent`` is an Agent: typed loosely, as naming the class here would import it back.
    def register(self, agent: Any, *, replace: bool = False) -> Any: ...

    async def stream(self, agent_id: str, request: StartRequest) -> AgentStream: ...

    async def generate(self, agent_id: str, request: StartRequest) -> RunResult: ...

    async def decide(self, agent_id: str, request: DecideRequest) -> AgentStream: ...

    async def decide_generate(self, agent_id: str, request: DecideRequest) -> RunResult: ...

    async def observe(self, agent_id: str, run_id: str) -> AgentStream: ...

    async def cancel_run(self, agent_id: str, request: CancelRequest) -> CancelledRun: ...

    async def list_suspended_runs(
        self, agent_id: str, **filters: Unpack[SuspendedRunFilters]
    ) -> SuspendedRunList: ...

    async def find_suspended_run(
        self, agent_id: str, *, thread_id: str, resource_id: str | None, tool_call_id: str | None
    ) -> str: ...


_provider: Callable[[], AgentRuntime] | None = None


def provide_default(provider: Callable[[], AgentRuntime]) -> None:
    """Make ``provider`` what Agents used without a Runtime run on (``troupe.supervisor.default``)."""
    global _provider
    _provider = provider


def default_agent_runtime() -> AgentRuntime:
    """The process's default runtime.

    Raises:
        RuntimeError: Nothing provides one (``troupe.supervisor`` was never imported).
    """
    if _provider is None:
        raise RuntimeError("no default runtime: import troupe.supervisor (or troupe) first")
    return _provider()


__all__ = ["AgentRuntime", "default_agent_runtime", "provide_default"]
