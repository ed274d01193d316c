"""Cells and markdown tables for the benchmark's reports (report.py, report_costs.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float | int):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def cell(row: dict[str, Any] | None, text: Callable[[dict[str, Any]], Any]) -> str:
    """A summary cell: ``text(row)``, or why there is none (not run, n/a, error)."""
    if row is None:
        return "not run"
    if row.get("status") != "ok":
        return "n/a" if row.get("status") == "unsupported" else "error"
    return str(text(row))


def ratio(peer: float | None, troupe: float | None) -> str:
    if not peer or not troupe:
        return "—"
    r = peer / troupe
    return f"{r:.1f}x" if r >= 0.95 else f"{r:.2f}x"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return out
