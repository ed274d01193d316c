"""The workloads, written once and run the same way on every system (Troupe and its peers).

A system is an adapter with a handful of async methods (``System`` below); ``run_phase`` drives one
phase of one workload on it and returns result rows (plain dicts, JSON-ready). Every phase runs in a
fresh process started by ``run_all.py``, so each system starts from the same conditions.

W1  approval cycle: start -> paused for approval -> approve -> final text, timed per cycle, through the
    system's streaming API (``env["api"] == "stream"``, the default) or its plain calls ("generate").
W2  supervisor -> subagent -> approval: the subagent's gated tool pauses the supervisor's run; the
    decision is made on the supervisor's run and the final text comes back from it.
W3  N runs paused at once (``concurrency`` calls in flight), then all approved; time, and memory per
    paused run: RSS growth of every process the system runs while the N runs are paused (includes the
    allocator's high-water mark from the calls in flight), the driver's retained Python heap per
    paused run (tracemalloc, on a separate untimed pass), and store bytes where there is a store.
W4  restart: one process pauses N runs and exits; a fresh process lists them from the durable store
    and approves them all. Timed from the fresh process's spawn.
W1-300ms  W1 with a model that waits 300 ms per turn (the same in every system): the cycle beyond the
    model's 2 x 300 ms.
W3-fsync  W3 at 2,000 runs (100 in flight): timed, then counted again with strace attached to the
    store's process, for fsyncs per run.
startup  Troupe rows, a fresh process each: from ``Runtime(...)`` to the first run's pause.
"""

from __future__ import annotations

import gc
import itertools
import os
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_common import (
    MODEL_TURN_S,
    bounded,
    path_bytes,
    percentile,
    pss_mb,
    read_waits,
    rss_mb,
    waits_per_cycle,
)
from fsync_count import counting_fsyncs, perf_usable

PROMPT = "delete abc-123"
FINAL_TEXT = "Deleted."
SLOW_W1 = "w1-300ms"  # W1 with a model that waits MODEL_TURN_S per turn
FSYNC = "w3-fsync"  # W3 timed, then again with the store's process's fsyncs counted
STARTUP = "startup"  # Runtime(...) to the first run's pause, in a fresh process
# W1's model turns per cycle: the tool call, then the answer once the tool ran.
W1_MODEL_TURNS = 2


class Unsupported(Exception):
    """The system cannot do this workload; the message says why (it goes into the report)."""


class System:
    """One configuration of one framework, driven by the workloads.

    ``pause(i)`` starts run ``i`` and returns once it is paused for approval, with a token that
    ``approve(token)`` needs to approve it and finish the run (checking the final text). Durable systems
    also implement ``list_paused()`` for a fresh process, returning the tokens of every paused run.
    """

    key = ""
    label = ""
    family = ""
    durable = False  # paused runs survive a restart of the process (W4 possible)
    durability = ""  # what a write survives, shown beside the figures (default: see _durability)
    memory_only_note = "state lives only in the process's memory: a restart loses every paused run"

    def __init__(self, workdir: Path, env: dict[str, Any]) -> None:
        self.workdir = workdir
        self.env = env
        self.notes: list[str] = []
        # W1/W2 through the system's streaming API ("stream", the default) or its plain call ("generate")
        self.api: str = env.get("api", "stream")
        # W1-300ms: the model's wait per turn (0: instant) and the file its waits are logged to.
        self.model_turn_s: float = env.get("model_turn_s", 0.0)
        self.model_waits: str | None = env.get("model_waits")

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def w1(self) -> None:
        """W1 through the non-streaming calls; systems override it with their streaming cycle."""
        await self.approve(await self.pause(-1))

    async def w2(self) -> None:
        raise Unsupported("not implemented")

    async def pause(self, i: int) -> Any:
        raise NotImplementedError

    async def approve(self, token: Any) -> None:
        raise NotImplementedError

    async def persist(self, tokens: list[Any]) -> None:
        """Make paused runs survive the process (a no-op where the store already did)."""

    async def list_paused(self) -> list[Any]:
        raise Unsupported(self.memory_only_note)

    async def pids(self) -> list[int]:
        """Processes that hold this system's state besides the driver and its children."""
        return []

    async def store_processes(self) -> list[tuple[str, int]]:
        """(role, pid) of the processes whose fsyncs are the store's (W3-fsync traces them): the driver
        for a system that runs in it."""
        return [("driver", os.getpid())]

    async def first_pause(self) -> dict[str, Any]:
        """Not opened yet: construct the runtime and run until the first run is paused; the times."""
        raise Unsupported("measured on the Troupe rows only")

    def store_bytes(self) -> int | None:
        """Bytes in the durable store (file sizes, Redis used_memory), or None without one."""
        return None

    async def w1_parts(self) -> dict[str, Any] | None:
        """What one W1 cycle is made of (store writes, calls to other processes), where the system can
        say: measured after the timed cycles, for the report's "what a cycle is made of". None: not
        measured."""
        return None


