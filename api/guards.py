"""Checks that run before any route, on the raw ASGI messages: the request body's size, and in open
mode the ``Host`` header.

Both answer before the body is read and before any key is looked at, so an anonymous caller cannot make
the server buffer a large body, and a web page on another site cannot reach an open server through DNS
rebinding (its requests carry the attacker's host name).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from troupe.api.errors import error_body
from troupe.core.vocabulary.errors import TroupeError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class BodyTooLargeError(TroupeError):
    code = "BODY_TOO_LARGE"
    http_status = 413


class HostNotAllowedError(TroupeError):
    code = "HOST_NOT_ALLOWED"
    http_status = 421


async def _refuse(send: Send, error: TroupeError) -> None:
    body = error_body(error)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": error.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class BodyLimit:
    """Refuse a body over ``max_bytes``: at once when ``Content-Length`` says so, else as soon as the
    bytes received pass it (a chunked body); the rest is never read."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _error(self) -> BodyTooLargeError:
        return BodyTooLargeError(
            f"request body too large: at most {self.max_bytes} bytes are accepted", limit=self.max_bytes
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > self.max_bytes):
            await _refuse(send, self._error())
            return
        seen = 0
        refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes and not refused:
                    refused = True
                    await _refuse(send, self._error())
            # Once refused, the app is told the client left, so it stops reading and answers nothing.
            return {"type": "http.disconnect"} if refused else message

        async def guarded(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counted, guarded)


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Host names an open server answers to: loopback names, the address it is bound to (unless it is a
    wildcard), and any given."""
    names = set(LOOPBACK_NAMES) | {h.lower().strip("[]") for h in extra}
    if bound not in ("0.0.0.0", "::", ""):
        names.add(bound.lower().strip("[]"))
    return frozenset(names)


def _host_name(host: str) -> str:
    """``Host`` without its port (``[::1]:8000`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, _, _port = host.partition(":") if host.count(":") == 1 else (host, "", "")
    return name


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HostCheck:
    """Answer only requests whose ``Host`` is one of ``hosts`` (421 otherwise)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = _header(scope, b"host")
            if host is None or _host_name(host) not in self.hosts:
                await _refuse(
                    send,
                    HostNotAllowedError(
                        "this open-mode server answers only requests addressed to "
                        f"{', '.join(sorted(self.hosts))} (Host header checked against DNS rebinding)"
                    ),
                )
                return
        await self.app(scope, receive, send)


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BodyLimit",
    "BodyTooLargeError",
    "HostCheck",
    "HostNotAllowedError",
    "allowed_hosts",
    "is_loopback",
]
