"""Approval cycles per second over HTTP through the front door on Ray Serve, with 1 and 2 replicas.

The server is ``troupe serve --replicas N`` in its own process (a Ray of its own, Serve's proxy on a
loopback port, open mode), every replica serving the instant scripted agent of ``bench_agents`` on one
private Redis; the clients are ``http_load``'s (stream until the approval pause, approve, read to
``[DONE]``), httpx in this process. Client and server share the machine's cores, so the figures say what
one machine does, not how Serve scales across machines.

    python bench/serve_http.py [--replicas 1,2] [--clients 50] [--cycles 10] [--deadline 300]

Prints one JSON line per replica count (cycles/s, p50/p99 ms, errors), with the load average before
and after and the commit measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_common import free_port, private_redis
from http_load import load, serving

HERE = Path(__file__).resolve().parent


def serve_runtime() -> Any:
    """What every replica serves (``troupe serve --app serve_http:serve_runtime``)."""
    from bench_agents import build_agent

    from troupe import RedisStore, Runtime

    store = RedisStore.from_url(os.environ["TROUPE_BENCH_REDIS"], prefix=os.environ["TROUPE_BENCH_PREFIX"])
    return Runtime([build_agent()], storage=store, executor="ray")


def start_server(replicas: int, redis_url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "TROUPE_BENCH_REDIS": redis_url, "TROUPE_BENCH_PREFIX": f"serve-{replicas}:"}
    command = [sys.executable, "-m", "troupe.cli", "serve", "--app", "serve_http:serve_runtime"]
    command += ["--replicas", str(replicas), "--port", str(port), "--open"]
    process = subprocess.Popen(command, cwd=HERE, env=env, stdout=subprocess.DEVNULL)
    # Ray, Serve's controller and proxy, then each replica's runtime: slower than one uvicorn.
    return process, serving(process, f"http://127.0.0.1:{port}/api", 180)


def commit() -> str:
    command = ["git", "describe", "--always", "--dirty"]
    done = subprocess.run(command, cwd=HERE, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def measure(replicas: int, redis_url: str, clients: int, cycles: int, deadline: float) -> dict[str, Any]:
    process, url = start_server(replicas, redis_url)
    try:
        before = os.getloadavg()[0]
        measured = asyncio.run(load(url, process.pid, clients, cycles, deadline))
        after = os.getloadavg()[0]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    # The server's own CPU figure is its driver process only: the replicas are other processes.
    measured.pop("server_cpu_ms", None)
    return {
        "workload": "http-approval-cycle",
        "replicas": replicas,
        **measured,
        "load_avg_1m": [round(before, 2), round(after, 2)],
        "cores": os.cpu_count(),
        "commit": commit(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2", help="replica counts to measure, comma-separated")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (runs in flight)")
    parser.add_argument("--cycles", type=int, default=10, help="measured cycles per client")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds one load may take")
    args = parser.parse_args()
    with private_redis() as redis_url:
        for replicas in (int(n) for n in args.replicas.split(",")):
            row = measure(replicas, redis_url, args.clients, args.cycles, args.deadline)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
