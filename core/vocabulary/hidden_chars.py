"""Characters a reader does not see that change what they read: control characters, format characters
(zero-width ones, bidirectional overrides, Unicode tags, the soft hyphen), line and paragraph
separators, and the few other characters that draw nothing (variation selectors, Hangul fillers).
U+202E makes "exe.txt" read "txt.exe"; a run of tag characters (U+E0020-U+E007F) spells out text no
screen shows, e.g. instructions for the model that reads an e-mail a person approved as "Hi Bob!".
Whatever shows a model's or a caller's text to a person (the terminal, the decision page, chat messages;
the inbox page has the same set in inbox.js) shows each of them as a visible mark instead."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

# Unicode categories that never draw a glyph of their own: controls, format characters (Cf: every
# zero-width and bidi character, tags, the soft hyphen), lone surrogates, and line/paragraph separators.
_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Characters of other categories that draw nothing: the combining grapheme joiner, Hangul fillers,
# Khmer's inherent vowels and the variation selectors (which can carry bytes, one per selector).
_INVISIBLE = frozenset(
    [
        0x034F,
        0x115F,
        0x1160,
        0x17B4,
        0x17B5,
        0x3164,
        0xFFA0,
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)


def hidden(char: str) -> bool:
    """Whether ``char`` is a character a reader would not see (see the module's docstring)."""
    return ord(char) in _INVISIBLE or unicodedata.category(char) in _CATEGORIES


def marked(text: str, mark: Callable[[str], str], keep: str = "") -> str:
    """``text`` with each hidden character (except those in ``keep``, e.g. a newline) replaced by
    ``mark(char)``."""
    # isprintable() is False for every category above (and for Co/Cn, which are checked one by one).
    if text.isprintable() and not any(ord(c) in _INVISIBLE for c in text):
        return text
    return "".join(mark(c) if c not in keep and hidden(c) else c for c in text)


def mark(char: str) -> str:
    """The visible mark that stands for a hidden character: ``⟦U+202E⟧``, as every screen shows it."""
    return f"\u27e6U+{ord(char):04X}\u27e7"


def visible(text: str, keep: str = "") -> str:
    """``text`` with each hidden character (except those in ``keep``) shown as its ``mark``."""
    return marked(text, mark, keep)


__all__ = ["hidden", "mark", "marked", "visible"]
