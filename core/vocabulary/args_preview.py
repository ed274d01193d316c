"""What a person is shown of a call's arguments where a line or two of text is all there is room for (an
MCP elicitation's message, an AG-UI interrupt's): every key, each long value cut where it is, with a
mark saying how much was cut, and each hidden character marked (``troupe.core.vocabulary.hidden_chars``).

A model may pad an early argument with pages of text so that the one that matters comes after the
point where a message is cut: cutting each value in place keeps every key in view, as the inbox's
cards do. The marks are ``⟦…⟧``, like the marks of hidden characters.

For example ``{"memo": "<500 characters>", "to": "IBAN-666"}`` is shown as
``{"memo": "<its first 200 characters>⟦… 300 more characters⟧", "to": "IBAN-666"}``.
"""

from __future__ import annotations

import json
from typing import Any

from troupe.core.vocabulary.hidden_chars import visible

# A text is cut after this many characters, a list after this many items, an object after this many
# keys; after this many values in all, the rest is only counted.
CHARS = 200
ITEMS = 20
KEYS = 100
VALUES = 400


def args_preview(value: Any) -> str:
    """``value`` as one line of JSON for a person, long values cut in place (see the module)."""
    out: list[str] = []
    budget = VALUES

    def text(item: str) -> None:
        if len(item) <= CHARS:
            out.append(json.dumps(item, ensure_ascii=False))
            return
        out.append(json.dumps(item[:CHARS], ensure_ascii=False)[:-1])
        out.append(f"{_more(len(item) - CHARS, 'character')}\"")

    def write(item: Any) -> None:
        nonlocal budget
        budget -= 1
        if isinstance(item, str):
            text(item)
        elif isinstance(item, dict | list):
            entries = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            room = max(1, min(KEYS if isinstance(item, dict) else ITEMS, budget))
            out.append("{" if isinstance(item, dict) else "[")
            for i, (key, member) in enumerate(entries[:room]):
                out.append(", " if i else "")
                if key is not None:
                    text(str(key))
                    out.append(": ")
                if budget > 0:
                    write(member)
                else:
                    out.append(_more(len(entries) - i, "value"))
                    break
            else:
                if len(entries) > room:
                    out.append(", " + _more(len(entries) - room, "key" if isinstance(item, dict) else "item"))
            out.append("}" if isinstance(item, dict) else "]")
        else:
            out.append(json.dumps(item, default=str))

    write(value)
    return visible("".join(out))


def _more(count: int, noun: str) -> str:
    return f"\u27e6\u2026 {count:,} more {noun}{'' if count == 1 else 's'}\u27e7"


__all__ = ["args_preview"]
