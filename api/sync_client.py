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
import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal
from troupe.api.client import DEFAULT_URL, AsyncAgentClient, AsyncTroupeClient
from troupe.core.vocabulary.agent_api import AgentAPI
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.requests import CancelledRun
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList

T = TypeVar("T")
P = ParamSpec("P")


class TroupeClient:
    """A connection to a Troupe server for code without an event loop: every method blocks.

    It drives an ``AsyncTroupeClient`` on an event loop of its own, in a background thread; use it as a
    context manager (or call ``close``), and reach an agent with ``get_agent``.

    Args:
        base_url: The server's URL (default ``http://127.0.0.1:8000``).
        api_key: The API key or bearer token sent as ``Authorization: Bearer ...`` (none in open mode).
        timeout: Seconds to wait for a response (default 300); connecting waits at most 10 s. Or an
            ``httpx.Timeout``.
        headers: More headers to send with every request.
        api_prefix: Where the server mounts its API (default ``/api``).

    Example:
        >>> with TroupeClient("http://127.0.0.1:8000", api_key="k-acme") as client:
        ...     agent = client.get_agent("records-assistant")
        ...     paused = agent.generate("Delete abc-123", resource_id="acme")
        ...     done = agent.approve_tool_call_generate(run_id=paused.run_id)
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 300.0,
        headers: Mapping[str, str] | None = None,
        api_prefix: str = "/api",
    ) -> None:
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
        """Close the connections and stop the client's event loop (again: nothing happens)."""
        if self._exit is None:
            return
        try:
            self._portal.call(self._client.aclose)
        finally:
            self._exit.close()
            self._exit = None  # type: ignore[assignment]

    def get_agent(self, agent_id: str) -> AgentClient:
        """One agent of the server, with the run methods of ``troupe.Agent``, blocking.

        Args:
            agent_id: The agent's id (an unknown one shows at its first call: ``AgentNotFoundError``).

        Returns:
            The agent's ``AgentClient``.
        """
        return AgentClient(self._portal, self._client.get_agent(agent_id))

    def list_agents(self) -> dict[str, dict[str, Any]]:
        """Every agent the server runs, keyed by id (``GET /api/agents``).

        Returns:
            Each agent as Mastra serializes it, by id.

        Raises:
            AuthenticationError: The server wants a key and got none, or a wrong one.
            ServerUnreachableError: The server did not take the connection.
        """
        return self._portal.call(self._client.list_agents)


async def _make_client(base_url: str, options: dict[str, Any]) -> AsyncTroupeClient:
    return AsyncTroupeClient(base_url, **options)  # its connection pool belongs to the portal's loop


class SyncAgentStream:
    """An ``AgentStream`` read from a blocking caller: what ``AgentClient``'s streaming methods return.

    Args:
        portal: The client's event loop, which reads the stream.
        stream: The stream read.
    """

    def __init__(self, portal: BlockingPortal, stream: AgentStream) -> None:
        self._portal = portal
        self.stream = stream
        self.run_id = stream.run_id

    @property
    def full_stream(self) -> Iterator[Chunk]:
        """Every chunk of the run from its start, as a plain iterator (each read of it starts over)."""
        return _iterate(self._portal, self.stream.full_stream)

    @property
    def text_stream(self) -> Iterator[str]:
        """The run's text as it comes, as a plain iterator."""
        return _iterate(self._portal, self.stream.text_stream)

    def result(self) -> RunResult:
        """Wait for the run to end or pause, and return its ``RunResult``.

        Raises:
            RunFailedError: The run ended with an error.
        """
        return self._portal.call(self.stream.result)

    def __repr__(self) -> str:
        return f"Sync{self.stream!r}"


def _iterate(portal: BlockingPortal, source: AsyncIterator[T]) -> Iterator[T]:
    while True:
        try:
            yield portal.call(source.__anext__)
        except StopAsyncIteration:
            return


# An awaited call in an example, ``(await stream.result()).text``: blocking, it needs no parentheses.
_AWAITED = re.compile(r"\(await ([^()]*(?:\([^()]*\)[^()]*)*)\)")


def _blocking_doc(doc: str | None, *, stream: bool) -> str | None:
    """The async method's docstring as its blocking twin reads (``help()``, an IDE's hover): examples
    and prose without ``await`` and ``async``, and a stream that is a ``SyncAgentStream``."""
    if doc is None:
        return None
    doc = _AWAITED.sub(r"\1", doc)
    doc = doc.replace("await ", "").replace("async for ", "for ").replace("async with ", "with ")
    return doc.replace("``AgentStream``", "``SyncAgentStream``") if stream else doc


