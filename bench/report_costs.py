"""Tables for what issue 36 ("cheap at scale") measures beside W1-W4: W1 with a model that takes 300 ms a
turn (each system's overhead beyond the model, and Troupe's ``durability="sync"`` against ``"exit"``),
W3-fsync (ms per run with the store's fsyncs per run), Troupe's start-up to the first pause, and the
issue's targets against the run's figures. Rows from older runs have none of these: nothing is shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness import FSYNC, SLOW_W1, STARTUP
from report_format import cell, num, table

Ratios = Callable[[str, Any, str], list[str]]  # (workload, n, system) -> the peer's ratio cells

# Issue 36's targets on this run's rows.
SYNC_EXIT_TARGET_MS = {"troupe-ray-redis-always": 0.3}  # W1-300ms: sync's overhead minus exit's
FSYNC_TARGETS = {  # W3-fsync at 2,000 runs, 100 in flight
    "troupe-local-sqlite-full": {"fsyncs_per_run": 1.5, "ms_per_run": 1.0},
    "troupe-ray-redis-always": {"ms_per_run": 1.2},
}
TARGET_UNITS = {"ms_per_run": "ms/run", "fsyncs_per_run": "fsyncs/run"}
RAY_PSS_TARGET_MB = 250  # the embedded Ray's process tree after W1
TAIL_TARGET = 3.0  # p99 / median on every Troupe row
TARGET_N = 2000


def _by(rows: list[dict[str, Any]], workload: str) -> dict[str, dict[str, Any]]:
    return {r["system"]: r for r in rows if r["workload"] == workload}


def _ok(row: dict[str, Any] | None) -> bool:
    return row is not None and row.get("status") == "ok"


def _gap(row: dict[str, Any], width: int) -> list[str]:
    return ["n/a" if row.get("status") == "unsupported" else "error"] + [""] * (width - 1)


Cells = Callable[[str, dict[str, Any]], list[str]]


def _lines(by: dict[str, dict[str, Any]], systems: list[str], cells: Cells, width: int) -> list[list[str]]:
    """A line per system that has a row: its name, then ``cells(system, row)``, or why there are none."""
    return [[s, *(cells(s, by[s]) if _ok(by[s]) else _gap(by[s], width))] for s in systems if s in by]


def _slow_cells(system: str, r: dict[str, Any]) -> list[str]:
    return [
        num(r["median_ms"]),
        num(r["p99_ms"]),
        num(r["overhead_median_ms"]),
        num(r["overhead_p99_ms"]),
        num(r.get("waited_median_ms")),
        f"{num(r.get('beyond_waits_median_ms'))} ({num(r.get('beyond_waits_p99_ms'))})",
    ]


def slow_w1(rows: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]) -> list[str]:
    """W1-300ms: each system's cycle, its overhead beyond the model's 2 x 300 ms, beyond the model's
    waits as measured, and the sync/exit pairs."""
    by = _by(rows, SLOW_W1)
    body = _lines(by, systems, _slow_cells, 6)
    if not body:
        return []
    for line in body:
        line.insert(1, by[line[0]].get("durability", ""))
    turn = meta.get("model_turn_ms", 300)
    out = [
        "",
        f"### W1 with a model that takes {turn:g} ms a turn ({meta.get('slow_cycles')} cycles after "
        f"{meta.get('slow_warmup')} warm-up, one at a time)",
        "",
        f"overhead = the cycle minus the model's 2 x {turn:g} ms; model waits = the two waits as each model "
        "timed them (an event loop's timer overshoots a sleep); beyond the waits = the cycle minus them.",
        "",
        *table(
            [
                "system",
                "durability",
                "median ms",
                "p99 ms",
                "overhead median ms",
                "overhead p99 ms",
                "model waits ms",
                "beyond the waits: median (p99) ms",
            ],
            body,
        ),
    ]
    return out + _sync_exit(by, [line[0] for line in body])


def _sync_exit(by: dict[str, dict[str, Any]], present: list[str]) -> list[str]:
    """Troupe rows beside their ``-exit`` twin: how much ``durability="sync"`` adds to the overhead."""
    body = []
    for s in present:
        sync, exit_ = by[s], by.get(f"{s}-exit")
        if not s.startswith("troupe-") or not _ok(sync) or not _ok(exit_):
            continue
        assert exit_ is not None
        beyond = [sync.get("beyond_waits_median_ms"), exit_.get("beyond_waits_median_ms")]
        target = SYNC_EXIT_TARGET_MS.get(s)
        body.append(
            [
                s,
                num(sync["overhead_median_ms"]),
                num(exit_["overhead_median_ms"]),
                num(sync["overhead_median_ms"] - exit_["overhead_median_ms"], 3),
                num(beyond[0] - beyond[1], 3) if None not in beyond else "—",
                f"<= {target}" if target else "",
            ]
        )
    if not body:
        return []
    head = [
        "durability=sync row",
        "overhead median ms",
        "its -exit row's",
        "sync - exit ms",
        "beyond the waits: sync - exit ms",
        "target",
    ]
    return ["", *table(head, body)]


def _counted_on(row: dict[str, Any]) -> str:
    """The counted processes, e.g. "redis-server" or "agent actor x2"."""
    roles = [p["process"] for p in row.get("traced") or row.get("counted") or []]
    return ", ".join(
        f"{role} x{roles.count(role)}" if roles.count(role) > 1 else role for role in dict.fromkeys(roles)
    )


def _fsync_cells(system: str, r: dict[str, Any]) -> list[str]:
    return [
        num(r["total_s"]),
        num(r["ms_per_run"], 3),
        num(r["median_ms"]),
        num(r["p99_ms"]),
        num(r.get("fsyncs_per_run")),
        _counted_on(r),
        num(r.get("strace_fsyncs_per_run")),
        num(r.get("traced_ms_per_run"), 3),
        "; ".join(f"<= {limit} {TARGET_UNITS[k]}" for k, limit in FSYNC_TARGETS.get(system, {}).items()),
    ]


def fsyncs(
    rows: list[dict[str, Any]],
    systems: list[str],
    meta: dict[str, Any],
    ratios: Ratios,
    ratio_head: list[str],
) -> list[str]:
    """W3-fsync: the timed pass's ms per run beside the counted pass's fsyncs per run."""
    by = _by(rows, FSYNC)
    body = [
        line + ratios(FSYNC, by[line[0]].get("n"), line[0]) for line in _lines(by, systems, _fsync_cells, 9)
    ]
    if not body:
        return []
    n = meta.get("fsync_runs", TARGET_N)
    head = [
        "system",
        "total s",
        "ms/run",
        "run median ms",
        "run p99 ms",
        "fsyncs per run (perf)",
        "counted on",
        "under strace: fsyncs per run",
        "under strace: ms/run",
        "target",
        *ratio_head,
    ]
    return [
        "",
        f"### W3-fsync: {n:,} runs paused at once, then all approved ({meta['concurrency']} calls in "
        "flight), with the store's fsyncs",
        "",
        "fsyncs per run = fsync + fdatasync calls of the processes in 'counted on' over the pass's runs. "
        "The timed pass counts them with perf stat on the syscall tracepoints, which does not slow them; "
        "a second pass of the same size counts them with strace -f -c attached, which stops them at every "
        "system call: its ms/run shows the cost, and a store that batches fsyncs batches differently "
        f"when slowed. Targets (issue 36) at {TARGET_N:,} runs.",
        "",
        *table(head, body),
    ]


def _startup_cells(system: str, r: dict[str, Any]) -> list[str]:
    return [num(r["runtime_ms"]), num(r["first_pause_ms"]), str(r["processes"]), num(r["footprint_mb"], 0)]


def startup(rows: list[dict[str, Any]], systems: list[str]) -> list[str]:
    """Troupe rows: Runtime(...) to the first run's pause, each in a fresh process."""
    body = _lines(_by(rows, STARTUP), systems, _startup_cells, 4)
    if not body:
        return []
    head = ["system", "Runtime(...) ms", "to the first pause ms", "processes", "memory MB (PSS)"]
    return [
        "",
        "### Start-up: from Runtime(...) to the first run's pause (a fresh process per row)",
        "",
        "troupe (and Ray) imported before; the clock starts before the store and Runtime(...) are built and "
        "stops when generate() returns the run paused (on Ray, starting Ray and the agent's actor is inside "
        "it); processes and memory: the process tree right after.",
        "",
        *table(head, body),
    ]


