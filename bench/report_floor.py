"""W1 against its floor, and issue 42's targets for the cost of a cycle.

The floor of a W1 cycle (issue 42) is what no agent runtime can go under on this store and transport at
that moment: the cycle's writes, each at the raw durable write's cost (bench/raw_writes.py: a plain
``SET`` on the same redis-server, or a plain SQLite commit with the same ``synchronous``), plus the calls
it makes to the agent's actor, each at a bare call's cost. Both are measured in the row's own process
right after its timed cycles (``TroupeSystem.w1_parts``), interleaved with the store's own writes.
"""

from __future__ import annotations

import statistics
from typing import Any

from harness import FSYNC, SLOW_W1
from report_format import num, table

# The writes of one W1 cycle (tests/test_round_trips.py counts them): durability="sync" writes at the
# start, at the pause, at the decision's claim, after the tool and at the finish; "exit" the pause, the
# claim and the finish.
W1_WRITES = {"sync": 5, "exit": 3}
# Issue 42: W1's median at most this many times its floor, on these rows.
FLOOR_TARGET = 1.5
FLOOR_ROWS = ("troupe-ray-redis-always", "troupe-local-sqlite-full")
# Issue 42: W3 at 2,000 runs, 100 in flight (the W3-fsync pass), on local + SQLite FULL within this many
# times the in-memory row's.
W3_TARGET = ("troupe-local-sqlite-full", "troupe-local-memory", 1.3)
# Issue 42: durability="sync" within this many ms of "exit" at W1-300ms, on the median of five runs.
SYNC_EXIT = ("troupe-ray-redis-always", 0.3)
# W1-300ms rows of that pair after the run's first pass (run_all.py --slow-repeats).
SLOW_REPEAT = f"{SLOW_W1}-repeat"


def w1_writes(system: str) -> int:
    return W1_WRITES["exit" if system.endswith("-exit") else "sync"]


def floor_ms(row: dict[str, Any]) -> float | None:
    """Writes x the raw durable write + actor calls x a bare call, or None without the raw write."""
    parts = row.get("parts") or {}
    if "raw_write_ms" not in parts:
        return None
    calls = parts["actor_calls_per_cycle"] * parts.get("actor_call_ms", 0.0)
    return float(w1_writes(row["system"]) * parts["raw_write_ms"] + calls)


def _ok(row: dict[str, Any] | None) -> bool:
    return row is not None and row.get("status") == "ok"


def w1_floor(rows: list[dict[str, Any]], present: list[str]) -> list[str]:
    """W1's median beside its floor and beside the sum of what a cycle is made of (the store's own
    writes, the actor calls, and troupe-local-memory's median: the cycle's own work in-process)."""
    by = {r["system"]: r for r in rows if r["workload"] == "w1" and _ok(r)}
    in_memory = by.get("troupe-local-memory")
    body = []
    for s in [s for s in present if s in by and by[s]["durable"] and "parts" in by[s]]:
        row, parts = by[s], by[s]["parts"]
        calls, call_ms = parts["actor_calls_per_cycle"], parts.get("actor_call_ms", 0.0)
        own = w1_writes(s) * parts["store_write_ms"] + calls * call_ms
        total = own + in_memory["median_ms"] if in_memory else None
        floor = floor_ms(row)
        body.append(
            [
                s,
                str(w1_writes(s)),
                num(parts.get("raw_write_ms"), 3),
                num(parts["store_write_ms"], 3),
                str(calls),
                num(call_ms, 3) if calls else "",
                num(floor),
                num(total),
                num(row["median_ms"]),
                f"{row['median_ms'] / floor:.2f}x" if floor else "—",
                f"<= {FLOOR_TARGET}x" if s in FLOOR_ROWS else "",
            ]
        )
    if not body:
        return []
    head = [
        "system",
        "writes per cycle",
        "raw write ms",
        "store write ms",
        "actor calls per cycle",
        "actor call ms",
        "floor ms",
        "sum of parts ms",
        "median ms",
        "median / floor",
        "target",
    ]
    return [
        "",
        "### W1 against its floor, and what a cycle is made of",
        "",
        "floor = writes per cycle x the raw durable write (the W1 run's paused state as a plain SET on the "
        "same redis-server, or one plain SQLite commit of it with the same synchronous, beside the store's "
        "file; bench/raw_writes.py) + the actor calls one cycle makes x a bare call to the agent's actor: "
        "what no runtime can go under on this store and transport. sum of parts = the same with this "
        "store's own writes (insert, compare-and-set update and delete of that state) + troupe-local-"
        "memory's W1 median (the cycle's own work, in-process, in memory). Each part is measured in the "
        "row's process right after its timed cycles, raw and own writes interleaved.",
        "",
        *table(head, body),
    ]


