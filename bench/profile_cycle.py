"""Where a W1 approval cycle spends its time: py-spy samples the agent's process and the driver while
cycles run back to back.

    python bench/profile_cycle.py [--config ray-redis] [--seconds 10] [--top 20] [--api stream|generate]

Configs: ray-redis, ray-sqlite, ray-memory, local-redis, local-sqlite, local-memory. Prints, per process,
the share of samples by layer (Troupe, Ray, redis-py, SQLite, asyncio, pydantic, other) and the
functions most often on top of the stack, and writes the collapsed stacks to
bench/results/profile-<config>-<process>.txt (speedscope.app and flamegraph.pl read them).
py-spy attaches with ptrace: in a container that may need the SYS_PTRACE capability.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from approval_cycle import generate_cycle, one_cycle
from bench_agents import build_agent, make_store
from bench_common import private_redis
from suspended_scale import host_stats

from troupe import Runtime

RESULTS = Path(__file__).resolve().parent / "results"
# Which layer a frame belongs to, by the first path fragment its file name contains.
LAYERS = [
    ("troupe", ("/core/", "/storage/", "/actors/", "/supervisor/", "/api/", "/troupe/", "bench/")),
    ("ray", ("/ray/",)),
    ("redis-py", ("/redis/",)),
    ("sqlite", ("sqlite3",)),
    ("pydantic", ("pydantic",)),
    ("asyncio", ("asyncio/", "uvloop", "selectors.py")),
]


def layer(frame: str) -> str:
    return next((name for name, marks in LAYERS if any(mark in frame for mark in marks)), "other")


def summarize(raw: Path, top: int) -> str:
    """Share of samples per layer (by the frame on top of the stack) and the busiest functions."""
    by_layer: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        by_layer[layer(leaf)] += int(count)
        by_function[leaf] += int(count)
        total += int(count)
    if not total:
        return "  no samples (was the process busy?)"
    lines = ["  " + "   ".join(f"{name} {100 * n / total:.0f}%" for name, n in by_layer.most_common())]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in by_function.most_common(top)]
    return "\n".join(lines)


async def profile(config: str, seconds: float, top: int, durability: str, api: str) -> None:
    executor, kind = config.split("-")
    cycle = one_cycle if api == "stream" else generate_cycle
    # On PATH, or beside this interpreter (a virtualenv's bin, not activated).
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install -e '.[bench]'")
    with tempfile.TemporaryDirectory() as tmp, private_redis() if kind == "redis" else nullcontext() as url:
        store = make_store(kind, Path(tmp) / "profile.db", url, prefix="profile:")
        runtime = Runtime([build_agent()], storage=store, executor=executor, durability=durability)  # type: ignore[arg-type]
        agent = runtime.get_agent("bench")
        for _ in range(50):
            await cycle(agent)
        pids = {"driver": os.getpid()}
        if executor == "ray":
            pids["actor"] = int((await host_stats(runtime))["pid"])
        RESULTS.mkdir(exist_ok=True)
        outputs = {name: RESULTS / f"profile-{config}-{name}.txt" for name in pids}
        record = ["record", "--rate", "500", "--duration", str(int(seconds)), "--nonblocking", "--gil"]
        record += ["--format", "raw", "--full-filenames"]
        spies = [
            await asyncio.create_subprocess_exec(
                spy,
                *record,
                "--pid",
                str(pid),
                "--output",
                str(outputs[name]),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            for name, pid in pids.items()
        ]
        await asyncio.sleep(1.0)  # let py-spy attach before the measured cycles start
        cycles = 0
        started = time.perf_counter()
        while any(s.returncode is None for s in spies):
            await cycle(agent)
            cycles += 1
        elapsed = time.perf_counter() - started
        await runtime.shutdown()
        for spied in spies:
            _, err = await spied.communicate()
            if spied.returncode != 0:
                raise SystemExit(f"py-spy failed: {err.decode(errors='replace')}")
    print(f"{config}: {cycles} cycles in {elapsed:.1f} s ({1000 * elapsed / cycles:.2f} ms each, sampled)")
    for name, output in outputs.items():
        print(f"\n{name} (pid {pids[name]}), collapsed stacks in {output.relative_to(RESULTS.parent.parent)}")
        print(summarize(output, top))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="ray-redis")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--durability", choices=("sync", "exit"), default="sync")
    parser.add_argument("--api", choices=("stream", "generate"), default="stream", help="which cycle to run")
    args = parser.parse_args()
    asyncio.run(profile(args.config, args.seconds, args.top, args.durability, args.api))


if __name__ == "__main__":
    main()
