"""The PNG chart of run_all.py's result rows: speed, tail, memory of each system's processes, W3 per
run at each N, W4. Needs matplotlib (the ``bench`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import FSYNC, SLOW_W1, STARTUP
from report_costs import fsyncs_per_run

# By key prefix (the longest that matches): a family's configurations share a hue.
COLORS = {
    "troupe-ray-redis": "#08306b",
    "troupe-ray-sqlite": "#2171b5",
    "troupe-ray-memory": "#4292c6",
    "troupe-local-redis": "#3f4fa0",
    "troupe-local-sqlite": "#5a7fd0",
    "troupe-local-memory": "#9ecae1",
    "langgraph-sqlite": "#1b7a1b",
    "langgraph-memory": "#8fd18f",
    "openai-agents-json": "#404040",
    "openai-agents-memory": "#a8a8a8",
    "pydantic-ai-json": "#b0186a",
    "pydantic-ai-memory": "#f29cc8",
    "mastra": "#d95f02",
}
Series = list[tuple[str, list[float | None], str]]  # (legend, one value per system, hatch)


def color(system: str) -> str:
    matches = [k for k in COLORS if system.startswith(k)]
    return COLORS[max(matches, key=len)] if matches else "#999999"


def _bars(ax: Any, labels: list[str], series: Series, log: bool) -> None:
    """Grouped bars: one group per system, one bar per series (None = not measured, drawn as n/a)."""
    xs = list(range(len(labels)))
    width = 0.8 / len(series)
    colors = [color(s) for s in labels]
    positive = [v for _, values, _ in series for v in values if v and v > 0]
    for k, (name, values, hatch) in enumerate(series):
        offsets = [x - 0.4 + width * (k + 0.5) for x in xs]
        heights = [v if v and v > 0 else 0.0 for v in values]  # NaN > 0 is False
        ax.bar(offsets, heights, width=width * 0.95, color=colors, hatch=hatch, edgecolor="white", label=name)
        for x, v in zip(offsets, values, strict=True):
            if v is None or v != v:  # None: the system cannot (or failed); NaN: not run at this size
                mark = "n/a" if v is None else "-"
                ax.text(
                    x, 0.02, mark, transform=ax.get_xaxis_transform(), ha="center", fontsize=6, color="#b00"
                )
            elif v > 0:
                ax.text(x, v, f"{v:.3g}", ha="center", va="bottom", fontsize=6)
            else:  # none at all (no fsync from a store that never fsyncs), where a bar cannot show it
                ax.text(x, 0.02, "0", transform=ax.get_xaxis_transform(), ha="center", fontsize=6)
    if log and positive:
        ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
    if len(series) > 1:
        ax.legend(fontsize=7)


def _panels(rows: list[dict[str, Any]], systems: list[str], meta: dict[str, Any]) -> list[Any]:
    """(title, unit, labels, series, log scale) per panel, in reading order."""
    by = {(r["workload"], r.get("n"), r["system"]): r for r in rows}

    def values(workload: str, n: Any, field: str, among: list[str]) -> list[float | None]:
        out = []
        for s in among:
            r = by.get((workload, n, s))
            out.append(float("nan") if r is None else r.get(field) if r.get("status") == "ok" else None)
        return out

    panels = []
    for workload, title in (("w1", "W1 approval cycle"), ("w2", "W2 supervisor -> subagent -> approval")):
        labels = [s for s in systems if (workload, None, s) in by]
        if labels:
            series = [
                ("median", values(workload, None, "median_ms", labels), ""),
                ("p99", values(workload, None, "p99_ms", labels), "//"),
            ]
            panels.append((f"{title}, ms (log)", "ms", labels, series, True))
    labels = [s for s in systems if ("w1", None, s) in by]
    if labels:
        title = "Memory of each system's processes during W1 (PSS: driver, Ray, redis-server)"
        series = [("PSS MB", values("w1", None, "footprint_mb", labels), "")]
        panels.append((title, "MB", labels, series, False))
    sizes = sorted(meta.get("runs", []))
    labels = [s for s in systems if any(("w3", n, s) in by for n in sizes)]
    if labels:
        series = [
            (f"N={n:,}", values("w3", n, "ms_per_run", labels), h)
            for n, h in zip(sizes, ["", "//", "..", "xx"], strict=False)
        ]
        panels.append(
            (
                "W3 N paused at once, then approved: ms per run (log; equal = linear; - = not run)",
                "ms per run",
                labels,
                series,
                True,
            )
        )
        largest = {s: max(n for n in sizes if ("w3", n, s) in by) for s in labels}

        def at_largest(field: str) -> list[float | None]:
            found = [by["w3", largest[s], s] for s in labels]
            return [r.get(field) if r.get("status") == "ok" else None for r in found]

        rss, heap = at_largest("rss_kb_per_paused_run"), at_largest("heap_kb_per_paused_run")
        series = [("RSS growth", rss, ""), ("driver heap (tracemalloc)", heap, "//")]
        panels.append(
            ("W3 memory per paused run, KB (each system at its largest N)", "KB", labels, series, False)
        )
    return panels + _cost_panels(values, by, systems, meta)


def _cost_panels(values: Any, by: dict[Any, Any], systems: list[str], meta: dict[str, Any]) -> list[Any]:
    """W1-300ms's overhead, W3-fsync's ms and fsyncs per run, Troupe's start-up (runs from issue 36 on)."""
    panels = []
    labels = [s for s in systems if (SLOW_W1, None, s) in by]
    if labels:
        series = [
            ("median", values(SLOW_W1, None, "overhead_median_ms", labels), ""),
            ("p99", values(SLOW_W1, None, "overhead_p99_ms", labels), "//"),
        ]
        title = (
            f"W1 with a {meta.get('model_turn_ms', 300):g} ms/turn model: ms beyond the model's time (log)"
        )
        panels.append((title, "ms", labels, series, True))
    n = meta.get("fsync_runs")
    labels = [s for s in systems if (FSYNC, n, s) in by]
    if labels:
        series = [("ms/run", values(FSYNC, n, "ms_per_run", labels), "")]
        panels.append(
            (f"W3-fsync {n:,} runs, 100 in flight: ms per run (log)", "ms per run", labels, series, True)
        )
        counted = [by[FSYNC, n, s] for s in labels]
        series = [
            ("fsyncs per run", [fsyncs_per_run(r) if r.get("status") == "ok" else None for r in counted], "")
        ]
        title = f"W3-fsync {n:,} runs: fsync + fdatasync per run on the store's process (perf)"
        panels.append((title, "fsyncs per run", labels, series, False))
    labels = [s for s in systems if (STARTUP, None, s) in by]
    if labels:
        series = [("to the first pause", values(STARTUP, None, "first_pause_ms", labels), "")]
        panels.append(
            ("Start-up: Runtime(...) to the first run's pause, ms (log)", "ms", labels, series, True)
        )
    return panels


