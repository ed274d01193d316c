"""The Ray that Troupe starts for itself: what it costs to start and to keep.

One process: ``Runtime(...)`` on Ray (no ``ray_address``: Troupe starts Ray), one W1 agent, one run
started and paused for approval, then approved. Prints the time from ``Runtime(...)`` to that first
pause (Ray's start, the agent's actor, the run), and then, after the cycle, every process of the tree
under this one (Ray's daemons, agents and workers, the agent's actor) with its proportional set size
(PSS: shared pages split between the processes that map them, so the sum counts them once).

    python bench/embedded_ray.py [--store sqlite|memory] [--floor]

``--floor``: Ray's own floor instead, for comparison: the same Ray, started as Troupe starts it, with one
actor whose class imports nothing (what any Ray application pays before its own code). Run it in a fresh
process each time: a Ray already started in this process would be reused. What is installed counts:
with Ray's dashboard dependencies (``ray[default]``, which the ``cluster`` and ``serve`` extras bring),
Ray's dashboard agent loads all its modules instead of its minimal set.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import psutil

# What each of Ray's processes is, from its command line (the first match wins).
# Ray's agents and workers rename themselves ("ray::DashboardAgent", "ray::IDLE", "ray::<actor>").
KINDS = [
    ("gcs_server", "gcs_server"),
    ("raylet", "raylet"),
    ("ray::DashboardAgent", "dashboard agent"),
    ("dashboard/agent.py", "dashboard agent"),
    ("ray::RuntimeEnvAgent", "runtime_env agent"),
    ("runtime_env/agent/main.py", "runtime_env agent"),
    ("dashboard.py", "dashboard (API server)"),
    ("log_monitor.py", "log_monitor"),
    ("autoscaler/_private/monitor.py", "autoscaler monitor"),
    ("ray::IDLE", "idle worker"),
    ("AgentHost", "the agent's actor"),
    ("ray::Bare", "a bare actor (--floor)"),
    ("ray::", "another actor"),
    ("default_worker.py", "worker (starting)"),
]


def kind(process: psutil.Process) -> str:
    try:
        command = " ".join(process.cmdline()) or process.name()
    except psutil.Error:
        return "gone"
    return next((name for needle, name in KINDS if needle in command), command[:60])


def pss_mib(process: psutil.Process) -> float:
    try:
        return float(process.memory_full_info().pss) / 2**20
    except psutil.Error:
        return 0.0


async def main(store_kind: str) -> None:
    from bench_agents import build_agent

    from troupe import MemoryStore, Runtime, SqliteStore

    with tempfile.TemporaryDirectory() as tmp:
        storage = SqliteStore(Path(tmp) / "troupe.db") if store_kind == "sqlite" else MemoryStore()
        started = time.perf_counter()
        runtime = Runtime([build_agent()], storage=storage, executor="ray")
        agent = runtime.get_agent("bench")
        try:
            paused = await agent.generate("delete abc-123")
            to_pause = time.perf_counter() - started
            assert paused.finish_reason == "suspended", paused.finish_reason
            done = await agent.approve_tool_call_generate(run_id=paused.run_id)
            assert done.text == "Deleted.", done.text
            me = psutil.Process(os.getpid())
            rows = [(kind(p), p.pid, pss_mib(p)) for p in me.children(recursive=True)]
            driver = pss_mib(me)
        finally:
            await runtime.shutdown()
    print(f"Runtime(...) to the first run's pause: {to_pause:.2f} s")
    report(rows, driver)


def floor() -> None:
    import ray
    from troupe.actors.remote import ensure_ray

    @ray.remote(num_cpus=0)
    class Bare:
        def pid(self) -> int:
            return os.getpid()

    ensure_ray()
    try:
        ray.get(Bare.remote().pid.remote())  # type: ignore[attr-defined]
        me = psutil.Process(os.getpid())
        rows = [(kind(p), p.pid, pss_mib(p)) for p in me.children(recursive=True)]
        driver = pss_mib(me)
    finally:
        ray.shutdown()
    print("Ray's floor: Troupe's embedded Ray with one actor that imports nothing")
    report(rows, driver)


def report(rows: list[tuple[str, int, float]], driver: float) -> None:
    print(f"{'process':<28} {'pid':>7} {'PSS MiB':>8}")
    for name, pid, pss in sorted(rows, key=lambda r: -r[2]):
        print(f"{name:<28} {pid:>7} {pss:8.1f}")
    children = sum(pss for _, _, pss in rows)
    print(
        f"{len(rows)} processes under the driver: {children:.0f} MiB; with the driver ({driver:.0f} MiB): "
        f"{children + driver:.0f} MiB"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--floor", action="store_true", help="Ray's floor, without Troupe's agent")
    args = parser.parse_args()
    if args.floor:
        floor()
    else:
        asyncio.run(main(args.store))
