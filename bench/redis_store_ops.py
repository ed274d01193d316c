"""RedisStore's operations on one redis-server and on a three-master Redis Cluster, side by side.

On a cluster the store's keys are split into hash-tagged shards (``troupe.storage.redis_keys``): a run's
own writes stay one script on one slot, while a listing or an outbox claim reads every shard and merges.
This measures what that costs: the median and p99 of each operation with ``--runs`` runs suspended.

    python bench/redis_store_ops.py [--runs 500] [--repeat 200]

Both Redis setups are private and started here on free loopback ports (the cluster by the test suite's
fixture, ``tests/redis_cluster.py``), durable as in production (append-only, fsync every write).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench_common import percentile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from redis_cluster import RedisClusterNodes
from redis_server import RedisServer
from troupe.core.vocabulary.state import CallStatus, Pause, RunState, ToolCallState
from troupe.core.vocabulary.store import SuspendedRunQuery
from troupe.storage import RedisStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def paused(run_id: str, n: int) -> RunState:
    at = T0 + timedelta(seconds=n)
    pause = Pause(
        kind="approval",
        tool_name="t",
        args={"n": n},
        agent_path=["a"],
        fingerprint="f" * 32,
        paused_at=at,
        seq=1,
    )
    call = ToolCallState(
        tool_call_id="c1", tool_name="t", args={"n": n}, status=CallStatus.AWAITING_APPROVAL, pauses=[pause]
    )
    messages = [{"role": "user", "content": f"delete {n}"}]
    return RunState(run_id=run_id, agent_id="a", status="suspended", calls=[call], messages=messages)


async def timed(repeat: int, operation: Callable[[int], Awaitable[Any]]) -> dict[str, float]:
    took = []
    for i in range(repeat):
        started = time.perf_counter()
        await operation(i)
        took.append((time.perf_counter() - started) * 1000)
    return {"median_ms": percentile(took, 0.5), "p99_ms": percentile(took, 0.99)}


async def measure(url: str, runs: int, repeat: int) -> dict[str, dict[str, float]]:
    store = RedisStore.from_url(url, prefix=f"bench-{time.time_ns()}:")
    try:
        for n in range(runs):
            await store.create_run(paused(f"run-{n}", n))
        page = SuspendedRunQuery(agent_id="a", limit=20)
        return {
            "create_run": await timed(repeat, lambda i: store.create_run(paused(f"new-{i}", i))),
            "load_run": await timed(repeat, lambda i: store.load_run(f"run-{i % runs}")),
            "save_run (claim)": await timed(
                repeat, lambda i: store.save_run(paused(f"new-{i}", i), expected_version=1)
            ),
            "list_suspended_runs (page of 20)": await timed(
                repeat, lambda i: store.list_suspended_runs(page)
            ),
            "claim_deliveries (none due)": await timed(
                repeat, lambda i: store.claim_deliveries("h", 0.0, 10, 10)
            ),
        }
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        with RedisServer(Path(workdir) / "single") as server:
            results["one server"] = asyncio.run(measure(server.url, args.runs, args.repeat))
        cluster = RedisClusterNodes(Path(workdir) / "cluster")
        cluster.start()
        try:
            results["cluster, 3 masters"] = asyncio.run(measure(cluster.url, args.runs, args.repeat))
        finally:
            cluster.stop()
    print(f"{args.runs} runs suspended, {args.repeat} repetitions; median / p99 in ms")
    print(f"| operation | {' | '.join(results)} |")
    print(f"|---|{'---|' * len(results)}")
    for operation in results["one server"]:
        cells = [f"{r[operation]['median_ms']:.2f} / {r[operation]['p99_ms']:.2f}" for r in results.values()]
        print(f"| {operation} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
