"""What an MCP server sends, checked before the MCP SDK reads it: ``WireGuard`` sits between the
transport (stdio or streamable HTTP) and the SDK's session.

The SDK's own checks cost more than the input they refuse. One tool it cannot read (an ``inputSchema``
that is not an object, say) fails a whole ``tools/list`` result, so every tool of the server is lost and
every run of the agent fails; and a message it cannot read (nested past its JSON parser's limit of
about 200 levels, or JSON that is no JSON-RPC message) is dropped, so the request it answers waits for
its timeout. Here:

- a ``tools/list`` result keeps the tools the SDK can read; each one left out is logged with the reason
  and kept for ``AgentHost.stats`` (``take_left_out``);
- a message the SDK's parser refuses only for a lone UTF-16 surrogate in a string (JSON can spell
  ``"\\ud800"``, no UTF-8 text can hold it) is read here with U+FFFD in its place, as a decoder reads
  bytes it cannot decode: a server's question holding one reaches a person, its answer the model,
  instead of being dropped (and its call waiting for the timeout);
- a response the SDK could not read becomes an error response to the request it answers, so that
  request fails at once, refused (``refused_problem`` tells such an error apart): one that could not be
  parsed (found by its top-level ``id``, read without parsing the rest), and one that is JSON but no
  JSON-RPC response (a ``result`` that is not an object, or no ``result``), which the SDK drops too.

Only responses to requests of this session are touched; everything else passes as it came.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from troupe.core.vocabulary.json_schemas import schema_problem
from troupe.core.vocabulary.storable import MAX_DEPTH

log = logging.getLogger(__name__)

# The data of an error response made here for an answer that could not be read.
REFUSED = "troupe: answer refused before parsing"
# Requests remembered until answered; past this many the oldest are forgotten (calls never answered).
_MAX_REMEMBERED = 1_000
# A JSON string (with escapes) and the colon after it if it is a key, or a bracket.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN = re.compile(r'(?P<text>"[^"\\]*(?:\\.[^"\\]*)*")(?P<key>\s*:\s*)?|(?P<open>[{\[])|(?P<close>[}\]])')


class WireGuard:
    """The checks for one session with MCP server ``server`` (its name, for the logs). ``version`` is
    the protocol version the session negotiated: the SDK checks a listing by that version's schema."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.version = "2025-11-25"
        self._sent: dict[Any, str] = {}
        self._left_out: list[str] = []

    @contextlib.asynccontextmanager
    async def around(
        self, transport: contextlib.AbstractAsyncContextManager[Any], on_end: Callable[[], None]
    ) -> AsyncIterator[Any]:
        """``transport``'s streams, with what arrives checked here and what leaves noted; ``on_end`` is
        called when the incoming stream ends (the server's side is gone: a stdio server's process
        exited, say)."""
        async with transport as (read, write):
            yield _Tapped(read, self.inbound, on_end), _Tapped(write, self.outbound)

    def take_left_out(self) -> list[str]:
        """The tools left out of the listings since the last call, each as ``'name': why``."""
        left_out, self._left_out = self._left_out, []
        return left_out

    def outbound(self, item: Any) -> Any:
        from mcp_types import JSONRPCRequest

        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest):
            self._sent[message.id] = message.method
            if len(self._sent) > _MAX_REMEMBERED:
                del self._sent[next(iter(self._sent))]
        return item

    def inbound(self, item: Any) -> Any:
        from mcp_types import JSONRPCError, JSONRPCResponse

        if isinstance(item, Exception):
            return self._unreadable(item)
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            method = self._sent.pop(message.id, None)
            if method == "tools/list" and isinstance(message, JSONRPCResponse):
                return self._listing(item)
        return item

    # ---- tool listings ------------------------------------------------------------------------------

    def _listing(self, item: Any) -> Any:
        result = item.message.result
        tools = result.get("tools")
        if not isinstance(tools, list) or self._sdk_problem(result) is None:
            return item
        if self._sdk_problem({**result, "tools": []}) is not None:
            return item  # the listing itself is broken, not one tool: the SDK says so
        kept = []
        for tool in tools:
            problem = self._sdk_problem({**result, "tools": [tool]})
            if problem is None:
                kept.append(tool)
                continue
            name = str(tool.get("name") if isinstance(tool, dict) else tool)[:80]
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            why = schema_problem(schema) or f"the MCP SDK cannot read it: {problem}"
            self._left_out.append(f"{name!r}: {why}")
            log.warning("MCP server %r: tool %r left out: %s", self.server, name, why)
        message = item.message.model_copy(update={"result": {**result, "tools": kept}})
        return dataclasses.replace(item, message=message)

    def _sdk_problem(self, result: dict[str, Any]) -> str | None:
        """Why the SDK would refuse ``result`` as a ``tools/list`` result (None if it would not)."""
        from mcp_types.methods import validate_server_result
        from pydantic import ValidationError

        try:
            validate_server_result("tools/list", self.version, result)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in error["loc"][2:])
            return f"{where}: {error['msg']}" if where else str(error["msg"])
        except (KeyError, ValueError):
            return None  # a version the SDK checks nothing for
        return None

    # ---- answers that could not be read -------------------------------------------------------------

    def _unreadable(self, exc: Exception) -> Any:
        from mcp.shared.message import SessionMessage
        from mcp_types import PARSE_ERROR, ErrorData, JSONRPCError

        mended = _mended(exc)
        if mended is not None:
            log.warning("MCP server %r sent text with a lone surrogate; read with U+FFFD", self.server)
            return self.inbound(mended)
        found = _answered(exc)
        if found is None or found[0] not in self._sent:
            return exc
        request_id, problem = found
        method = self._sent.pop(request_id)
        log.warning("MCP server %r: the answer to %s was refused: %s", self.server, method, problem)
        error = ErrorData(code=PARSE_ERROR, message=problem, data=REFUSED)
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def refused_problem(exc: BaseException) -> str | None:
    """Why an answer was refused here, if ``exc`` (the SDK's ``MCPError``) is such a refusal."""
    error = getattr(exc, "error", None)
    if error is None or getattr(error, "data", None) != REFUSED:
        return None
    return str(error.message)