def summary_columns(
    rows: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]
) -> list[tuple[str, list[str]]]:
    """The summary's columns for the workloads above, where the run has them: (title, a cell per system)."""
    slow, counted, started = _by(rows, SLOW_W1), _by(rows, FSYNC), _by(rows, STARTUP)
    columns = []
    if slow:
        cells = [
            cell(slow.get(s), lambda r: f"{num(r['overhead_median_ms'])} ({num(r['overhead_p99_ms'])})")
            for s in systems
        ]
        columns.append(("W1-300ms overhead median (p99) ms", cells))
    if counted:
        cells = [cell(counted.get(s), lambda r: f"{num(r['ms_per_run'], 2)} / {_fsyncs(r)}") for s in systems]
        columns.append((f"W3-fsync {meta.get('fsync_runs', TARGET_N):,}: ms/run / fsyncs per run", cells))
    if started:
        cells = [
            cell(started.get(s), lambda r: num(r["first_pause_ms"], 0)) if s in started else ""
            for s in systems
        ]
        columns.append(("start to 1st pause ms", cells))
    return columns


def fsyncs_per_run(row: dict[str, Any]) -> float | None:
    """perf's count on the timed pass; strace's where perf could not count."""
    perf = row.get("fsyncs_per_run")
    return perf if perf is not None else row.get("strace_fsyncs_per_run")


