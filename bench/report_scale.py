"""The scale workload's table (bench/inbox_scale.py, run by run_all.py as workload "scale"): the inbox and
approvals with 200, 2,000 and 100,000 runs waiting, and issue 42's targets met or not."""

from __future__ import annotations

from typing import Any

from report_format import table

SCALE = "scale"


def _cell(row: dict[str, Any], name: str) -> str:
    found = row.get(name)
    return f"{found['median_ms']:.2f} ({found['p90_ms']:.2f})" if found else ""


def scale(rows: list[dict[str, Any]], targets: list[str]) -> list[str]:
    """The rows of workload "scale" as one table, then the targets as inbox_scale.py judged them."""
    mine = sorted((r for r in rows if r.get("workload") == SCALE), key=lambda r: (r["system"], r["n"]))
    if not mine:
        return []
    body = [
        [
            r["system"],
            f"{r['n']:,}",
            f"{r['seed_s']:.1f}",
            _cell(r, "inbox_first_page"),
            _cell(r, "inbox_deep_page"),
            _cell(r, "pause_to_event"),
            _cell(r, "approval_read_from_store"),
            _cell(r, "approval_kept_by_host"),
            "{before} / {seeded} / {end}".format(**r["host_rss_mb"]),
        ]
        for r in mine
    ]
    head = [
        "system",
        "runs waiting",
        "seed s",
        "inbox 1st page ms",
        "inbox deep page ms",
        "pause to event ms",
        "approval, run read ms",
        "approval, run kept ms",
        "host RSS MB before / seeded / end",
    ]
    return [
        "",
        "### Scale: the inbox and approvals with many runs waiting (bench/inbox_scale.py)",
        "",
        "Median (p90). Runs seeded through the store (store.create_run, 500 at a time); inbox pages of 100 "
        "over HTTP; pause to event: generate() returning to the inbox stream's frame (server looks every "
        "20 ms); approval one at a time, of a run the host never kept (read by id) and of one it kept.",
        "",
        *table(head, body),
        "",
        *[f"- {line}" for line in targets],
    ]


__all__ = ["SCALE", "scale"]
