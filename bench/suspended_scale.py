"""W3: N runs suspended at once, then all approved.

For each configuration: the time to start N runs that each pause for approval, the time to approve them
all, the store's memory per suspended run (Redis: INFO used_memory), and the resident memory of the driver
and of the agent's host process before, while paused, and after. Peers are measured by bench/run_all.py
in the same run; no peer figures here.

    python bench/suspended_scale.py [--runs 1000] [--configs local-redis,ray-redis,ray-sqlite]
                                    [--redis-url redis://127.0.0.1:6379/0]

Without --redis-url a private redis-server is started on a free port (and stopped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_agents import build_agent
from bench_common import bounded, private_redis, redis_used, rss_mb
from troupe.core.run.paused import DEFAULT_LIMIT as PAUSED_KEPT_LIMIT

from troupe import RedisStore, Runtime, SqliteStore


async def host_stats(runtime: Runtime) -> dict[str, Any]:
    handle = runtime.handle("bench")
    actor = getattr(handle, "actor", None)
    if actor is None:
        return await handle.host.stats()  # type: ignore[attr-defined, no-any-return]
    stats: dict[str, Any] = await actor.call("stats")
    return stats


async def run_config(name: str, runs: int, concurrency: int, redis_url: str, workdir: Path) -> dict[str, Any]:
    executor, store_kind = name.split("-")
    if store_kind == "redis":
        prefix = f"bench-{name}-{time.time_ns()}:"
        storage: Any = RedisStore.from_url(redis_url, prefix=prefix)
    else:
        storage = SqliteStore(workdir / f"{name}.db")
    runtime = Runtime([build_agent()], storage=storage, executor=executor)  # type: ignore[arg-type]
    agent = runtime.get_agent("bench")
    try:
        warm = await agent.generate("warm up")
        await agent.approve_tool_call_generate(run_id=warm.run_id)
        pid = int((await host_stats(runtime))["pid"])
        before = {"driver": rss_mb(os.getpid()), "host": rss_mb(pid), "redis": redis_used(redis_url)}

        started = time.perf_counter()
        paused = await bounded(lambda i: agent.generate(f"delete {i}"), runs, concurrency)
        suspend_s = time.perf_counter() - started
        assert all(r.finish_reason == "suspended" for r in paused)
        listed = await agent.list_suspended_runs(per_page=1)
        assert listed.total == runs, listed.total
        during = {"driver": rss_mb(os.getpid()), "host": rss_mb(pid), "redis": redis_used(redis_url)}
        held = await host_stats(runtime)
        # A paused run is its snapshot in the store and nothing else: no task, lock or buffer here, and
        # a bounded number of paused states kept for their decisions (troupe.core.run.paused).
        assert (held["operations"], held["runs_locked"], held["unread_outboxes"]) == (0, 0, 0), held
        assert held["paused_states_kept"] <= min(runs, PAUSED_KEPT_LIMIT), held

        started = time.perf_counter()
        done = await bounded(
            lambda i: agent.approve_tool_call_generate(run_id=paused[i].run_id), runs, concurrency
        )
        approve_s = time.perf_counter() - started
        assert all(r.text == "Deleted." for r in done)
        after = {"driver": rss_mb(os.getpid()), "host": rss_mb(pid), "redis": redis_used(redis_url)}
    finally:
        await runtime.shutdown()
    row: dict[str, Any] = {
        "config": name,
        "runs": runs,
        "concurrency": concurrency,
        "suspend_all_s": round(suspend_s, 3),
        "approve_all_s": round(approve_s, 3),
        "total_s": round(suspend_s + approve_s, 3),
        "driver_mb": [round(before["driver"]), round(during["driver"]), round(after["driver"])],
        "host_mb": [round(before["host"]), round(during["host"]), round(after["host"])],
        "host_kb_per_paused_run": round((during["host"] - before["host"]) * 1024 / runs, 2),
    }
    if store_kind == "redis":
        row["redis_bytes_per_paused_run"] = round((during["redis"] - before["redis"]) / runs)
    return row


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100, help="requests in flight at once")
    parser.add_argument("--configs", default="local-redis,ray-redis,ray-sqlite")
    parser.add_argument("--redis-url")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        contextmanager(lambda: iter([args.redis_url]))() if args.redis_url else private_redis() as url,
    ):
        for name in args.configs.split(","):
            row = await run_config(name, args.runs, args.concurrency, url, Path(tmp))
            rows.append(row)
            print(
                f"{row['config']:<11} {row['runs']} runs: suspend {row['suspend_all_s']:6.2f} s, "
                f"approve {row['approve_all_s']:6.2f} s, total {row['total_s']:6.2f} s "
                f"host RSS {row['host_mb'][0]}->{row['host_mb'][1]}->{row['host_mb'][2]} MB "
                f"({row['host_kb_per_paused_run']} KB/paused run)  "
                f"driver {row['driver_mb'][0]}->{row['driver_mb'][1]}->{row['driver_mb'][2]} MB"
                + (
                    f"  Redis {row['redis_bytes_per_paused_run']} B/paused run"
                    if "redis_bytes_per_paused_run" in row
                    else ""
                ),
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
