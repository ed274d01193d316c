"""Helpers every benchmark shares, free of Troupe and Ray imports (peer benchmarks import them too)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

# W1-300ms: every system's scripted model waits this long per turn (an asyncio sleep in the Python
# peers and in Troupe's model, a setTimeout in Mastra's harness), so a cycle holds 2 x 300 ms of model.
MODEL_TURN_S = 0.3
# Where each process keeps its open wait log (one file per path, opened on first use).
_wait_logs: dict[str, int] = {}


async def model_wait(seconds: float, log: str | None) -> None:
    """The scripted model's time: sleep ``seconds`` on the running loop, then append when the wait began
    and ended (``time.perf_counter``, CLOCK_MONOTONIC on Linux, so comparable between the driver and a
    Ray actor) to the file ``log``: timers overshoot, and the harness subtracts the waits as measured.
    One ``os.write`` of a short line to an open file, a few microseconds, inside the model's turn."""
    began = time.perf_counter()
    await asyncio.sleep(seconds)
    ended = time.perf_counter()
    if log is None:
        return
    fd = _wait_logs.get(log)
    if fd is None:
        fd = _wait_logs[log] = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, f"{began:.6f} {ended:.6f}\n".encode())


def read_waits(log: str | os.PathLike[str]) -> list[tuple[float, float]]:
    """The (began, ended) pairs ``model_wait`` appended to ``log``, oldest first; none if it is missing."""
    try:
        with open(log) as lines:
            pairs = [line.split() for line in lines if line.strip()]
    except FileNotFoundError:
        return []
    return sorted((float(began), float(ended)) for began, ended in pairs)


def waits_per_cycle(
    windows: list[tuple[float, float]], waits: list[tuple[float, float]]
) -> list[tuple[int, float]]:
    """For each cycle's (start, end): how many model waits lay inside it and their total in ms."""
    found = []
    for start, end in windows:
        inside = [ended - began for began, ended in waits if start <= began and ended <= end]
        found.append((len(inside), sum(inside) * 1000))
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return float("nan")


def pss_mb(pid: int) -> float:
    """Proportional set size of a process in MiB: shared pages (libraries, Ray's shared memory) split
    between the processes that map them, so summing over processes does not count them twice."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        pass
    return rss_mb(pid)


async def bounded(job: Callable[[int], Awaitable[T]], count: int, limit: int) -> list[T]:
    """``job(0)`` .. ``job(count - 1)`` with at most ``limit`` in flight (users do not all click in the
    same ms); their results in index order.

    ``limit`` workers take the next index as they finish one, so only ``limit`` jobs exist at any time.
    Wrapping every job in a task up front (``gather`` over a semaphore) kept ``count`` tasks and
    coroutines alive for the whole run: the driver's collector traced them over and over, about three
    times as many collections at N=20,000 as this way, a cost that grew with N and was the harness's own.
    """
    results: list[Any] = [None] * count
    indexes = iter(range(count))

    async def worker() -> None:
        for index in indexes:  # shared: each index goes to exactly one worker
            results[index] = await job(index)

    await asyncio.gather(*(worker() for _ in range(min(limit, count))))
    return results


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


REDIS_FSYNC = ("everysec", "always")


@contextmanager
def private_redis(appendfsync: str | None = "everysec") -> Iterator[str]:
    """A throw-away redis-server on a free loopback port; yields its URL. Durable like a production
    Redis: an append-only file fsynced every second (``"everysec"``, Redis's default) or after every
    write (``"always"``); ``None`` for no persistence at all."""
    persistence = (
        ["--appendonly", "no"]
        if appendfsync is None
        else ["--appendonly", "yes", "--appendfsync", appendfsync]
    )
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (scripts/setup.sh --system installs it)")
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        proc = subprocess.Popen(
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                data,
                "--save",
                "",
                *persistence,
            ],
            stdout=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        try:
            for _ in range(200):
                try:
                    if redis.Redis.from_url(url).ping():
                        break
                except redis.ConnectionError:
                    time.sleep(0.02)
            yield url
        finally:
            proc.terminate()
            proc.wait()


def redis_used(url: str) -> int:
    """Redis INFO used_memory, in bytes."""
    import redis

    return int(redis.Redis.from_url(url).info("memory")["used_memory"])


def redis_pid(url: str) -> int:
    import redis

    return int(redis.Redis.from_url(url).info("server")["process_id"])


def path_bytes(*paths: str | os.PathLike[str]) -> int:
    """Bytes on disk of files (and of every file under directories); missing paths count 0."""
    total = 0
    for path in paths:
        if os.path.isdir(path):
            for root, _dirs, files in os.walk(path):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        elif os.path.exists(path):
            total += os.path.getsize(path)
    return total
