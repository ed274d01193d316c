"""An agent host's MCP servers: opened by the host on its event loop before it runs anything, their tools
put in its loop's tool table, closed with the host.

Every host opens its own sessions (every replica, every restart): a session never leaves the process
that opened it. A server that cannot be opened fails the operation that needed it, before anything of a
run changes, and is tried again by the next one; a server whose session ended is opened again the same
way. A listing that would clash with another source's tool names is refused as a whole (the previous
listing stays) and logged; at first open the clash is the caller's error.

A call paused on an elicitation holds the server's request open on its session until a person answers.
If its run is cancelled (or ends otherwise) meanwhile, nobody will: ``release`` ends such calls (the
elicitation answered ``cancel``, the call cancelled at the server with ``notifications/cancelled``), as
soon as this host learns of the cancel (it recorded it, or its next heartbeat finds it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from troupe.actors.mcp.connection import MCPConnection
from troupe.actors.mcp.tools import build_tools
from troupe.core.run.loop import RunLoop
from troupe.core.vocabulary.errors import ToolNameConflictError
from troupe.core.vocabulary.mcp_servers import MCPServer
from troupe.core.vocabulary.store import Store

log = logging.getLogger(__name__)


class MCPSources:
    def __init__(self, servers: tuple[MCPServer, ...], loop: RunLoop) -> None:
        self.servers = servers
        self.loop = loop
        self.connections: dict[str, MCPConnection] = {}
        self.refused: dict[str, list[str]] = {}
        self._opening: asyncio.Lock | None = None
        self._opened_once: set[str] = set()

    async def ensure_open(self) -> None:
        """Open every server that has no live session (all of them the first time)."""
        if all(self._alive(server.name) for server in self.servers):
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            for server in self.servers:
                if not self._alive(server.name):
                    await self._open(server)

    def _alive(self, name: str) -> bool:
        connection = self.connections.get(name)
        return connection is not None and connection.alive

    async def _open(self, server: MCPServer) -> None:
        stale = self.connections.pop(server.name, None)
        if stale is not None:
            await stale.close()
        connection = MCPConnection(server, self._listed)
        await connection.open()
        self.connections[server.name] = connection
        self._opened_once.add(server.name)

    def _listed(self, connection: MCPConnection, listed: list[dict[str, Any]]) -> None:
        server = connection.server
        tools, refused = build_tools(connection, listed)
        self.refused[server.name] = [*connection.left_out, *refused]
        try:
            self.loop.use_tools(f"MCP server {server.name!r}", tools)
        except ToolNameConflictError:
            if server.name not in self._opened_once:
                raise  # the first listing: the agent cannot be served as defined
            log.error("MCP server %r: new tool listing refused", server.name, exc_info=True)

    def waiting_runs(self) -> set[str]:
        """The runs with a call paused on an elicitation on one of these sessions."""
        return {run_id for c in self.connections.values() for run_id, _ in c.waiting}

    async def release(self, run_id: str) -> int:
        """End every call of ``run_id`` paused on an elicitation (its run was cancelled, or has ended):
        the server's question is answered ``cancel`` and its call cancelled. Returns how many."""
        released = 0
        for connection in list(self.connections.values()):
            for key in [k for k in connection.waiting if k[0] == run_id]:
                call = connection.waiting.pop(key, None)
                if call is not None:
                    await connection.abandon(call)
                    released += 1
        return released

    async def release_ended(self, store: Store) -> None:
        """``release`` the waiting calls of every run the store holds cancelled, or no longer holds."""
        for run_id in self.waiting_runs():
            stored = await store.load_run(run_id)
            if stored is None or stored.state.cancel is not None:
                count = await self.release(run_id)
                log.info("run %s has ended: %d MCP call(s) waiting on an elicitation ended", run_id, count)

    def stats(self) -> dict[str, Any]:
        return {
            name: {
                "alive": connection.alive,
                "tools": sorted(t for t in self.loop.sourced.get(f"MCP server {name!r}", ())),
                "refused": self.refused.get(name, []),
                "in_flight": len(connection.calls),
                "waiting_for_answers": len(connection.waiting),
            }
            for name, connection in self.connections.items()
        }

    async def close(self) -> None:
        connections, self.connections = self.connections, {}
        for connection in connections.values():
            await connection.close()


__all__ = ["MCPSources"]
