"""Tables (markdown, also printed) from run_all.py's result rows; the chart is report_chart.py."""

from __future__ import annotations

import statistics
from typing import Any

import report_costs
import report_floor
from report_format import cell, num, ratio, table
from report_scale import SCALE, scale

RATIO_HELP = (
    "x = the peer's time / this Troupe configuration's time: above 1 Troupe is faster, below 1 slower"
)


def _w4_ratio(peer: dict[str, Any] | None, troupe: dict[str, Any] | None) -> str:
    if not peer or not troupe or peer.get("status") != "ok" or troupe.get("status") != "ok":
        return "—"
    after = ratio(peer["list_s"] + peer["decide_s"], troupe["list_s"] + troupe["decide_s"])
    return f"{ratio(peer['total_s'], troupe['total_s'])} / {after}"


def _metric(row: dict[str, Any]) -> float | None:
    if row.get("status") != "ok":
        return None
    return row.get("median_ms") if row["workload"] in ("w1", "w2") else row.get("total_s")


def _best_durable(rows: list[dict[str, Any]], workload: str) -> dict[str, Any] | None:
    """The fastest durable peer's row of a W1/W2 workload (the issue's yardstick), or None."""
    peers = [
        r
        for r in rows
        if r["workload"] == workload
        and r.get("durable")
        and r.get("status") == "ok"
        and not r["system"].startswith("troupe-")
    ]
    return min(peers, key=lambda r: r["median_ms"], default=None)


def _latency_table(
    rows: list[dict[str, Any]], present: list[str], workload: str, ratios: Any, ratio_head: list[str]
) -> list[str]:
    by = {r["system"]: r for r in rows if r["workload"] == workload}
    best = _best_durable(rows, workload)
    body = []
    for s in present:
        r = by[s]
        if r.get("status") == "ok":
            versus = ratio(best["median_ms"], r["median_ms"]) if best and s.startswith("troupe-") else ""
            spread = r.get("p99_over_median") or r["p99_ms"] / r["median_ms"]
            cells = [
                num(r["median_ms"]),
                num(r["p99_ms"]),
                f"{spread:.1f}",
                _machine_tail(r),
                num(r["footprint_mb"], 0),
                versus,
            ]
        else:
            cells = ["n/a" if r.get("status") == "unsupported" else "error", "", "", "", "", ""]
        body.append([s, r.get("durability", ""), *cells, *ratios(s)])
    best_head = f"{best['system']} / this" if best else "best durable peer / this"
    return table(
        [
            "system",
            "durability",
            "median ms",
            "p99 ms",
            "p99/median",
            "machine p99/median",
            "memory MB (PSS)",
            best_head,
            *ratio_head,
        ],
        body,
    )


def _machine_tail(row: dict[str, Any]) -> str:
    """The p99/median of equal 1 ms pieces of pure-Python work in the row's process before it opened the
    system (machine_probe.cpu_tail): the spread the machine alone gave its work at that moment."""
    tail = row.get("probe", {}).get("cpu_tail")
    return "" if tail is None else f"{tail:.1f}"


def _machine(rows: list[dict[str, Any]], systems: list[str], started: float | None) -> list[str]:
    """One line per benchmark process: what it ran and the machine's speed when it started."""
    processes: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in rows:
        if "probe" in r:
            processes.setdefault((r["system"], r["probe"]["at"]), []).append(r)
    body = []
    for (system, at), group in sorted(processes.items(), key=lambda item: item[0][1]):
        probe = group[0]["probe"]
        ran = ", ".join(
            dict.fromkeys(r["workload"].upper() + (f" {r['n']:,}" if r.get("n") else "") for r in group)
        )
        minutes = f"{(at - started) / 60:.1f}" if started else ""
        body.append(
            [
                minutes,
                system,
                ran,
                num(probe["cpu_ms"]),
                _machine_tail(group[0]),
                num(probe["fsync_ms_p50"], 3),
                num(probe["fsync_ms_p99"], 3),
            ]
        )
    return table(
        ["minute", "system", "ran", "cpu probe ms", "cpu p99/median", "fsync p50 ms", "fsync p99 ms"],
        [b for b in body if b[1] in systems],
    )


def w3_growth(rows: list[dict[str, Any]], sizes: list[int]) -> dict[str, dict[str, Any]]:
    """Per system: W3's ms per run at each size it ran, and the largest size's over the smallest's
    (1.0 = linear; the issue's target is within 15%). Where the smallest size was run again just before
    the largest, in its process and on its store (run_all.with_reference), the ratio is taken against
    the median of those runs rather than against a run in another process a whole phase earlier."""
    found: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["workload"] == "w3" and r.get("status") == "ok" and r.get("n") in sizes:
            found.setdefault(r["system"], {"ms_per_run": {}})["ms_per_run"][r["n"]] = r["ms_per_run"]
    for r in rows:
        if r["workload"] == "w3-reference" and r.get("status") == "ok" and r["system"] in found:
            found[r["system"]].setdefault("reference_runs", {}).setdefault(r["n"], []).append(r["ms_per_run"])
    for entry in found.values():
        runs = entry.get("reference_runs", {})
        entry["reference_ms_per_run"] = {n: round(statistics.median(ms), 3) for n, ms in runs.items()}
        per_run = [entry["ms_per_run"][n] for n in sorted(entry["ms_per_run"])]
        smallest = next(iter(entry["reference_ms_per_run"].values()), per_run[0])
        entry["growth"] = round(per_run[-1] / smallest, 3) if len(per_run) > 1 else None
    return found