class JsonFileSystem(System):
    """A peer without a store of its own: a paused run's state is kept in memory (``mode="memory"``) or
    written as one JSON file per paused run (``mode="json"``), the peer's own serialized form."""

    prefix = ""  # the key is "<prefix>-<mode>"

    def __init__(self, workdir: Path, env: dict[str, Any], mode: str) -> None:
        super().__init__(workdir, env)
        self.mode = mode
        self.key = f"{self.prefix}-{mode}"
        self.durable = mode == "json"
        if self.durable:
            self.durability = "JSON file per paused run, no fsync"
        self.dir = workdir / f"{self.key}-{env['store_tag']}"
        self.counter = itertools.count()

    async def open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)

    def keep(self, state: Any, dump: Any) -> Any:
        """The token for a paused run: its state itself, or the file ``dump(state)`` was written to."""
        if self.mode == "memory":
            return state
        path = self.dir / f"run-{next(self.counter)}.json"
        data = dump(state)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def forget(self, token: Any) -> None:
        """The run is finished: its file goes."""
        if self.mode == "json":
            token.unlink()

    async def list_paused(self) -> list[Any]:
        if not self.durable:
            return await super().list_paused()
        return sorted(self.dir.glob("run-*.json"))

    def store_bytes(self) -> int | None:
        return path_bytes(self.dir) if self.durable else None


# ---- memory -------------------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listing:
            kids = [int(p) for p in listing.read().split()]
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return found
    for kid in kids:
        found.append(kid)
        found.extend(_children(kid))
    return found


async def process_memory(system: System, measure: Any = rss_mb) -> dict[int, float]:
    """Memory (MiB, RSS by default) of the driver, its descendants (Ray's processes and actors) and the
    system's extra processes (a redis-server)."""
    gc.collect()
    pids = {os.getpid(), *_children(os.getpid()), *(await system.pids())}
    return {pid: measure(pid) for pid in sorted(pids)}


def rss_delta_mb(before: dict[int, float], after: dict[int, float]) -> float:
    total = 0.0
    for pid in set(before) | set(after):
        b, a = before.get(pid, 0.0), after.get(pid, 0.0)
        if a == a and b == b:  # skip NaN (a process that vanished)
            total += a - b
    return total


def total_mb(snapshot: dict[int, float]) -> float:
    return sum(v for v in snapshot.values() if v == v)


# ---- phases ---------------------------------------------------------------------------------------------


def _durability(system: System) -> str:
    """The system's own statement, else "in memory" for a memory-only one, else its label (which names
    its store and settings)."""
    return system.durability or (system.label if system.durable else "in memory")


def base_row(system: System, workload: str, **extra: Any) -> dict[str, Any]:
    return {
        "system": system.key,
        "label": system.label,
        "family": system.family,
        "durable": system.durable,
        "durability": _durability(system),
        "workload": workload,
        **extra,
    }


def settle_driver(system: System) -> bool:
    """With ``env["gc"] == "freeze"`` (every system alike): collect, then freeze the driver's heap, so
    that what the warm-up kept is not traced again inside timed work; True if it did. The caller
    unfreezes. (Not ``troupe.actors.remote.settle_heap``: the peers' processes run this harness without
    importing Troupe or Ray.)"""
    if system.env.get("gc") != "freeze":
        return False
    gc.collect()
    gc.freeze()
    return True


def _collections() -> list[int]:
    return [stats["collections"] for stats in gc.get_stats()]


# Untimed cycles after the driver's collection: the first one or two after a gc.collect() are 1.5-7x
# slower than the rest (the allocator refills what the collection gave back), and with 300 timed cycles
# the p99 is the third slowest, so they would decide it.
SETTLE_CYCLES = 5


