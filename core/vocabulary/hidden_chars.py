"""Characters a reader does not see that change what they read: control characters, zero-width ones and
bidirectional overrides (U+202E makes "exe.txt" read "txt.exe"). Whatever shows a model's or a caller's
text to a person (the terminal, the decision page; the inbox page has the same set in inbox.js) shows each
of them as a visible mark instead."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

_INVISIBLE = frozenset(
    [
        0x061C,
        *range(0x200B, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2060, 0x2065),
        *range(0x2066, 0x206A),
        0xFEFF,
    ]
)


def hidden(char: str) -> bool:
    return ord(char) in _INVISIBLE or unicodedata.category(char) in ("Cc", "Cs")


def marked(text: str, mark: Callable[[str], str], keep: str = "") -> str:
    """``text`` with each hidden character (except those in ``keep``, e.g. a newline) replaced by
    ``mark(char)``."""
    if text.isprintable() and not any(ord(c) in _INVISIBLE for c in text):
        return text
    return "".join(mark(c) if c not in keep and hidden(c) else c for c in text)


__all__ = ["hidden", "marked"]