def _linearity(rows: list[dict[str, Any]], systems: list[str], sizes: list[int]) -> list[str]:
    growth = w3_growth(rows, sizes)
    body = []
    for s in [s for s in systems if s in growth]:
        per_run = growth[s]["ms_per_run"]
        cells = [num(per_run[n], 3) if n in per_run else "not run" for n in sizes]
        reference = growth[s]["reference_ms_per_run"]
        runs = growth[s].get("reference_runs", {}).get(sizes[0], [])
        spread = f" ({num(min(runs), 3)} to {num(max(runs), 3)}, {len(runs)} runs)" if len(runs) > 1 else ""
        cells.insert(-1, num(reference[sizes[0]], 3) + spread if sizes[0] in reference else "—")
        body.append([s, *cells, num(growth[s]["growth"])])
    head = [f"ms/run N={n:,}" for n in sizes]
    head.insert(-1, f"ms/run N={sizes[0]:,} just before N={sizes[-1]:,}: median (range)")
    return table(["system", *head, "largest N run / smallest (just before it where run)"], body)


def summary(rows: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]) -> list[str]:
    """One line per system and every workload in it (docs/benchmarks.md's table): W1/W2 median (p99)
    ms, W3 ms per run at each size it ran, W4's total from the fresh process's spawn, memory during W1."""
    by = {(r["workload"], r.get("n"), r["system"]): r for r in rows}
    sizes = sorted(meta["runs"])
    # W1's row states it; a run without W1 takes it from the system's first row that does.
    stated = {r["system"]: r["durability"] for r in reversed(rows) if r.get("durability")}
    stated.update({s: r["durability"] for (w, _, s), r in by.items() if w == "w1" and r.get("durability")})

    def latency(workload: str, s: str) -> str:
        return cell(by.get((workload, None, s)), lambda r: f"{num(r['median_ms'])} ({num(r['p99_ms'])})")

    def per_run(s: str) -> str:
        ran = [(n, by[("w3", n, s)]) for n in sizes if ("w3", n, s) in by]
        shown = [f"{cell(r, lambda r: num(r['ms_per_run'], 2))} @{n:,}" for n, r in ran]
        return " / ".join(shown) or "not run"

    body = [
        [
            s,
            stated.get(s, ""),
            latency("w1", s),
            latency("w2", s),
            per_run(s),
            cell(by.get(("w4", meta["w4_runs"], s)), lambda r: f"{num(r['total_s'])} s"),
            cell(by.get(("w1", None, s)), lambda r: num(r["footprint_mb"], 0)),
        ]
        for s in systems
    ]
    head = [
        "system",
        "durability",
        "W1 median (p99) ms",
        "W2 median (p99) ms",
        "W3 ms/run @N",
        f"W4 {meta['w4_runs']:,} runs",
        "memory MB",
    ]
    for title, cells in report_costs.summary_columns(rows, systems, meta):  # runs from issue 36 on
        head.append(title)
        for line, text in zip(body, cells, strict=True):
            line.append(text)
    return table(head, body)


