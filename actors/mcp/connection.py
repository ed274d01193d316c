"""One MCP server's session, owned by one agent host and living on its event loop.

The session runs in a task of its own (the SDK's client is a context manager whose task group must be
entered and left by one task); calls, listings and elicitations reach it from the runs' tasks. A stdio
server is started on a leash (``leash.py``): it ends with this process however the process ends.

Elicitations come as requests from the server with nothing tying them to the call they belong to (MCP
over stdio has no such field), so one is matched to the one call of this session that is in flight and
not already waiting on an answer, once the others have ended (up to ``ASKER_WAIT_S``); if several stay
in flight, the request is refused with an error rather than guessed at (another run's person could
otherwise answer it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from troupe.actors.mcp.calls import CallKey, Ended, InFlightCall
from troupe.actors.mcp.results import MCPToolError, refused
from troupe.actors.mcp.wire import WireGuard, refused_problem
from troupe.core.vocabulary.errors import MCPServerError, ToolNameConflictError
from troupe.core.vocabulary.json_schemas import schema_problem
from troupe.core.vocabulary.mcp_servers import MCPHttp, MCPServer, MCPStdio

log = logging.getLogger(__name__)

LEASH = Path(__file__).with_name("leash.py")
# How long a server may take to start and answer its first listing.
OPEN_TIMEOUT_S = 30.0
# How long an elicitation waits for the other calls in flight on its session to end, so it can tell
# which call it is for.
ASKER_WAIT_S = 5.0
# How long a cancelled call waits for the server to be told (a transport that cannot take the notice
# at once gets it later, without holding up the cancellation).
ABANDON_WAIT_S = 2.0

OnTools = Callable[["MCPConnection", list[dict[str, Any]]], None]


def _json(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class MCPConnection:
    """The session with ``server``; ``on_tools`` hears every listing of its tools (at open, and again
    each time the server says its list changed)."""

    def __init__(self, server: MCPServer, on_tools: OnTools) -> None:
        self.server = server
        self.on_tools = on_tools
        self.client: Any = None
        self.calls: dict[CallKey, InFlightCall] = {}
        # Calls paused on an elicitation, until a person answers (the run's decision finds them here).
        self.waiting: dict[CallKey, InFlightCall] = {}
        self._task: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._call_ended = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        self.guard = WireGuard(server.name)
        # The tools the last listing left out because the MCP SDK could not read them, each "'name': why".
        self.left_out: list[str] = []

    @property
    def alive(self) -> bool:
        """Whether calls can go to the server: the session is open and neither closing nor ended by
        the server (``MCPSources.ensure_open`` opens the server again when it is not)."""
        return (
            self._task is not None
            and not self._task.done()
            and self.client is not None
            and not self._closing.is_set()
        )

    # ---- opening and closing ------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the session and list the server's tools; ``MCPServerError`` saying why not."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Retrieved whatever happens: an open that is cancelled stops waiting for it.
        ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._task = asyncio.get_running_loop().create_task(self._serve(ready))
        try:
            async with asyncio.timeout(OPEN_TIMEOUT_S):
                await asyncio.shield(ready)
            await self.refresh()
        except (ToolNameConflictError, asyncio.CancelledError):
            # Cancelled too (its host shutting down, say): the session's task must not outlive it.
            await self.close()
            raise
        except Exception as exc:
            await self.close()
            raise MCPServerError(
                f"MCP server {self.server.name!r} could not be opened: {_reason(exc)}",
                server=self.server.name,
            ) from None

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        try:
            # Inside the try: without the SDK, ``open`` hears why at once instead of waiting out its timeout.
            client_class = _sdk_client()
            async with client_class(
                self.guard.around(self._transport(), on_end=self._server_ended),
                elicitation_callback=self._elicit,
                message_handler=self._on_message,
                cache=None,
            ) as client:
                self.guard.version = client.protocol_version
                self.client = client
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else MCPServerError("cancelled"))
            elif not self._closing.is_set():
                log.warning("MCP server %r closed its session: %s", self.server.name, _reason(exc))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.client = None
            self._drop_calls()

    def _transport(self) -> Any:
        match self.server:
            case MCPStdio():
                from mcp.client.stdio import StdioServerParameters, stdio_client

                server = self.server
                params = StdioServerParameters(
                    command=sys.executable,
                    args=["-I", "-S", str(LEASH), server.command, *server.args],
                    env=dict(server.env),
                    cwd=server.cwd,
                )
                return stdio_client(params)
            case MCPHttp():
                return _http_transport(self.server)

    def _server_ended(self) -> None:
        """What the server sends ended (a stdio server's process exited, say): no request of this session
        can be answered any more, so the session ends now rather than wait for ``close``, and is no longer
        ``alive``: the next operation opens the server again."""
        if not self._closing.is_set():
            log.warning("MCP server %r ended its session: opened again when next needed", self.server.name)
        self._closing.set()

    async def close(self) -> None:
        self._closing.set()
        for refresh in list(self._background):
            refresh.cancel()
        task, self._task = self._task, None
        if task is not None and not task.done():
            if self.client is None:
                task.cancel()  # still connecting: there is no session to end politely
            with contextlib.suppress(BaseException):
                await task

    async def _asker(self) -> InFlightCall | None:
        """The call an elicitation belongs to: the one in flight that is not waiting on an answer
        already. While there are several (calls of one step run at once), wait a little for the others
        to end; None if they do not (or there is none)."""
        try:
            async with asyncio.timeout(ASKER_WAIT_S):
                while True:
                    candidates = [c for c in self.calls.values() if c.asking is None]
                    if len(candidates) <= 1:
                        return candidates[0] if candidates else None
                    self._call_ended.clear()
                    await self._call_ended.wait()
        except TimeoutError:
            return None

    def _drop_calls(self) -> None:
        """The session is gone: every call on it ends, and no answer can reach a waiting one now."""
        for call in [*self.calls.values(), *self.waiting.values()]:
            call.cancel()
        self.calls.clear()
        self.waiting.clear()

    # ---- tools --------------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """List the server's tools (every page) and hand them on."""
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            from mcp_types import PaginatedRequestParams

            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self.client.list_tools(params=params) if params else await self.client.list_tools()
            tools.extend(_json(tool) for tool in page.tools)
            cursor = page.next_cursor
            if not cursor or len(tools) > 10_000:
                break
        self.left_out = self.guard.take_left_out()
        self.on_tools(self, tools)

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed" and self.alive:
            # Listed from a task of its own: the session delivers the listing's answer only after this
            # handler returns.
            task = asyncio.get_running_loop().create_task(self._refresh_logged())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except ToolNameConflictError:
            await self.close()
            raise
        except Exception as exc:
            log.warning("listing the tools of MCP server %r failed: %s", self.server.name, _reason(exc))

    # ---- calls --------------------------------------------------------------------------------------

    async def abandon(self, call: InFlightCall) -> None:
        """Give up ``call``: its request is cancelled, which has the SDK send the server MCP's
        ``notifications/cancelled`` (the request's id and a reason). Returns once the call's task has
        ended, the notice handed to the transport (or after ``ABANDON_WAIT_S``)."""
        call.cancel()
        if call.task is not None:
            await asyncio.wait({call.task}, timeout=ABANDON_WAIT_S)

    def start_call(self, name: str, args: dict[str, Any], key: CallKey) -> InFlightCall:
        if not self.alive:
            raise MCPServerError(f"MCP server {self.server.name!r} is not connected", server=self.server.name)
        call = self.calls[key] = InFlightCall(key)
        call.task = asyncio.get_running_loop().create_task(self._call(call, name, args))
        return call

    async def _call(self, call: InFlightCall, name: str, args: dict[str, Any]) -> None:
        try:
            result = await self.client.call_tool(name, args)
            call.end(Ended(result=_json(result)))
        except asyncio.CancelledError:
            call.end(Ended(error=MCPServerError(f"the call to {name!r} was cut short")))
            raise
        except Exception as exc:
            problem = refused_problem(exc)
            if problem is not None:
                call.end(Ended(error=refused(self.server.name, name, problem)))
            else:
                call.end(Ended(error=MCPToolError(f"the call to {name!r} failed: {_told(exc)}")))
        finally:
            self.calls.pop(call.key, None)
            self._call_ended.set()

    async def _elicit(self, context: Any, params: Any) -> Any:
        """The server asks for input during a call: the call's tool pauses the run; this waits for the
        person's answer (or the session's end)."""
        from mcp_types import INVALID_PARAMS, ElicitResult, ErrorData

        asked = _json(params)
        schema = asked.get("requestedSchema")
        if asked.get("mode", "form") != "form" or schema is None:
            return ErrorData(code=INVALID_PARAMS, message="this client answers form elicitations only")
        problem = schema_problem(schema)
        if problem is not None:
            log.warning("MCP server %r asked for input with a bad schema: %s", self.server.name, problem)
            return ErrorData(code=INVALID_PARAMS, message=f"elicitation refused: {problem}")
        asker = await self._asker()
        if asker is None:
            return ErrorData(
                code=INVALID_PARAMS,
                message="elicitation refused: several calls are in flight on this session and the request "
                "does not say which one it is for",
            )
        ask = asker.ask(str(asked.get("message", "")), schema)
        try:
            return ElicitResult(**await ask.answer)
        except asyncio.CancelledError:
            return ElicitResult(action="cancel")


@contextlib.asynccontextmanager
async def _http_transport(server: MCPHttp) -> AsyncIterator[Any]:
    """Streamable HTTP with the server's headers. No read timeout: a call's response stream stays open
    while a person answers its elicitation; a call's own timeout applies while nobody is asked."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    timeout = httpx2.Timeout(30.0, read=None)
    async with (
        create_mcp_http_client(headers=dict(server.headers), timeout=timeout) as http,
        streamable_http_client(server.url, http_client=http) as streams,
    ):
        yield streams


def _told(exc: BaseException) -> str:
    """An error from the server's side as the model is told it: its text, bounded."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 2000 else text[:2000] + "..."


def _sdk_client() -> Any:
    """The MCP SDK's ``Client``; an ``ImportError`` naming the extra to install when the SDK is missing."""
    try:
        from mcp import Client
    except ImportError as exc:
        raise ImportError(f"MCP servers need the MCP SDK: pip install 'troupe-runtime[mcp]' ({exc})") from exc
    return Client


def _reason(exc: BaseException) -> str:
    """An exception as one line, the innermost of an exception group (the SDK's task groups wrap)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:500]


__all__ = ["LEASH", "MCPConnection"]
