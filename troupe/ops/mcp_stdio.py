"""``troupe mcp``: a runtime's agents served to one MCP client over this process's stdin and stdout.

The client (an IDE, a desktop assistant) starts the process and is its only caller. Who that caller is
comes from the command line, as for the operator commands: a key of a keys file (``--keys FILE --key
KEY`` or ``TROUPE_API_KEY``), limited to its resources and carrying its roles for approver policies; or,
without a keys file, the admin named by ``--as`` (whoever can start this process can open its store
anyway). Runs are started and decided as over HTTP (``troupe.api.mcp_server``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from troupe.api.auth import Gate, KeyRing, Principal
from troupe.api.mcp_server import AgentsOverMCP
from troupe.api.service import Service
from troupe.core.vocabulary.identity import LOCAL_ISSUER


def run(source: Callable[[], Awaitable[Any]], principal: Principal, public_url: str | None) -> int:
    """Serve until the client closes stdin; SystemExit naming the extra to install without the MCP SDK."""
    try:
        from mcp.server.stdio import stdio_server
    except ImportError as exc:
        raise SystemExit(f"troupe mcp needs the MCP SDK: pip install 'troupe-runtime[mcp]' ({exc})") from exc
    asyncio.run(_serve(stdio_server, source, principal, public_url))
    return 0


async def _serve(
    stdio_server: Callable[[], Any],
    source: Callable[[], Awaitable[Any]],
    principal: Principal,
    public_url: str | None,
) -> None:
    # Inside the stdio server, anything printed goes to stderr: starting the runtime (Ray, say) can
    # never write on the protocol's channel.
    async with stdio_server() as (read, write):
        runtime = await source()
        try:
            service = Service(runtime, Gate(KeyRing()))
            server = AgentsOverMCP(service, principal, public_url).server()
            await server.run(read, write, server.create_initialization_options())
        finally:
            with contextlib.suppress(Exception):
                await service.drain()
            await runtime.shutdown()


def principal_for(keys: KeyRing | None, key: str | None, name: str) -> Principal:
    """The caller: the key's principal when a keys file is given (SystemExit naming what is wrong),
    else an admin called ``name``."""
    if keys is None:
        return Principal(name, LOCAL_ISSUER, name, admin=True)
    if not key:
        raise SystemExit("troupe mcp --keys needs the caller's key: --key KEY or TROUPE_API_KEY")
    found = keys.find(key)
    if found is None:
        raise SystemExit("troupe mcp: the key is not in the keys file")
    return found


__all__ = ["principal_for", "run"]