def tables(rows: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]) -> str:
    troupes = [s for s in systems if s.startswith("troupe-")]
    # Peers' ratio columns: against the configurations named in meta (all Troupe rows in older results).
    troupes = [s for s in meta.get("ratio_against", troupes) if s in troupes]
    ratio_head = [f"vs {t.removeprefix('troupe-')}" for t in troupes]
    by = {(r["workload"], r.get("n"), r["system"]): r for r in rows}
    out: list[str] = ["", "### Summary", "", *summary(rows, systems, meta)]

    def ratios(workload: str, n: Any, system: str) -> list[str]:
        if system.startswith("troupe-"):
            return ["" for _ in troupes]
        peer = by.get((workload, n, system))
        if workload == "w4":
            return [_w4_ratio(peer, by.get((workload, n, t))) for t in troupes]
        return [
            ratio(
                _metric(peer) if peer else None,
                _metric(by[workload, n, t]) if (workload, n, t) in by else None,
            )
            for t in troupes
        ]

    def missing(row: dict[str, Any] | None, width: int) -> list[str]:
        if row is None:
            return ["not run"] + [""] * (width - 1)
        label = "n/a" if row.get("status") == "unsupported" else "error"
        return [label] + [""] * (width - 1)

    for workload, title in (("w1", "W1 approval cycle"), ("w2", "W2 supervisor -> subagent -> approval")):
        present = [s for s in systems if (workload, None, s) in by]
        if not present:
            continue
        out += [
            "",
            f"### {title} ({meta['cycles']} cycles after {meta['warmup']} warm-up, one at a time)",
            "",
        ]
        out += _latency_table(rows, present, workload, lambda s, w=workload: ratios(w, None, s), ratio_head)
    out += report_costs.slow_w1(rows, systems, meta)

    for n in meta["runs"]:
        present = [s for s in systems if ("w3", n, s) in by]
        if not present:
            continue
        out += [
            "",
            f"### W3 {n:,} runs paused at once, then all approved ({meta['concurrency']} calls in flight)",
            "",
        ]
        body = []
        for s in present:
            r = by["w3", n, s]
            if r.get("status") == "ok":
                cells = [
                    num(r["pause_s"]),
                    num(r["approve_s"]),
                    num(r["total_s"]),
                    num(r["ms_per_run"], 3),
                    num(r["median_ms"]),
                    num(r["p99_ms"]),
                    num(r["rss_kb_per_paused_run"], 1),
                    num(r.get("heap_kb_per_paused_run"), 1),
                    num(r.get("store_bytes_per_paused_run"), 0),
                ]
            else:
                cells = missing(r, 9)
            body.append([s, *cells, *ratios("w3", n, s)])
        out += table(
            [
                "system",
                "pause all s",
                "approve all s",
                "total s",
                "ms/run",
                "run median ms",
                "run p99 ms",
                "RSS KB/paused run",
                "heap KB/paused run",
                "store B/paused run",
                *ratio_head,
            ],
            body,
        )

    if len(meta["runs"]) > 1 and any(r["workload"] == "w3" for r in rows):
        out += [
            "",
            "### W3 per-run time by N (total time / N; linear = the same per run)",
            "",
            *_linearity(rows, systems, sorted(meta["runs"])),
        ]
        skipped = {s: n for s, n in meta.get("w3_sizes", {}).items() if n != sorted(meta["runs"])}
        if skipped:
            out += [
                "",
                "W3 sizes run by each system where not all: "
                + "; ".join(f"{s} N={', '.join(f'{n:,}' for n in ns)}" for s, ns in skipped.items()),
            ]

    out += report_costs.fsyncs(rows, systems, meta, ratios, ratio_head)
    out += report_floor.w1_floor(rows, [s for s in systems if ("w1", None, s) in by])

    present = [s for s in systems if ("w4", meta["w4_runs"], s) in by]
    if present:
        out += [
            "",
            f"### W4 restart: {meta['w4_runs']:,} paused runs, a fresh process lists and approves them all",
            "",
        ]
        body = []
        for s in present:
            r = by["w4", meta["w4_runs"], s]
            if r.get("status") == "ok":
                cells = [
                    num(r["startup_s"]),
                    num(r["list_s"]),
                    num(r["decide_s"]),
                    num(r["total_s"]),
                    num(r["ms_per_run"], 3),
                ]
            else:
                cells = missing(r, 5)
            body.append([s, *cells, *ratios("w4", meta["w4_runs"], s)])
        out += table(
            ["system", "startup s", "list s", "decide s", "total s", "ms/run after start", *ratio_head], body
        )
    out += report_costs.startup(rows, systems) + report_costs.targets(rows) + report_floor.targets(rows)
    judged = [t for r in rows if r.get("workload") == SCALE for t in r.get("targets", [])]
    out += scale(rows, list(dict.fromkeys(judged)))

    out += [
        "",
        f"Ratios: {RATIO_HELP}. '<peer> / this' is the fastest durable peer's median over the Troupe "
        "row's. p99/median: the tail's spread (target <= 3 for Troupe rows); machine p99/median: that of "
        "equal 1 ms pieces of pure-Python work in the same process just before (bench/machine_probe.py). "
        "W1/W2 on the median, W3 on the total time, W4 on the total time from the fresh process's spawn "
        "/ on list + decide only (without process start-up).",
    ]
    machine = _machine(rows, systems, meta.get("started_at"))
    if len(machine) > 2:
        out += [
            "",
            "### The machine when each process started (bench/machine_probe.py)",
            "",
            "cpu probe: a fixed piece of pure-Python work, median of 15 (higher = a slower machine at that "
            "moment); cpu p99/median: the same work in pieces of about 1 ms, back to back for 1.5 s (the "
            "tail the machine alone gives equal work); fsync: 200 appends of 4 KB to a file in the work "
            "directory, each fsynced.",
            "",
            *machine,
        ]
    gaps = [r for r in rows if r.get("status") != "ok"]
    if gaps:
        out += ["", "Not measured:"]
        # One line per (system, status, reason), naming the workloads it applies to.
        grouped: dict[tuple[str, str, str], list[str]] = {}
        for r in gaps:
            where = grouped.setdefault((r["system"], r.get("status", ""), r.get("note", "")), [])
            if r["workload"].upper() not in where:
                where.append(r["workload"].upper())
        for (system, status, note), workloads in grouped.items():
            out.append(f"- {system} {', '.join(workloads)}: {status} — {note}")
    return "\n".join(out).strip() + "\n"