async def _window(cycle: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    started = time.perf_counter()
    await cycle()
    return started, time.perf_counter()


async def latency(system: System, workload: str, cycles: int, warmup: int) -> dict[str, Any]:
    """Median and p99 of ``cycles`` timed cycles after ``warmup`` ones. With ``env["gc"] == "freeze"``
    the driver collects and freezes its heap between the warm-up and the timed cycles (every system
    alike): what the warm-up allocated for good is not traced again by the timed cycles' collections;
    then ``SETTLE_CYCLES`` more untimed cycles. W1-300ms is W1's cycle with the slow model."""
    cycle = system.w2 if workload == "w2" else system.w1
    try:
        for _ in range(warmup):
            await cycle()
        if settle_driver(system):
            for _ in range(min(SETTLE_CYCLES, warmup)):
                await cycle()
        before = _collections()
        windows = [await _window(cycle) for _ in range(cycles)]
        collections = [a - b for a, b in zip(_collections(), before, strict=True)]
    except Unsupported as exc:
        return base_row(system, workload, status="unsupported", note=str(exc))
    finally:
        gc.unfreeze()
    samples = [(ended - started) * 1000 for started, ended in windows]
    # The driver's collections per generation while timed.
    row = await latency_row(system, workload, samples, warmup, driver_gc_collections=collections)
    if workload == SLOW_W1:
        waits = read_waits(system.model_waits) if system.model_waits else []
        row.update(model_overhead(samples, waits_per_cycle(windows, waits)))
    # After the footprint was taken: the probe opens stores of its own.
    parts = await system.w1_parts() if workload == "w1" else None
    if parts is not None:
        row["parts"] = parts
    return row


async def latency_row(
    system: System, workload: str, samples: list[float], warmup: int, **extra: Any
) -> dict[str, Any]:
    """The W1/W2 row of timed cycles (ms), with the memory of the system's processes right after."""
    footprint = await process_memory(system, pss_mb)
    median = statistics.median(samples)
    p99 = percentile(samples, 0.99)
    return base_row(
        system,
        workload,
        status="ok",
        cycles=len(samples),
        warmup=warmup,
        median_ms=round(median, 3),
        p99_ms=round(p99, 3),
        p99_over_median=round(p99 / median, 2),
        mean_ms=round(statistics.fmean(samples), 3),
        min_ms=round(min(samples), 3),
        max_ms=round(max(samples), 3),
        # The five slowest cycles as (index among the timed cycles, ms): spread out or periodic?
        slowest=[[i, round(ms, 2)] for i, ms in sorted(enumerate(samples), key=lambda x: -x[1])[:5]],
        footprint_mb=round(total_mb(footprint), 1),
        processes=len(footprint),
        **extra,
    )


def model_overhead(samples: list[float], waited: list[tuple[int, float]]) -> dict[str, Any]:
    """W1-300ms: what a cycle takes beyond its model. ``overhead_*``: the cycle minus the model's nominal
    2 x 300 ms; ``beyond_waits_*``: minus the model's waits as the model measured them (a loop's timers
    overshoot a sleep by about half a ms), None unless every cycle held exactly its two waits.
    ``waited`` is (waits, their ms) per cycle, in the samples' order."""
    nominal = W1_MODEL_TURNS * MODEL_TURN_S * 1000
    median, p99 = statistics.median(samples), percentile(samples, 0.99)
    fields: dict[str, Any] = {
        "model_turn_ms": round(MODEL_TURN_S * 1000, 3),
        "model_ms_per_cycle": round(nominal, 3),
        "overhead_median_ms": round(median - nominal, 3),
        "overhead_p99_ms": round(p99 - nominal, 3),
        "waits_per_cycle": sorted({count for count, _ in waited}),
        "waited_median_ms": None,
        "beyond_waits_median_ms": None,
        "beyond_waits_p99_ms": None,
    }
    if len(waited) == len(samples) and all(count == W1_MODEL_TURNS for count, _ in waited):
        beyond = [ms - wait for ms, (_, wait) in zip(samples, waited, strict=True)]
        fields["waited_median_ms"] = round(statistics.median(wait for _, wait in waited), 3)
        fields["beyond_waits_median_ms"] = round(statistics.median(beyond), 3)
        fields["beyond_waits_p99_ms"] = round(percentile(beyond, 0.99), 3)
    return fields


async def _timed(job: Any, into: list[float], index: int) -> Any:
    started = time.perf_counter()
    out = await job
    into[index] = (time.perf_counter() - started) * 1000
    return out


async def retained_heap_kb(system: System, runs: int) -> float:
    """Python heap the driver keeps per paused run (tracemalloc, after a GC), on a separate untimed
    pass of ``runs`` runs paused one by one; they are approved afterwards. State kept in other
    processes (Ray actors, redis-server) does not show here: see RSS and store bytes."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tokens = [await system.pause(i) for i in range(runs)]
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    for token in tokens:
        await system.approve(token)
    return round(held / 1024 / runs, 2)


@dataclass(frozen=True)
class Timed:
    """One W3 phase: its wall time and each run's own time in it (ms)."""

    seconds: float
    each_ms: list[float]


async def _every(
    job: Callable[[int], Awaitable[Any]], runs: int, concurrency: int
) -> tuple[list[Any], Timed]:
    """``job(0)`` .. ``job(runs - 1)``, ``concurrency`` in flight: their results, and the time taken."""
    each = [0.0] * runs
    started = time.perf_counter()
    out = await bounded(lambda i: _timed(job(i), each, i), runs, concurrency)
    return out, Timed(time.perf_counter() - started, each)


def throughput(paused: Timed, approved: Timed) -> dict[str, float]:
    """W3's timing fields: pausing all, approving all, per run, and each run's median and p99."""
    runs = len(paused.each_ms)
    per_run = [p + a for p, a in zip(paused.each_ms, approved.each_ms, strict=True)]
    return {
        "pause_s": round(paused.seconds, 3),
        "approve_s": round(approved.seconds, 3),
        "total_s": round(paused.seconds + approved.seconds, 3),
        "ms_per_run": round((paused.seconds + approved.seconds) * 1000 / runs, 3),
        "median_ms": round(statistics.median(per_run), 3),
        "p99_ms": round(percentile(per_run, 0.99), 3),
    }


async def _pause_then_approve(system: System, runs: int, concurrency: int) -> dict[str, float]:
    tokens, paused = await _every(system.pause, runs, concurrency)
    _, approved = await _every(lambda i: system.approve(tokens[i]), runs, concurrency)
    return throughput(paused, approved)


async def _counted_pass(
    system: System, runs: int, concurrency: int, processes: list[tuple[str, int]], tool: str | None
) -> tuple[dict[str, float], list[dict[str, Any]] | None]:
    """W3's pause-all-then-approve-all, with ``tool`` counting the fsyncs of ``processes`` (None: not
    counted); the timing fields and the counts per process."""
    if tool is None:
        return await _pause_then_approve(system, runs, concurrency), None
    async with counting_fsyncs(processes, system.workdir, tool) as counted:
        timing = await _pause_then_approve(system, runs, concurrency)
    return timing, counted


def _per_run(counted: list[dict[str, Any]] | None, runs: int) -> float | None:
    if counted is None:
        return None
    return round(sum(process["fsync"] + process["fdatasync"] for process in counted) / runs, 3)


async def fsync_count(system: System, runs: int, concurrency: int, warmup: int) -> dict[str, Any]:
    """W3-fsync: W3's pause-all-then-approve-all of ``runs`` runs, timed, with the fsync and fdatasync
    calls of the store's processes (``System.store_processes``) counted by perf's tracepoint counters,
    which do not slow them (where perf can: ``perf_note`` otherwise); then the same again counted by
    strace attached to them, which does, so that pass's time is reported apart (fsync_count.py). The
    driver's heap is frozen after the warm-up, as in W3."""
    for _ in range(warmup):
        await system.approve(await system.pause(-1))
    processes = await system.store_processes()
    perf_note = await perf_usable()
    settle_driver(system)
    try:
        timed, by_perf = await _counted_pass(
            system, runs, concurrency, processes, None if perf_note else "perf"
        )
        traced, by_strace = await _counted_pass(system, runs, concurrency, processes, "strace")
    finally:
        gc.unfreeze()
    return base_row(
        system,
        FSYNC,
        status="ok",
        n=runs,
        concurrency=concurrency,
        **timed,
        fsyncs_per_run=_per_run(by_perf, runs),
        counted=by_perf,
        perf_note=perf_note,
        strace_fsyncs_per_run=_per_run(by_strace, runs),
        traced=by_strace,
        traced_ms_per_run=traced["ms_per_run"],
    )


async def startup(system: System) -> dict[str, Any]:
    """In a fresh process, before the system is opened: ``Runtime(...)`` to the first run's pause
    (``System.first_pause``), then the memory of the system's processes at that moment."""
    try:
        timings = await system.first_pause()
    except Unsupported as exc:
        return base_row(system, STARTUP, status="unsupported", note=str(exc))
    footprint = await process_memory(system, pss_mb)
    return base_row(
        system,
        STARTUP,
        status="ok",
        **timings,
        footprint_mb=round(total_mb(footprint), 1),
        processes=len(footprint),
    )


async def suspended_scale(
    system: System, runs: int, concurrency: int, warmup: int, heap_sample: int = 200
) -> dict[str, Any]:
    """W3. With ``env["gc"] == "freeze"`` the driver collects and freezes its heap after the warm-up, as
    W1/W2 do (every system alike): otherwise each full collection traces every module the driver
    imported (about 100,000 objects, 100-120 ms each), and with 100 calls in flight a full collection
    comes every 800 runs or so; a run of 20,000 then pays for about 25 of them and a run of 200 for none
    or one, which made the in-process rows look less linear than they are."""
    for _ in range(warmup):
        await system.approve(await system.pause(-1))
    settle_driver(system)
    try:
        return await _suspended_scale(system, runs, concurrency, heap_sample)
    finally:
        gc.unfreeze()


async def _suspended_scale(system: System, runs: int, concurrency: int, heap_sample: int) -> dict[str, Any]:
    before = await process_memory(system)
    store_before = system.store_bytes()

    tokens, paused = await _every(system.pause, runs, concurrency)
    during = await process_memory(system)
    footprint = await process_memory(system, pss_mb)
    store_during = system.store_bytes()
    _, approved = await _every(lambda i: system.approve(tokens[i]), runs, concurrency)

    heap_runs = min(runs, heap_sample)
    heap_kb = await retained_heap_kb(system, heap_runs) if heap_runs else None

    row = base_row(
        system,
        "w3",
        status="ok",
        n=runs,
        concurrency=concurrency,
        **throughput(paused, approved),
        rss_kb_per_paused_run=round(rss_delta_mb(before, during) * 1024 / runs, 2),
        heap_kb_per_paused_run=heap_kb,
        heap_sample_runs=heap_runs,
        footprint_mb=round(total_mb(footprint), 1),
    )
    if store_before is not None and store_during is not None:
        row["store_bytes_per_paused_run"] = round((store_during - store_before) / runs)
    return row


async def restart_populate(system: System, runs: int, concurrency: int) -> dict[str, Any]:
    if not system.durable:
        return base_row(system, "w4", status="unsupported", n=runs, note=system.memory_only_note)
    await system.approve(await system.pause(-1))  # the first process works normally before it stops
    started = time.perf_counter()
    tokens = await bounded(system.pause, runs, concurrency)
    await system.persist(tokens)
    return {"populate_s": round(time.perf_counter() - started, 3)}


async def restart_resume(
    system: System, runs: int, concurrency: int, spawned_at: float, ready_at: float, populated: dict[str, Any]
) -> dict[str, Any]:
    """In the fresh process (``system.open()`` already done at ``ready_at``): list, then approve all."""
    tokens = await system.list_paused()
    listed_at = time.time()
    if len(tokens) != runs:
        raise AssertionError(f"{system.key}: listed {len(tokens)} paused runs after restart, expected {runs}")
    await bounded(lambda i: system.approve(tokens[i]), len(tokens), concurrency)
    decided_at = time.time()
    left = await system.list_paused()
    if left:
        raise AssertionError(f"{system.key}: {len(left)} runs still paused after approving all")
    return base_row(
        system,
        "w4",
        status="ok",
        n=runs,
        concurrency=concurrency,
        populate_s=populated.get("populate_s"),
        startup_s=round(ready_at - spawned_at, 3),
        list_s=round(listed_at - ready_at, 3),
        decide_s=round(decided_at - listed_at, 3),
        total_s=round(decided_at - spawned_at, 3),
        ms_per_run=round((decided_at - ready_at) * 1000 / runs, 3),
    )
