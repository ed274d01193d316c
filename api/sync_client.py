"""``TroupeClient``: the blocking twin of ``AsyncTroupeClient``, for scripts without an event loop.

It drives the async client on an event loop of its own in a background thread (an anyio blocking
portal), so both behave the same: streams are ``SyncAgentStream`` (``run_id``, ``full_stream`` and
``text_stream`` as plain iterators, ``result()``).

    with TroupeClient("http://127.0.0.1:8000", api_key="k-acme") as client:
        agent = client.get_agent("records-assistant")
        paused = agent.generate("Delete abc-123", resource_id="acme")
        done = agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1")
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal
from troupe.api.client import DEFAULT_URL, AsyncAgentClient, AsyncTroupeClient, Messages
from troupe.core.agent_api import AgentAPI
from troupe.core.chunks import Chunk
from troupe.core.options import StreamOptions, SuspendedRunFilters
from troupe.core.results import RunResult
from troupe.core.stream import AgentStream
from troupe.core.suspended import SuspendedRunList

T = TypeVar("T")


class TroupeClient:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 300.0,
        headers: Mapping[str, str] | None = None,
        api_prefix: str = "/api",
    ) -> None:
        """Options as ``AsyncTroupeClient`` (its HTTP connections belong to this client's own loop)."""
        options = {"api_key": api_key, "timeout": timeout, "headers": headers, "api_prefix": api_prefix}
        self._exit = contextlib.ExitStack()
        self._portal = self._exit.enter_context(start_blocking_portal("asyncio"))
        try:
            self._client: AsyncTroupeClient = self._portal.call(_make_client, base_url, options)
        except BaseException:
            self._exit.close()
            raise

    def __enter__(self) -> TroupeClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._exit is None:
            return
        try:
            self._portal.call(self._client.aclose)
        finally:
            self._exit.close()
            self._exit = None  # type: ignore[assignment]

    def get_agent(self, agent_id: str) -> AgentClient:
        return AgentClient(self._portal, self._client.get_agent(agent_id))

    def list_agents(self) -> dict[str, dict[str, Any]]:
        return self._portal.call(self._client.list_agents)


async def _make_client(base_url: str, options: dict[str, Any]) -> AsyncTroupeClient:
    return AsyncTroupeClient(base_url, **options)  # its connection pool belongs to the portal's loop


class SyncAgentStream:
    """An ``AgentStream`` read from a blocking caller."""

    def __init__(self, portal: BlockingPortal, stream: AgentStream) -> None:
        self._portal = portal
        self.stream = stream
        self.run_id = stream.run_id

    @property
    def full_stream(self) -> Iterator[Chunk]:
        return _iterate(self._portal, self.stream.full_stream)

    @property
    def text_stream(self) -> Iterator[str]:
        return _iterate(self._portal, self.stream.text_stream)

    def result(self) -> RunResult:
        return self._portal.call(self.stream.result)

    def __repr__(self) -> str:
        return f"Sync{self.stream!r}"


def _iterate(portal: BlockingPortal, source: AsyncIterator[T]) -> Iterator[T]:
    while True:
        try:
            yield portal.call(source.__anext__)
        except StopAsyncIteration:
            return


class AgentClient:
    """One agent of the server, blocking; the same methods and options as ``AsyncAgentClient``."""

    def __init__(self, portal: BlockingPortal, agent: AsyncAgentClient) -> None:
        self._portal = portal
        self._agent = agent
        self.id = agent.id

    def __repr__(self) -> str:
        return f"AgentClient({self.id!r})"

    def _call(self, method: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return self._portal.call(functools.partial(method, *args, **kwargs))

    def _stream(
        self, method: Callable[..., Awaitable[AgentStream]], *args: Any, **kwargs: Any
    ) -> SyncAgentStream:
        return SyncAgentStream(self._portal, self._call(method, *args, **kwargs))

    def details(self) -> dict[str, Any]:
        return self._call(self._agent.details)

    def stream(self, messages: Messages, **options: Unpack[StreamOptions]) -> SyncAgentStream:
        return self._stream(self._agent.stream, messages, **options)

    def generate(self, messages: Messages, **options: Unpack[StreamOptions]) -> RunResult:
        return self._call(self._agent.generate, messages, **options)

    def approve_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
    ) -> SyncAgentStream:
        return self._stream(
            self._agent.approve_tool_call,
            run_id=run_id,
            tool_call_id=tool_call_id,
            edited_args=edited_args,
            fingerprint=fingerprint,
        )

    def decline_tool_call(
        self, *, run_id: str, tool_call_id: str, reason: str | None = None, fingerprint: str | None = None
    ) -> SyncAgentStream:
        return self._stream(
            self._agent.decline_tool_call,
            run_id=run_id,
            tool_call_id=tool_call_id,
            reason=reason,
            fingerprint=fingerprint,
        )

    def approve_tool_call_generate(
        self,
        *,
        run_id: str,
        tool_call_id: str,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
    ) -> RunResult:
        return self._call(
            self._agent.approve_tool_call_generate,
            run_id=run_id,
            tool_call_id=tool_call_id,
            edited_args=edited_args,
            fingerprint=fingerprint,
        )

    def decline_tool_call_generate(
        self, *, run_id: str, tool_call_id: str, reason: str | None = None, fingerprint: str | None = None
    ) -> RunResult:
        return self._call(
            self._agent.decline_tool_call_generate,
            run_id=run_id,
            tool_call_id=tool_call_id,
            reason=reason,
            fingerprint=fingerprint,
        )

    def resume_stream(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> SyncAgentStream:
        return self._stream(
            self._agent.resume_stream,
            resume_data,
            run_id=run_id,
            tool_call_id=tool_call_id,
            fingerprint=fingerprint,
        )

    def resume_generate(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> RunResult:
        return self._call(
            self._agent.resume_generate,
            resume_data,
            run_id=run_id,
            tool_call_id=tool_call_id,
            fingerprint=fingerprint,
        )

    def list_suspended_runs(self, **filters: Unpack[SuspendedRunFilters]) -> SuspendedRunList:
        return self._call(self._agent.list_suspended_runs, **filters)

    def send_tool_approval(
        self,
        *,
        thread_id: str,
        resource_id: str | None,
        approved: bool,
        tool_call_id: str | None = None,
        reason: str | None = None,
        resume_data: Any = None,
    ) -> SyncAgentStream:
        return self._stream(
            self._agent.send_tool_approval,
            thread_id=thread_id,
            resource_id=resource_id,
            approved=approved,
            tool_call_id=tool_call_id,
            reason=reason,
            resume_data=resume_data,
        )


# The blocking form of ``troupe.core.agent_api.AgentAPI``: every method returns its result.
SyncAgentAPI = AgentAPI[SyncAgentStream, RunResult, SuspendedRunList]

__all__ = ["AgentClient", "SyncAgentAPI", "SyncAgentStream", "TroupeClient"]
