"""Approval-cycle latency, instant scripted models.

W1: stream -> tool-call-approval chunk -> approve -> final text, one agent with one gated tool.
W2: the same through a supervisor that delegates to a subagent owning the gated tool (the pause
    bubbles up, the decision routes down, the answer flows back).

Prints median and p99 per configuration. No peer figures here: bench/run_all.py measures the peers in
the same run.

    python bench/approval_cycle.py [--workload w1|w2|all] [--cycles 500] [--configs local-memory,...]
                                   [--api stream|generate] [--loop asyncio|uvloop]

bench/run_all.py runs the same workloads on Troupe and on LangGraph, the OpenAI Agents SDK and Pydantic AI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_agents import build_agent, build_supervisor, make_store
from bench_common import percentile

from troupe import Agent, Runtime


async def one_cycle(agent: Agent) -> float:
    """W1/W2 through the streaming API: stream -> approval chunk -> approve (streamed) -> final text."""
    started = time.perf_counter()
    stream = await agent.stream("delete abc-123")
    call_id = None
    async for chunk in stream.full_stream:
        if chunk.type == "tool-call-approval":
            call_id = chunk.payload["tool_call_id"]
    assert call_id is not None
    approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id=call_id)
    final = "".join([t async for t in approved.text_stream])
    assert final == "Deleted.", final
    return (time.perf_counter() - started) * 1000


async def generate_cycle(agent: Agent) -> float:
    """The same cycle through the non-streaming API: generate -> suspended -> approve -> final text."""
    started = time.perf_counter()
    paused = await agent.generate("delete abc-123")
    assert paused.finish_reason == "suspended", paused.finish_reason
    done = await agent.approve_tool_call_generate(
        run_id=paused.run_id, tool_call_id=paused.suspend_payload["tool_call_id"]
    )
    assert done.text == "Deleted.", done.text
    return (time.perf_counter() - started) * 1000


async def run_config(
    workload: str, name: str, cycles: int, workdir: Path, api: str = "stream"
) -> dict[str, Any]:
    executor, store_kind = name.split("-")
    storage = make_store(store_kind, workdir / f"{workload}-{name}.db")
    agent = build_agent() if workload == "w1" else build_supervisor()
    runtime = Runtime([agent], storage=storage, executor=executor)  # type: ignore[arg-type]
    cycle = one_cycle if api == "stream" else generate_cycle
    try:
        for _ in range(min(50, cycles)):  # warm-up: actor start, connections, JIT-free caches
            await cycle(agent)
        samples = [await cycle(agent) for _ in range(cycles)]
    finally:
        await runtime.shutdown()
    median = statistics.median(samples)
    return {
        "workload": workload,
        "config": name,
        "api": api,
        "cycles": cycles,
        "median_ms": round(median, 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=["w1", "w2", "all"], default="all")
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--configs", default="local-memory,local-sqlite,ray-memory,ray-sqlite")
    parser.add_argument(
        "--api", choices=["stream", "generate"], default="stream", help="streaming or non-streaming calls"
    )
    parser.add_argument(
        "--loop",
        choices=["asyncio", "uvloop"],
        default="asyncio",
        help="this process's event loop (Ray's actors run uvloop either way)",
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(measure(args))
    else:
        asyncio.run(measure(args))


async def measure(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workloads = ["w1", "w2"] if args.workload == "all" else [args.workload]
        for workload in workloads:
            for name in args.configs.split(","):
                rows.append(await run_config(workload, name, args.cycles, Path(tmp), args.api))
                row = rows[-1]
                row["loop"] = args.loop
                print(
                    f"{workload} {row['config']:<14} median {row['median_ms']:7.2f} ms   "
                    f"p99 {row['p99_ms']:7.2f} ms",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