def _blocking(
    method: Callable[Concatenate[AsyncAgentClient, P], Awaitable[T]],
) -> Callable[Concatenate[AgentClient, P], T]:
    """``AsyncAgentClient``'s ``method``, called on the client's own loop and waited for: the same
    parameters, options and types (mypy reads them from the async method), the result returned."""

    @functools.wraps(method)
    def call(self: AgentClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._portal.call(functools.partial(method, self._agent, *args, **kwargs))

    call.__doc__ = _blocking_doc(method.__doc__, stream=False)
    return call


def _blocking_stream(
    method: Callable[Concatenate[AsyncAgentClient, P], Awaitable[AgentStream]],
) -> Callable[Concatenate[AgentClient, P], SyncAgentStream]:
    """As ``_blocking``, for a method that opens a stream: the stream is read from the blocking side."""

    @functools.wraps(method)
    def call(self: AgentClient, /, *args: P.args, **kwargs: P.kwargs) -> SyncAgentStream:
        opened = self._portal.call(functools.partial(method, self._agent, *args, **kwargs))
        return SyncAgentStream(self._portal, opened)

    call.__doc__ = _blocking_doc(method.__doc__, stream=True)
    # What help() shows it returns: the wrapped method's signature, but the blocking stream.
    call.__signature__ = inspect.signature(method).replace(  # type: ignore[attr-defined]
        return_annotation="SyncAgentStream"
    )
    return call


class AgentClient:
    """One agent of a Troupe server, blocking: the methods, options and errors of ``AsyncAgentClient``.

    Made by ``TroupeClient.get_agent``. Streaming methods return a ``SyncAgentStream``; the others
    return their result.

    Args:
        portal: The client's event loop.
        agent: The async agent client each call is made with.
    """

    def __init__(self, portal: BlockingPortal, agent: AsyncAgentClient) -> None:
        self._portal = portal
        self._agent = agent
        self.id = agent.id

    def __repr__(self) -> str:
        return f"AgentClient({self.id!r})"

    # Each method is its async twin run on the client's loop (``_blocking``), with the twin's signature
    # and docstring. The string under each is its entry on the reference page, which is read from this
    # source and so cannot see what ``_blocking`` gives it.
    details = _blocking(AsyncAgentClient.details)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.details]."""
    stream = _blocking_stream(AsyncAgentClient.stream)
    """Blocking: returns a ``SyncAgentStream``. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.stream]."""
    generate = _blocking(AsyncAgentClient.generate)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.generate]."""
    approve_tool_call = _blocking_stream(AsyncAgentClient.approve_tool_call)
    """Blocking: returns a ``SyncAgentStream``. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.approve_tool_call]."""
    decline_tool_call = _blocking_stream(AsyncAgentClient.decline_tool_call)
    """Blocking: returns a ``SyncAgentStream``. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.decline_tool_call]."""
    approve_tool_call_generate = _blocking(AsyncAgentClient.approve_tool_call_generate)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.approve_tool_call_generate]."""
    decline_tool_call_generate = _blocking(AsyncAgentClient.decline_tool_call_generate)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.decline_tool_call_generate]."""
    resume_stream = _blocking_stream(AsyncAgentClient.resume_stream)
    """Blocking: returns a ``SyncAgentStream``. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.resume_stream]."""
    resume_generate = _blocking(AsyncAgentClient.resume_generate)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.resume_generate]."""
    list_suspended_runs = _blocking(AsyncAgentClient.list_suspended_runs)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.list_suspended_runs]."""
    send_tool_approval = _blocking_stream(AsyncAgentClient.send_tool_approval)
    """Blocking: returns a ``SyncAgentStream``. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.send_tool_approval]."""
    cancel_run = _blocking(AsyncAgentClient.cancel_run)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.cancel_run]."""
    run_status = _blocking(AsyncAgentClient.run_status)
    """Blocking: returns its result. Arguments, options and errors: [the async
    one][troupe.client.AsyncAgentClient.run_status]."""


# The blocking form of ``troupe.core.vocabulary.agent_api.AgentAPI``: every method returns its result.
SyncAgentAPI = AgentAPI[SyncAgentStream, RunResult, SuspendedRunList, CancelledRun]

__all__ = ["AgentClient", "SyncAgentAPI", "SyncAgentStream", "TroupeClient"]
