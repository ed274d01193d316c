"""What the operator commands print: text made safe for a terminal, tables, and a progress line.

Run ids, call ids, arguments and reasons come from callers and from models, so anything printed is first
passed through ``safe``: control characters (escape sequences could rewrite the screen or the title) and
invisible or direction-changing characters (which make text read other than it is) are shown as escapes.
"""

from __future__ import annotations

import shutil
import sys
from datetime import datetime
from typing import TextIO

from troupe.core.vocabulary.hidden_chars import marked


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"  # as Python writes them


def safe(text: object, keep: str = "") -> str:
    """``text`` with control, invisible and bidi characters written as Python writes them (``\\xNN``,
    ``\\uNNNN``, ``\\UNNNNNNNN``), except the characters in ``keep`` (e.g. newlines in a model's answer)."""
    return marked(str(text), _escape, keep)


class Progress:
    """A one-line status on stderr while something slow happens (only on a terminal)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()

    def note(self, text: str) -> None:
        if self.live:
            self.stream.write(f"\r\x1b[2K{safe(text)}…")
            self.stream.flush()

    def done(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def table(headers: list[str], rows: list[list[str]], out: TextIO, keep: int = 2) -> None:
    """Columns sized to their contents; to fit the terminal the widest shrink (with …), never the first
    ``keep`` (ids, which must stay whole to be copied into the next command). Cells are made ``safe``."""
    rows = [[safe(cell) for cell in row] for row in rows]
    # Piped output is for reading by programs (or grep): nothing is cut there.
    width = shutil.get_terminal_size((120, 24)).columns if out.isatty() else 1 << 16
    sizes = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    while sum(sizes) + 2 * (len(sizes) - 1) > width:
        widest = max(range(keep, len(sizes)), key=lambda i: sizes[i], default=None)
        if widest is None or sizes[widest] <= 10:
            break
        sizes[widest] -= 1

    def line(cells: list[str]) -> str:
        return "  ".join(fit(c, n).ljust(n) for c, n in zip(cells, sizes, strict=True)).rstrip()

    out.write(line(headers) + "\n" + line(["-" * n for n in sizes]) + "\n")
    for row in rows:
        out.write(line(row) + "\n")


def fit(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def when(at: datetime | None) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S") if at else "-"


__all__ = ["Progress", "fit", "safe", "table", "when"]