def _fsyncs(row: dict[str, Any]) -> str:
    return num(fsyncs_per_run(row)) + (" (strace)" if row.get("fsyncs_per_run") is None else "")


def _verdict(figure: float | None, limit: float) -> str:
    return "not measured" if figure is None else ("met" if figure <= limit else "not met")


def _fsync_targets(rows: list[dict[str, Any]]) -> list[list[str]]:
    by, out = _by(rows, FSYNC), []
    for s, limits in FSYNC_TARGETS.items():
        r = by.get(s)
        for field, limit in limits.items():
            if r is None or not _ok(r):
                out.append([f"W3-fsync {TARGET_UNITS[field]} <= {limit}", s, "—", "not measured"])
                continue
            figure = fsyncs_per_run(r) if field == "fsyncs_per_run" else r[field]
            shown = _fsyncs(r) if field == "fsyncs_per_run" else num(figure, 3)
            at = f" @{r['n']:,}" if r["n"] != TARGET_N else ""
            out.append([f"W3-fsync {TARGET_UNITS[field]} <= {limit}", s, shown + at, _verdict(figure, limit)])
    return out


def _sync_exit_targets(rows: list[dict[str, Any]]) -> list[list[str]]:
    by, out = _by(rows, SLOW_W1), []
    for s, limit in SYNC_EXIT_TARGET_MS.items():
        sync, exit_ = by.get(s), by.get(f"{s}-exit")
        gap = None
        if sync is not None and exit_ is not None and _ok(sync) and _ok(exit_):
            gap = sync["overhead_median_ms"] - exit_["overhead_median_ms"]
        out.append(
            [
                f"W1-300ms overhead, sync - exit <= {limit} ms",
                f"{s} / -exit",
                num(gap, 3),
                _verdict(gap, limit),
            ]
        )
    return out


def _ray_and_tail_targets(rows: list[dict[str, Any]]) -> list[list[str]]:
    w1 = [r for r in rows if r["workload"] == "w1" and _ok(r) and r["system"].startswith("troupe-ray-")]
    largest = max(w1, key=lambda r: r["footprint_mb"], default=None)
    tails = [
        r for r in rows if r["workload"] in ("w1", "w2") and _ok(r) and r["system"].startswith("troupe-")
    ]
    worst = max(tails, key=lambda r: r["p99_ms"] / r["median_ms"], default=None)
    out = [
        [
            f"embedded Ray's process tree after W1 <= {RAY_PSS_TARGET_MB} MB PSS",
            f"largest: {largest['system']}" if largest else "",
            f"{num(largest['footprint_mb'], 0)} MB" if largest else "—",
            _verdict(largest["footprint_mb"] if largest else None, RAY_PSS_TARGET_MB),
        ]
    ]
    spread = worst["p99_ms"] / worst["median_ms"] if worst else None
    where = f"worst: {worst['system']} {worst['workload'].upper()}" if worst else ""
    out.append(
        [f"p99 <= {TAIL_TARGET:g}x the median (W1, W2)", where, num(spread), _verdict(spread, TAIL_TARGET)]
    )
    return out


def targets(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 36's targets beside this run's figures (only where the run measured something new)."""
    if not any(r["workload"] in (SLOW_W1, FSYNC, STARTUP) for r in rows):
        return []
    body = _fsync_targets(rows) + _sync_exit_targets(rows) + _ray_and_tail_targets(rows)
    return [
        "",
        "### Issue 36's targets in this run",
        "",
        *table(["target", "row", "figure", ""], body),
    ]
