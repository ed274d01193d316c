"""``/mcp`` on the front door: Troupe's agents over streamable HTTP, behind the same keys as ``/api``.

Before the MCP SDK's session manager sees a request:
- its ``Origin``, when a browser sent one, must name a host this server answers to (loopback names and
  ``--allowed-host``s), as the MCP spec asks of HTTP servers against DNS rebinding (the ``Host`` header
  itself is checked app-wide in open mode, ``troupe.api.guards.HostCheck``);
- it must carry a valid API key (``Authorization: Bearer``), or the server be in open mode;
- its MCP session is bound to that key: a request for a session opened with another key is answered as
  if the session did not exist, so nobody answers another person's question.
The key's principal is what ``AgentsOverMCP`` starts and decides runs as.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from troupe.api.errors import AuthenticationError, PermissionDeniedError
from troupe.api.guards import Receive, Scope, Send, _header, _refuse
from troupe.api.mcp_server import PRINCIPAL_KEY, AgentsOverMCP
from troupe.api.service import Service


class MCPEndpoint:
    """The ASGI app served at ``/mcp``; ``running()`` must wrap the app's lifespan."""

    def __init__(self, service: Service, hosts: frozenset[str]) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.service = service
        self.hosts = hosts
        self.agents = AgentsOverMCP(service)
        self.manager = StreamableHTTPSessionManager(app=self.agents.server())

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
        scope["user"] = _session_owner(principal.id, authorization)
        await self.manager.handle_request(scope, receive, send)


def _session_owner(name: str, authorization: str | None) -> Any:
    """Who opened an MCP session, as the SDK compares it on every later request of that session: the
    key itself, by its digest (two keys of one name are two owners)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    digest = hashlib.sha256((authorization or "").encode()).hexdigest()
    return AuthenticatedUser(AccessToken(token="", client_id=name, scopes=[], subject=digest))


def mcp_endpoint(service: Service, hosts: frozenset[str]) -> MCPEndpoint | None:
    """``/mcp``, if the ``mcp`` package is installed (``pip install 'troupe-runtime[mcp]'``)."""
    try:
        return MCPEndpoint(service, hosts)
    except ImportError:
        return None


__all__ = ["MCPEndpoint", "mcp_endpoint"]
