"""A driver process for tests/test_mcp_ray.py's local crash test: runs an in-process runtime whose agent
uses a server that outlives its stdin, prints the server's process ids, then waits to be SIGKILLed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import psutil
from helpers import echo_model

from troupe import Agent, MCPStdio, Runtime, SqliteStore
from troupe.testing import tool_call

HOSTILE = Path(__file__).resolve().parent / "hostile_mcp_server.py"


def server_pids() -> list[int]:
    """This process's descendants that run the server (its leash and the server itself)."""
    found = []
    for child in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if "--stubborn" in " ".join(child.cmdline()):
                found.append(child.pid)
        except psutil.Error:
            continue  # a short-lived process that is gone (or a zombie) already
    return found


async def main(folder: str) -> None:
    server = MCPStdio("stubborn", sys.executable, [str(HOSTILE), "--stubborn"])
    agent = Agent("h", model=echo_model(tool_call("good", {}, id="g1")), mcp_servers=[server])
    runtime = Runtime([agent], storage=SqliteStore(Path(folder) / "t.db"), executor="local")
    result = await runtime.get_agent("h").generate("go")
    print(json.dumps({"text": result.text, "pids": server_pids()}), flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
