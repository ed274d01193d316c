"""An MCP server (the Python MCP SDK's ``MCPServer``, over stdio) whose tool ``exit`` ends its process
in the middle of the call, for tests/test_mcp_server_death.py.

    python mortal_mcp_server.py STARTS

Each start appends the process's id to STARTS, so a test sees how often it was started. Tools (read
only: no approval): ``exit`` never answers (the process exits at once), ``pid`` answers the process id.
"""

from __future__ import annotations

import os
import sys

import mcp_types as types
from mcp.server.mcpserver import MCPServer

READ_ONLY = types.ToolAnnotations(read_only_hint=True)
server = MCPServer("mortal")


@server.tool(annotations=READ_ONLY, structured_output=False)
def exit() -> str:
    """End the server's process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=READ_ONLY, structured_output=False)
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


if __name__ == "__main__":
    with open(sys.argv[1], "a") as starts:
        starts.write(f"{os.getpid()}\n")
    server.run("stdio")
