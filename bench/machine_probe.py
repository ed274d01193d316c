"""How fast this machine is right now, measured in each benchmark process before its workloads.

A shared virtual machine's speed drifts by tens of percent, sometimes twice, within one benchmark run:
the same code's W1 cycle in memory has taken 0.96 ms in one published run and 1.73 ms in the next. So
every process of run_all.py measures two things first, and each of its rows carries them:

- ``cpu_ms``: a fixed piece of pure-Python work (JSON round trips and dict building, the kind of work an
  approval cycle does), the median of several timings. A higher figure means a slower machine.
- ``cpu_tail``: the same kind of work cut to about 1 ms, repeated back to back for 1.5 s (as long as
  a W1 measurement of 300 cycles), as its p99 over its median: how much this machine alone stretches
  the slowest 1% of equal pieces of work. Nothing else runs in the process, no allocation survives a
  piece, the garbage collector is off and nothing waits, so whatever the tail shows is the machine's
  (on the benchmark's VM, bursts that a guest's ``/proc/stat`` does not count as steal). The p99
  target of the Troupe rows is read against it.
- ``fsync_ms_p50`` / ``fsync_ms_p99``: appending 4 KB to a file in the benchmark's work directory and
  fsyncing it, as a synchronous SQLite commit (``synchronous=FULL``) or a Redis ``appendfsync always``
  write does once each: the disk's part of a store write at that moment (the report's "what a cycle is
  made of" times the store's own writes, which include it).

The report prints both beside each system.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import percentile

_CPU_REPEATS = 15
_TAIL_SECONDS = 1.5
_FSYNCS = 200
_BLOCK = b"\0" * 4096


def _cpu_work(rounds: int = 100) -> int:
    run = {"run_id": "r", "messages": [{"role": "user", "content": "x" * 64, "n": i} for i in range(40)]}
    size = 0
    for _ in range(rounds):
        copied = json.loads(json.dumps(run))
        size += len({m["n"]: m for m in copied["messages"]})
    return size


def cpu_ms() -> float:
    """The median time of a fixed piece of pure-Python work (about 10 ms on the 2-core benchmark machine)."""
    timings = []
    for _ in range(_CPU_REPEATS):
        started = time.perf_counter()
        _cpu_work()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def cpu_tail(seconds: float = _TAIL_SECONDS) -> dict[str, float]:
    """Pieces of about 1 ms of the same work back to back for ``seconds``: their median and p99 (ms)."""
    timings = []
    # The work makes no reference cycles, so refcounting frees all of it; with the collector off, a
    # collection of whatever the process imported cannot be what lands in the tail.
    gc.disable()
    try:
        until = time.perf_counter() + seconds
        while (started := time.perf_counter()) < until:
            _cpu_work(10)
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        gc.enable()
    return {"median": statistics.median(timings), "p99": percentile(timings, 0.99)}


def fsync_ms(directory: Path, count: int = _FSYNCS) -> list[float]:
    """``count`` timings of appending 4 KB to a new file in ``directory`` and fsyncing it."""
    fd, name = tempfile.mkstemp(dir=directory, prefix="fsync-probe-")
    timings = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(fd, _BLOCK)
            os.fsync(fd)
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        os.unlink(name)
    return timings


def probe(directory: Path) -> dict[str, Any]:
    """The machine's speed now: ``cpu_ms``, ``cpu_tail`` and the fsync median and p99 in ``directory``
    (see the module)."""
    fsyncs = fsync_ms(directory)
    tail = cpu_tail()
    return {
        "cpu_ms": round(cpu_ms(), 3),
        "cpu_tail": round(tail["p99"] / tail["median"], 2),
        "fsync_ms_p50": round(statistics.median(fsyncs), 3),
        "fsync_ms_p99": round(percentile(fsyncs, 0.99), 3),
        "at": round(time.time(), 1),
    }
