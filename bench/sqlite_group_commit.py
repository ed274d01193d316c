"""W3 on local + SQLite: N runs paused with ``--concurrency`` calls in flight, then all approved, on one
SqliteStore. Prints the time per run and, where the store counts them (SqliteStore.commits), the
transactions it committed per run and its writes per commit. Then, on the same store, W1 one cycle at a
time (``--w1-cycles``, streaming, as bench/approval_cycle.py): what a lone write costs, where no other
write can share its commit.

    python bench/sqlite_group_commit.py [--runs 2000] [--concurrency 100] [--synchronous FULL]
                                        [--w1-cycles 300]

fsyncs per run: run it under strace, which counts the process's fsyncs (the WAL's at each commit with
``FULL``, and the checkpoints' on the store's worker thread), and divide by the runs:

    strace -f -c --seccomp-bpf -e trace=fsync,fdatasync python bench/sqlite_group_commit.py

(a one-cycle warm-up precedes the timed runs: about five writes, within the noise at 2,000 runs).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from approval_cycle import one_cycle
from bench_agents import build_agent
from bench_common import bounded, percentile

from troupe import Runtime, SqliteStore


async def main(runs: int, concurrency: int, synchronous: str, w1_cycles: int) -> None:
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:  # on disk, as the benchmark
        store = SqliteStore(Path(tmp) / "w3.db", synchronous=synchronous)  # type: ignore[arg-type]
        runtime = Runtime([build_agent()], storage=store, executor="local")
        agent = runtime.get_agent("bench")
        try:
            warm = await agent.generate("warm up")
            await agent.approve_tool_call_generate(run_id=warm.run_id)
            commits_before = getattr(store, "commits", None)
            writes_before = getattr(store, "writes", None)
            started = time.perf_counter()
            paused = await bounded(lambda i: agent.generate(f"delete {i}"), runs, concurrency)
            suspend_s = time.perf_counter() - started
            assert all(r.finish_reason == "suspended" for r in paused)
            started = time.perf_counter()
            done = await bounded(
                lambda i: agent.approve_tool_call_generate(run_id=paused[i].run_id), runs, concurrency
            )
            approve_s = time.perf_counter() - started
            assert all(r.text == "Deleted." for r in done)
            commits_after = getattr(store, "commits", None)
            writes_after = getattr(store, "writes", None)
            w1 = [await one_cycle(agent) for _ in range(w1_cycles)]
        finally:
            await runtime.shutdown()
    line = (
        f"local + SQLite {synchronous}, {runs} runs, {concurrency} in flight: "
        f"{(suspend_s + approve_s) * 1000 / runs:.3f} ms/run "
        f"(pause {suspend_s:.2f} s, approve {approve_s:.2f} s)"
    )
    if commits_before is not None and writes_before is not None:
        commits = commits_after - commits_before
        writes = writes_after - writes_before
        line += (
            f"; {commits / runs:.2f} commits/run, {writes / runs:.2f} writes/run, "
            f"{writes / max(commits, 1):.1f} writes/commit"
        )
    print(line, flush=True)
    if w1:
        print(
            f"W1, one cycle at a time, {w1_cycles} cycles: median {statistics.median(w1):.3f} ms, "
            f"p99 {percentile(w1, 0.99):.3f} ms",
            flush=True,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--synchronous", choices=["NORMAL", "FULL"], default="FULL")
    parser.add_argument("--w1-cycles", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.concurrency, args.synchronous, args.w1_cycles))
