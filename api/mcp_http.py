"""``/mcp`` on the front door: Troupe's agents over streamable HTTP, behind the same keys as ``/api``.

Before the MCP SDK's session manager sees a request:
- its ``Origin``, when a browser sent one, must name a host this server answers to (loopback names and
  ``--allowed-host``s), as the MCP spec asks of HTTP servers against DNS rebinding (the ``Host`` header
  itself is checked app-wide in open mode, ``troupe.api.guards.HostCheck``);
- it must carry a valid API key (``Authorization: Bearer``), or the server be in open mode;
- its MCP session is bound to that key: a request for a session opened with another key is answered as
  if the session did not exist, so nobody answers another person's question;
- a principal holds at most ``MCPLimits.sessions_per_principal`` sessions at once: the next one it asks
  for is a 429 naming the limit, and nobody else is affected (one key cannot fill the server's table of
  sessions for everyone). A session nobody has used for ``MCPLimits.idle_s`` (five minutes) is closed.
The key's principal is what ``AgentsOverMCP`` starts and decides runs as.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from troupe.api.auth import Principal
from troupe.api.errors import AuthenticationError, PermissionDeniedError
from troupe.api.guards import Receive, Scope, Send, _header, _refuse
from troupe.api.identity import Binding
from troupe.api.mcp_server import PRINCIPAL_KEY, AgentsOverMCP
from troupe.api.service import Service
from troupe.core.vocabulary.errors import TroupeError


class TooManySessionsError(TroupeError):
    code = "TOO_MANY_SESSIONS"
    http_status = 429


@dataclass(frozen=True)
class MCPLimits:
    """How many MCP sessions ``/mcp`` keeps open, and for how long.

    Attributes:
        sessions_per_principal: Sessions one principal (one subject, whatever key or token it uses) may
            hold at once; one more is refused with 429 until one ends (the client deletes it, or it idles
            out). A client needs one.
        sessions: Sessions of all principals together (the SDK answers 503 beyond).
        idle_s: A session with no request in flight for this long is closed (a client waiting for a
            person's answer to an elicitation has its request in flight, so it is not idle).
    """

    sessions_per_principal: int = 16
    sessions: int = 10_000
    idle_s: float = 300.0

    def __post_init__(self) -> None:
        if self.sessions_per_principal < 1 or self.sessions < 1 or not self.idle_s > 0:
            raise ValueError(f"MCP limits must be positive, got {self}")


class MCPEndpoint:
    """The ASGI app served at ``/mcp``; ``running()`` must wrap the app's lifespan."""

    def __init__(self, service: Service, hosts: frozenset[str], limits: MCPLimits | None = None) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.service = service
        self.hosts = hosts
        self.limits = limits or MCPLimits()
        self.agents = AgentsOverMCP(service)
        self.manager = StreamableHTTPSessionManager(
            app=self.agents.server(),
            session_idle_timeout=self.limits.idle_s,
            max_sessions=self.limits.sessions,
        )
        # Per principal: held by its request that may open a session, until that is answered.
        self._opening: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    def _origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser's request (MCP clients send none)
        host = urlsplit(origin).hostname
        return host is not None and host.lower() in self.hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._origin_allowed(_header(scope, b"origin")):
            await _refuse(send, PermissionDeniedError("this Origin may not use /mcp (DNS rebinding guard)"))
            return
        authorization = _header(scope, b"authorization")
        try:
            principal = await self.service.gate.authenticate(authorization)
        except AuthenticationError as exc:
            await _refuse(send, exc)
            return
        scope[PRINCIPAL_KEY] = principal
        # What ``caller_now`` asks the request of, when a run's answer is about to go to this caller.
        scope.setdefault("state", {})["troupe"] = Binding(self.service)
        scope["user"] = _session_owner(principal.id, authorization)
        if not _opens_a_session(scope):
            await self.manager.handle_request(scope, receive, send)
            return
        await self._opening_session(principal, scope, receive, send)

    def sessions_of(self, principal_id: str) -> int:
        """Open sessions of one principal, from the SDK's own table of who opened each (mcp 2.x)."""
        owners = self.manager._session_owners  # no public view of it; pinned by a test
        return sum(1 for owner in owners.values() if owner["client_id"] == principal_id)

    async def _opening_session(
        self, principal: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serve a request that may open a session, if its principal has room for one. One such request
        of a principal at a time, until it is answered (by then a session it opened is in the SDK's
        table), so requests sent at once cannot all see the same room; other principals never wait."""
        lock = self._opening.setdefault(principal.id, asyncio.Lock())
        await lock.acquire()

        def answered() -> None:
            if lock.locked():
                lock.release()

        async def watched(message: Any) -> None:
            if message["type"] == "http.response.start":
                answered()
            await send(message)

        try:
            if self.sessions_of(principal.id) >= self.limits.sessions_per_principal:
                await _refuse(send, self._too_many(principal.display))
                return
            await self.manager.handle_request(scope, receive, watched)
        finally:
            answered()

    def _too_many(self, who: str) -> TooManySessionsError:
        limit = self.limits.sessions_per_principal
        return TooManySessionsError(
            f"{who!r} has {limit} MCP sessions open already, the most one caller may hold: end one "
            f"(DELETE /mcp with its Mcp-Session-Id) or let one idle out ({self.limits.idle_s:.0f} s)",
            limit=limit,
        )


def _session_owner(name: str, authorization: str | None) -> Any:
    """Who opened an MCP session, as the SDK compares it on every later request of that session: the
    key itself, by its digest (two keys of one name are two owners)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    digest = hashlib.sha256((authorization or "").encode()).hexdigest()
    return AuthenticatedUser(AccessToken(token="", client_id=name, scopes=[], subject=digest))


def _opens_a_session(scope: Scope) -> bool:
    """A request without a session id, in a protocol era that has sessions (the handshake era's; a
    request of MCP 2026 is served without one)."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    if _header(scope, b"mcp-session-id") is not None:
        return False
    version = _header(scope, b"mcp-protocol-version")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def mcp_endpoint(
    service: Service, hosts: frozenset[str], limits: MCPLimits | None = None
) -> MCPEndpoint | None:
    """``/mcp``, if the ``mcp`` package is installed (``pip install 'troupe-runtime[mcp]'``)."""
    try:
        return MCPEndpoint(service, hosts, limits)
    except ImportError:
        return None


__all__ = ["MCPEndpoint", "MCPLimits", "TooManySessionsError", "mcp_endpoint"]
