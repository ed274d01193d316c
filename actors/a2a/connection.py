"""Talking to one remote A2A agent with the official ``a2a-sdk`` client: its card, sending a message,
reading and following a task.

Everything the remote agent sends is hostile input: each response is bounded in bytes
(``MAX_RESPONSE_BYTES``) before the SDK parses it (protobuf bounds the nesting), and what a proxy run
keeps of it is bounded again there. Every failure becomes a ``RemoteAgentError`` naming the agent,
sorted by what it says about a message that was being sent:

- ``RemoteUnreachable``: the connection was never made; nothing was sent;
- ``RemoteRefused``: the remote agent answered with an error (a JSON-RPC error, an HTTP 4xx): it took
  nothing (``gone``: the task is unknown there or has ended);
- ``RemoteFailed``: the remote agent answered with a failure of its own (an internal error, or its agent
  answered what its server could not use): it may have acted on the request before it failed;
- ``RemoteLost``: anything else (a read that failed, a timeout, a 5xx, a response too large): the
  message may or may not have been taken, so it is never sent again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from troupe.actors.a2a.agent import A2AAgent, parse_card, redacted, shown_url
from troupe.actors.a2a.errors import RemoteAgentError, RemoteCardError

# The most one response of a remote agent may hold (a card, a task, a whole event stream).
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
CARD_PATH = "/.well-known/agent-card.json"
_CONNECT_TIMEOUT_S = 10.0


class RemoteUnreachable(RemoteAgentError):
    """The remote agent could not be reached: nothing was sent."""

    code = "A2A_REMOTE_UNREACHABLE"


class RemoteRefused(RemoteAgentError):
    """The remote agent answered with an error: it took nothing. ``gone``: the task is unknown there or
    has ended (nothing more can be sent to it)."""

    code = "A2A_REMOTE_REFUSED"

    @property
    def gone(self) -> bool:
        return bool(self.details.get("gone"))


class RemoteFailed(RemoteAgentError):
    """The remote agent answered with a failure of its own (A2A's internal error, or an invalid response
    of its agent): it took the request, and may have acted on it before it failed."""

    code = "A2A_REMOTE_FAILED"


class RemoteLost(RemoteAgentError):
    """The exchange broke off after the request went out: it may or may not have been taken."""

    code = "A2A_REMOTE_LOST"


class _TooLarge(Exception):
    pass


class _Capped(httpx.AsyncByteStream):
    def __init__(self, inner: Any, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise _TooLarge(f"the response is larger than {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Bounded(httpx.AsyncBaseTransport):
    """An HTTP transport whose responses end with an error once they pass ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        response.stream = _Capped(response.stream, self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class RemoteAgent:
    """The remote A2A agent ``spec`` names, as this process reaches it (one HTTP client per event loop)."""

    def __init__(self, spec: A2AAgent) -> None:
        self.spec = spec
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: httpx.AsyncClient | None = None
        self._client: Any = None
        self.card: Any = None

    @property
    def name(self) -> str:
        return f"A2A agent {self.spec.id!r} ({self.spec.where})"

    async def _connected(self) -> Any:
        """The SDK's client for the agent, made (card included) on first use in this event loop."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is loop:
            return self._client
        from a2a.client import ClientConfig, ClientFactory

        http = httpx.AsyncClient(
            headers=self.spec.request_headers(),
            timeout=httpx.Timeout(self.spec.timeout_s, connect=_CONNECT_TIMEOUT_S),
            transport=_Bounded(MAX_RESPONSE_BYTES),
            follow_redirects=False,
        )
        try:
            card = self.card or await self._card(http)
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        except Exception as exc:
            await http.aclose()
            if isinstance(exc, RemoteAgentError):
                raise
            why = redacted(str(exc))
            raise RemoteCardError(f"{self.name} cannot be used: {why}", agent_id=self.spec.id) from None
        self._loop, self._http, self._client, self.card = loop, http, client, card
        return client

    async def _card(self, http: httpx.AsyncClient) -> Any:
        """The agent's card: as given, or fetched from its URL."""
        if self.spec.card is not None:
            return parse_card(self.spec.id, dict(self.spec.card))
        url = self.spec.card_url or ""
        if not url.endswith(".json"):
            url = url.rstrip("/") + CARD_PATH
        try:
            response = await http.get(url)
            body = json.loads(await response.aread()) if response.status_code == 200 else None
        except (httpx.HTTPError, _TooLarge, ValueError) as exc:
            raise RemoteCardError(
                f"the agent card of {self.name} could not be read from {shown_url(url)}: "
                + redacted(str(exc)),
                agent_id=self.spec.id,
            ) from None
        if response.status_code != 200:
            raise RemoteCardError(
                f"the agent card of {self.name} could not be fetched from {shown_url(url)}: "
                f"HTTP {response.status_code}",
                agent_id=self.spec.id,
                status=response.status_code,
            )
        return parse_card(self.spec.id, body)

    async def streaming(self) -> bool:
        """Whether the agent streams (its card says so)."""
        await self._connected()
        return bool(self.card.capabilities.streaming)

    async def send(self, message: Any) -> AsyncIterator[Any]:
        """Send ``message`` (an A2A ``Message``); yields the agent's ``StreamResponse`` events."""
        from a2a.types.a2a_pb2 import SendMessageRequest

        client = await self._connected()
        request = SendMessageRequest(message=message)
        async for event in self._translated(lambda: client.send_message(request)):
            yield event

    async def get(self, task_id: str) -> Any:
        """The task as the agent has it now."""
        from a2a.types.a2a_pb2 import GetTaskRequest

        client = await self._connected()
        try:
            return await client.get_task(GetTaskRequest(id=task_id))
        except Exception as exc:
            raise self.classified(exc) from None

    async def cancel(self, task_id: str, reason: str | None = None) -> Any:
        """Ask the agent to cancel the task (A2A's ``CancelTask``, ``reason`` in its metadata, where a
        Troupe agent reads it); the task as it answers."""
        from a2a.types.a2a_pb2 import CancelTaskRequest

        client = await self._connected()
        metadata = {"reason": reason} if reason else None
        try:
            return await client.cancel_task(CancelTaskRequest(id=task_id, metadata=metadata))
        except Exception as exc:
            raise self.classified(exc) from None

    async def subscribe(self, task_id: str) -> AsyncIterator[Any]:
        """Follow the task's events from now on."""
        from a2a.types.a2a_pb2 import SubscribeToTaskRequest

        client = await self._connected()
        async for event in self._translated(lambda: client.subscribe(SubscribeToTaskRequest(id=task_id))):
            yield event

    async def _translated(self, open_stream: Any) -> AsyncIterator[Any]:
        stream = open_stream()
        try:
            while True:
                try:
                    event = await anext(stream)
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    raise self.classified(exc) from None
                yield event
        finally:
            await stream.aclose()

    def classified(self, exc: BaseException) -> RemoteAgentError:
        """``exc`` from the SDK as what it says about a request that was being sent."""
        from a2a.client.errors import A2AClientError
        from a2a.utils.errors import (
            A2AError,
            InternalError,
            InvalidAgentResponseError,
            TaskNotFoundError,
            UnsupportedOperationError,
        )

        if isinstance(exc, RemoteAgentError):
            return exc
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout):
            why = redacted(str(cause))
            return RemoteUnreachable(f"{self.name} could not be reached: {why}", agent_id=self.spec.id)
        if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code < 500:
            status = cause.response.status_code
            return RemoteRefused(f"{self.name} refused the request: HTTP {status}", agent_id=self.spec.id)
        if isinstance(exc, InternalError | InvalidAgentResponseError):
            why = f"{self.name} failed handling the request: {redacted(exc.message)}"
            return RemoteFailed(why, agent_id=self.spec.id)
        if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError):
            gone = isinstance(exc, TaskNotFoundError | UnsupportedOperationError)
            why = f"{self.name} answered with an error: {redacted(exc.message)}"
            return RemoteRefused(why, agent_id=self.spec.id, gone=gone)
        too_large = next((e for e in (exc, cause) if isinstance(e, _TooLarge)), None)
        # The SDK's text of a 5xx quotes the full URL ("for url '...'"): its status stays, its secrets go.
        why = str(too_large) if too_large is not None else redacted(f"{type(exc).__name__}: {exc}")
        return RemoteLost(f"the exchange with {self.name} broke off: {why}", agent_id=self.spec.id)

    async def close(self) -> None:
        http, self._http, self._client = self._http, None, None
        if http is not None and self._loop is asyncio.get_running_loop():
            await http.aclose()


__all__ = [
    "MAX_RESPONSE_BYTES",
    "RemoteAgent",
    "RemoteFailed",
    "RemoteLost",
    "RemoteRefused",
    "RemoteUnreachable",
]