def _w4(ax: Any, rows: list[dict[str, Any]], systems: list[str], n: int) -> None:
    """Stacked: start-up, list, decide, from the fresh process's spawn."""
    by = {r["system"]: r for r in rows if r["workload"] == "w4" and r.get("n") == n}
    labels = [s for s in systems if s in by]
    xs = list(range(len(labels)))
    bottoms = [0.0] * len(labels)
    for part, hatch in (("startup_s", "//"), ("list_s", ".."), ("decide_s", "")):
        heights = [by[s][part] if by[s].get("status") == "ok" else 0.0 for s in labels]
        ax.bar(
            xs,
            heights,
            bottom=bottoms,
            color=[color(s) for s in labels],
            hatch=hatch,
            edgecolor="white",
            label=part.removesuffix("_s"),
        )
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for x, s in zip(xs, labels, strict=True):
        if by[s].get("status") == "ok":
            ax.text(x, by[s]["total_s"], f"{by[s]['total_s']:.3g}", ha="center", va="bottom", fontsize=6)
        else:
            ax.text(x, 0.02, "n/a", transform=ax.get_xaxis_transform(), ha="center", fontsize=7, color="#b00")
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=7)
    ax.set_title(f"W4 restart, {n:,} paused runs: s until all decided", fontsize=9)
    ax.set_ylabel("s from the fresh process's spawn")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(axis="y", alpha=0.3)


def chart(rows: list[dict[str, Any]], systems: list[str], meta: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(rows, systems, meta)
    w4 = any(r["workload"] == "w4" for r in rows)
    cols = 3
    count = max(1, len(panels) + (1 if w4 else 0))  # one empty panel when nothing was measured
    fig, axes = plt.subplots(
        (count + cols - 1) // cols,
        cols,
        figsize=(7.2 * cols, 5.0 * ((count + cols - 1) // cols)),
        squeeze=False,
    )
    flat = list(axes.flat)
    for ax, (title, unit, labels, series, log) in zip(flat, panels, strict=False):
        _bars(ax, labels, series, log)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
    if w4:
        _w4(flat[len(panels)], rows, systems, meta["w4_runs"])
    for ax in flat[count:]:
        ax.axis("off")
    fig.suptitle(
        f"Troupe vs peers, same scripted workloads, scripted models ({meta['machine']}; {meta['mode']} mode, "
        f"W1/W2 API: {meta.get('api', 'stream')}; {meta.get('started', '')}, "
        f"commit {meta.get('git', {}).get('commit', '?')[:10]})",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))  # room for the title
    fig.savefig(path, dpi=110)
    plt.close(fig)
