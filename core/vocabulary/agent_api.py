"""``AgentAPI``: the protocol of the run methods every way of reaching an agent offers.

An agent is reached in-process (``troupe.Agent``), over HTTP with the async client
(``AsyncAgentClient``) or with the blocking one (``AgentClient``). The first two inherit the methods
from one base (``troupe.core.vocabulary.run_methods.RunMethods``), and the blocking client wraps the
async one, so their names, keyword options and results are the same; only how a result is handed back
differs (awaited, or returned). So the protocol takes the result types as parameters: ``AsyncAgentAPI``
is the awaited form, and ``troupe.api.sync_client.SyncAgentAPI`` the blocking one. Code that works with
any agent (the operator CLI, a test story) takes an ``AsyncAgentAPI``; mypy checks that each
implementation conforms (``troupe.api.conformance``).

The protocol holds the form every implementation takes: who acts (``decided_by``, ``roles``, ...) is
given in-process only (over HTTP it comes from the API key). A decision without ``tool_call_id``
decides the run's most recently paused call, in-process and over HTTP alike.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar, Unpack

from troupe.core.vocabulary.options import StreamOptions, SuspendedRunFilters
from troupe.core.vocabulary.requests import CancelledRun
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList

Messages = str | list[dict[str, Any]]

StreamT = TypeVar("StreamT", covariant=True)
ResultT = TypeVar("ResultT", covariant=True)
ListingT = TypeVar("ListingT", covariant=True)
CancelT = TypeVar("CancelT", covariant=True)


class AgentAPI(Protocol[StreamT, ResultT, ListingT, CancelT]):
    """The eleven run methods, for typing code that takes any agent.

    Start (``stream``/``generate``), decide (approve/decline, each streamed or to its result), answer a
    ``suspend()`` (resume), find paused runs, decide one by thread, and cancel a run. What each method
    takes and raises is documented on ``troupe.Agent``.

    Example:
        >>> async def approve_all(agent: AsyncAgentAPI) -> None:
        ...     for run in (await agent.list_suspended_runs()).runs:
        ...         await agent.approve_tool_call_generate(run_id=run.run_id)
    """

    @property
    def id(self) -> str:
        """The agent's id."""
        ...

    def stream(self, messages: Messages, **options: Unpack[StreamOptions]) -> StreamT: ...

    def generate(self, messages: Messages, **options: Unpack[StreamOptions]) -> ResultT: ...

    def approve_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
    ) -> StreamT: ...

    def decline_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        fingerprint: str | None = None,
    ) -> StreamT: ...

    def approve_tool_call_generate(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
    ) -> ResultT: ...

    def decline_tool_call_generate(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        fingerprint: str | None = None,
    ) -> ResultT: ...

    def resume_stream(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> StreamT: ...

    def resume_generate(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> ResultT: ...

    def list_suspended_runs(self, **filters: Unpack[SuspendedRunFilters]) -> ListingT: ...

    def send_tool_approval(
        self,
        *,
        thread_id: str,
        resource_id: str | None,
        approved: bool,
        tool_call_id: str | None = None,
        reason: str | None = None,
        resume_data: Any = None,
    ) -> StreamT: ...

    def cancel_run(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> CancelT: ...


# In-process and over HTTP with the async client: every method is awaited.
AsyncAgentAPI = AgentAPI[
    Awaitable[AgentStream], Awaitable[RunResult], Awaitable[SuspendedRunList], Awaitable[CancelledRun]
]

__all__ = ["AgentAPI", "AsyncAgentAPI", "Messages"]
