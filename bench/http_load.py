"""HTTP load: approval cycles per second through the front door, many clients at once, on loopback.

One cycle, per client: POST /api/agents/bench/stream until the ``tool-call-approval`` frame (the stream
then ends, the run paused), POST /approve-tool-call with its ``runId`` and ``toolCallId``, read to
``data: [DONE]``. The agent is the instant scripted one of ``bench_agents`` (one gated tool), so this
measures Troupe + HTTP + SSE, not a model. The server is ``troupe serve`` in its own process (a SQLite
file by default, open mode), the clients are httpx in this one; both share the machine's cores.

Prints per executor: cycles/s, p50/p99 latency of one cycle as a client sees it, and the CPU one cycle
costs the server's process and the clients (on 2 cores the clients' share limits what is measured).

    python bench/http_load.py [--clients 200] [--cycles 10] [--deadline 300] [--executors local,ray]
                              [--store sqlite|memory] [--json out.json]

Failed cycles (and cycles not done by the deadline) are counted as errors, not fatal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
AGENT = "bench"


def serve_runtime() -> Any:
    """What the server process serves (``troupe serve --app http_load:serve_runtime``)."""
    from bench_agents import build_agent

    from troupe import MemoryStore, Runtime, SqliteStore

    executor = os.environ.get("TROUPE_BENCH_EXECUTOR", "local")
    db = os.environ.get("TROUPE_BENCH_DB", "memory")
    storage = MemoryStore() if db == "memory" else SqliteStore(db)
    return Runtime([build_agent()], storage=storage, executor=executor)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(executor: str, store: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``troupe serve`` on a free port; tried again on another port if it fails to start (the port we
    probed can be taken by someone else before the server binds it)."""
    for attempt in range(3):
        try:
            return _start_server(executor, store, workdir)
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _start_server(executor: str, store: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    db = "memory" if store == "memory" else str(workdir / f"{executor}.db")
    env = {**os.environ, "TROUPE_BENCH_EXECUTOR": executor, "TROUPE_BENCH_DB": db}
    command = [sys.executable, "-m", "troupe.cli", "serve", "--app", "http_load:serve_runtime"]
    command += ["--port", str(port), "--open", "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=HERE, env=env)
    return process, serving(process, f"http://127.0.0.1:{port}/api", 120)


def serving(process: subprocess.Popen[bytes], url: str, within_s: float) -> str:
    """``url`` once the server ``process`` answers ``GET {url}/agents``; killed if it does not in time."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/agents", timeout=2).status_code == 200:
                return url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise TimeoutError("the server did not start")


async def one_cycle(http: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    approval: dict[str, Any] | None = None
    async with http.stream(
        "POST", f"/agents/{AGENT}/stream", json={"messages": "delete abc-123"}
    ) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {") and '"tool-call-approval"' in line:
                approval = json.loads(line[6:])
    assert approval is not None, "the run did not pause for approval"
    body = {"runId": approval["runId"], "toolCallId": approval["payload"]["toolCallId"]}
    async with http.stream("POST", f"/agents/{AGENT}/approve-tool-call", json=body) as response:
        response.raise_for_status()
        text = ""
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                break
            if '"text-delta"' in line:
                text += json.loads(line[6:])["payload"]["text"]
    assert text == "Deleted.", text
    return (time.perf_counter() - started) * 1000


async def client(http: httpx.AsyncClient, cycles: int, samples: list[float], errors: list[str]) -> None:
    for _ in range(cycles):
        try:
            samples.append(await one_cycle(http))
        except Exception as exc:  # counted, not fatal: the load goes on and the report says how many
            errors.append(f"{type(exc).__name__}: {exc}")


async def load(url: str, server_pid: int, clients: int, cycles: int, deadline_s: float) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        await asyncio.gather(*(client(http, 1, [], []) for _ in range(clients)))  # warm-up: connections
        samples: list[float] = []
        errors: list[str] = []
        started, server_cpu, client_cpu = time.perf_counter(), cpu_seconds(server_pid), time.process_time()
        try:
            await asyncio.wait_for(
                asyncio.gather(*(client(http, cycles, samples, errors) for _ in range(clients))), deadline_s
            )
        except TimeoutError:
            unfinished = clients * cycles - len(samples) - len(errors)
            errors.extend(["not finished within the deadline"] * unfinished)
        elapsed = time.perf_counter() - started
        server_cpu, client_cpu = cpu_seconds(server_pid) - server_cpu, time.process_time() - client_cpu
    done = max(len(samples), 1)
    return {
        "clients": clients,
        "cycles": len(samples),
        "errors": len(errors),
        "first_errors": sorted(set(errors))[:3],
        "cycles_per_s": round(len(samples) / elapsed, 1),
        "p50_ms": round(percentile(samples, 0.50), 2),
        "p99_ms": round(percentile(samples, 0.99), 2),
        # CPU per cycle of the server's main process (Ray actors not included) and of these clients.
        "server_cpu_ms": round(server_cpu * 1000 / done, 2),
        "client_cpu_ms": round(client_cpu * 1000 / done, 2),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=200, help="concurrent clients (runs in flight)")
    parser.add_argument("--cycles", type=int, default=10, help="measured cycles per client")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds the whole load may take")
    parser.add_argument("--executors", default="local,ray")
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for executor in args.executors.split(","):
            process, url = start_server(executor, args.store, Path(tmp))
            try:
                measured = asyncio.run(load(url, process.pid, args.clients, args.cycles, args.deadline))
                rows.append({"executor": executor, "store": args.store, **measured})
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(30)
    header = (
        "executor",
        "store",
        "clients",
        "cycles",
        "errors",
        "cycles/s",
        "p50 ms",
        "p99 ms",
        "CPU/cycle server|client",
    )
    print("\n{:<9} {:<7} {:>7} {:>7} {:>6} {:>9} {:>8} {:>8}   {}".format(*header))
    for row in rows:
        print(
            f"{row['executor']:<9} {row['store']:<7} {row['clients']:>7} {row['cycles']:>7} "
            f"{row['errors']:>6} "
            f"{row['cycles_per_s']:>9} {row['p50_ms']:>8} {row['p99_ms']:>8}   "
            f"{row['server_cpu_ms']} ms | {row['client_cpu_ms']} ms"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