def _verdict(figure: float | None, limit: float) -> str:
    return "not measured" if figure is None else ("met" if figure <= limit else "not met")


def _floor_targets(rows: list[dict[str, Any]]) -> list[list[str]]:
    by = {r["system"]: r for r in rows if r["workload"] == "w1" and _ok(r)}
    out = []
    for s in FLOOR_ROWS:
        row = by.get(s)
        floor = floor_ms(row) if row is not None else None
        times = row["median_ms"] / floor if row is not None and floor else None
        shown = f"{times:.2f}x ({num(row['median_ms'])} / {num(floor)} ms)" if times and row else "—"
        out.append([f"W1 median <= {FLOOR_TARGET}x its floor", s, shown, _verdict(times, FLOOR_TARGET)])
    return out


def _w3_target(rows: list[dict[str, Any]]) -> list[str]:
    system, base, limit = W3_TARGET
    by = {r["system"]: r for r in rows if r["workload"] == FSYNC and _ok(r)}
    mine, theirs = by.get(system), by.get(base)
    times = mine["ms_per_run"] / theirs["ms_per_run"] if mine and theirs else None
    shown = (
        f"{times:.2f}x ({num(mine['ms_per_run'], 3)} / {num(theirs['ms_per_run'], 3)} ms/run)"
        if times
        else "—"
    )
    n = f" @{mine['n']:,}" if mine else ""
    return [f"W3{n}, 100 in flight: <= {limit}x {base}", system, shown, _verdict(times, limit)]


def _sync_exit_target(rows: list[dict[str, Any]]) -> list[str]:
    """``"sync"``'s W1-300ms overhead minus ``"exit"``'s, the median over every pair of runs in the
    rows (run_all.py's ``--slow-repeats`` measures the two rows that many times, in turn)."""
    system, limit = SYNC_EXIT
    slow = [r for r in rows if r["workload"] in (SLOW_W1, SLOW_REPEAT) and _ok(r)]
    sync = [r for r in slow if r["system"] == system]
    exit_ = [r for r in slow if r["system"] == f"{system}-exit"]
    gaps = [a["overhead_median_ms"] - b["overhead_median_ms"] for a, b in zip(sync, exit_, strict=False)]
    gap = statistics.median(gaps) if gaps else None
    runs = f"median of {len(gaps)}: " + ", ".join(num(g, 2) for g in gaps) if len(gaps) > 1 else num(gap, 3)
    return [f"W1-300ms overhead, sync - exit <= {limit} ms", f"{system} / -exit", runs, _verdict(gap, limit)]


def targets(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 42's targets for the cost of a cycle beside this run's figures."""
    body = [*_floor_targets(rows), _w3_target(rows), _sync_exit_target(rows)]
    if all(line[-1] == "not measured" for line in body):
        return []
    return [
        "",
        "### Issue 42's targets for a cycle's cost in this run",
        "",
        *table(["target", "row", "figure", ""], body),
    ]


__all__ = [
    "FLOOR_TARGET",
    "SLOW_REPEAT",
    "SYNC_EXIT",
    "W1_WRITES",
    "floor_ms",
    "targets",
    "w1_floor",
    "w1_writes",
]