def _mended(exc: Exception) -> Any:
    """The message the SDK could not read, read with U+FFFD for each lone surrogate in its strings, if
    that is all that kept the SDK from reading it (a ``SessionMessage``); None otherwise."""
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    raw = _unparsed(exc)
    if raw is None or '\\ud' not in raw.lower():
        return None
    envelope = _envelope(raw)
    if envelope is None or envelope[2] > MAX_DEPTH:
        return None  # not a JSON object, or nested past what is read here
    try:
        data = json.loads(raw)  # Python's reader takes a lone surrogate as one
    except ValueError:
        return None
    mended = _without_lone_surrogates(data)
    if mended == data:
        return None  # what the SDK refused is something else
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_python(mended, by_name=False))
    except ValidationError:
        return None


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON, at most ``MAX_DEPTH`` deep) with U+FFFD for each lone surrogate: after
    parsing, a surrogate code point left in a string has no partner."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def _unparsed(exc: Exception) -> str | None:
    """The text of a message the SDK's parser refused as no JSON (its error carries it), or None."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    for error in exc.errors(include_url=False):
        raw = error.get("input")
        if error["type"] == "json_invalid" and isinstance(raw, str | bytes):
            return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    return None


def _answered(exc: Exception) -> tuple[Any, str] | None:
    """The ``id`` of the request a message the SDK could not read answers, and why it could not; None
    if the message is no response. The SDK's parser error says why: text that is not JSON (which it
    carries: only its envelope is read here), or JSON that is no JSON-RPC message (a ``result`` that is
    not an object, or neither ``result`` nor ``error``; it carries the message, parsed)."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    raw = _unparsed(exc)
    if raw is None:
        return _misshapen(exc.errors(include_url=False))
    envelope = _envelope(raw)
    if envelope is None:
        return None
    keys, request_id, depth = envelope
    if "method" in keys or not keys & {"result", "error"}:
        return None  # a request or a notification: nothing of ours waits on it
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id, f"nested deeper than {MAX_DEPTH} levels" if depth > MAX_DEPTH else "not valid JSON"


def _misshapen(errors: list[Any]) -> tuple[Any, str] | None:
    """``_answered`` for JSON that is no JSON-RPC message, from the parser's ``errors``."""
    # Each variant of the SDK's message union that lacks a field reports it with the whole message.
    missing = (e["input"] for e in errors if e["type"] == "missing" and isinstance(e["input"], dict))
    message = next(missing, None)
    if message is None or "method" in message:
        return None  # not a JSON object, or a request or notification: nothing of ours waits on it
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    # What it fails as the variant it meant to be: an error response if it says so, else a result.
    meant = "JSONRPCError" if "error" in message else "JSONRPCResponse"
    why = [f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in errors if e["loc"][:1] == (meant,)]
    return request_id, f"not a valid JSON-RPC response ({'; '.join(why)[:200]})"


def _envelope(text: str) -> tuple[set[str], Any, int] | None:
    """The top-level keys of the JSON object ``text`` holds, its ``id`` (None if it has none) and how
    deep it nests; None if it is no single object. Read token by token (strings and brackets), so no
    depth can overflow the reading."""
    if not text.lstrip().startswith("{"):
        return None
    depth = deepest = 0
    keys: set[str] = set()
    request_id: Any = None
    for token in _TOKEN.finditer(text):
        if token["open"]:
            if depth == 0 and deepest:
                return None  # a second value after the object
            depth += 1
            deepest = max(deepest, depth)
        elif token["close"]:
            depth -= 1
        elif depth == 1 and token["key"]:
            key = json.loads(token["text"])
            keys.add(key)
            if key == "id":
                with contextlib.suppress(ValueError):
                    request_id = json.JSONDecoder().raw_decode(text, token.end())[0]
    return keys, request_id, deepest


class _Tapped:
    """A transport stream whose items pass through ``tap``: received ones on their way in, sent ones on
    their way out; ``on_end`` hears that a received stream ended. Anything else is the stream's own."""

    def __init__(
        self, inner: Any, tap: Callable[[Any], Any], on_end: Callable[[], None] = lambda: None
    ) -> None:
        self._inner = inner
        self._tap = tap
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise
        return self._tap(item)

    def __aiter__(self) -> _Tapped:
        return self

    async def __anext__(self) -> Any:
        # The SDK's session reads this way and takes the stream's end as the server's end (its waiting
        # requests fail "Connection closed"), but the session object stays open: only its owner,
        # told here, can end it and open the server again.
        try:
            item = await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._on_end()
            raise
        return self._tap(item)

    async def send(self, item: Any) -> None:
        await self._inner.send(self._tap(item))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Tapped:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


__all__ = ["REFUSED", "WireGuard", "refused_problem"]
