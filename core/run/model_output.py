"""Model output is hostile input: what a model says is checked before it is streamed or stored.

Whoever writes the prompt writes the model's output. Arguments nested a thousand deep, megabytes of
text or a lone UTF-16 surrogate would be checkpointed and then fail every later read or render of the
run (a listing, the inbox, a decision). So at the boundary where a model's turn enters the run:

- a tool call whose arguments cannot be stored is refused: its arguments are replaced by a short
  ``RefusedArgs`` note and the model is told why in a tool error; the call never runs;
- text, tool names or call ids that cannot be stored end the run with a clear ``ModelError``.
"""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 64
MAX_ARGS_CHARS = 1_000_000
MAX_TEXT_CHARS = 1_000_000
MAX_ID_CHARS = 256


class RefusedArgs(str):
    """Stands for tool-call arguments that were refused; the text says why."""

    __slots__ = ()


def text_problem(text: Any, limit: int = MAX_TEXT_CHARS) -> str | None:
    """Why ``text`` cannot be stored, or None."""
    if not isinstance(text, str):
        return f"expected text, got {type(text).__name__}"
    if len(text) > limit:
        return f"longer than {limit} characters ({len(text)})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid Unicode ({exc.reason} at position {exc.start})"
    return None


def args_problem(args: Any) -> str | None:
    """Why tool-call arguments cannot be stored (too deep, too large, not JSON, invalid Unicode), or
    None. Walked without recursion, so no depth can overflow the walk itself."""
    if isinstance(args, str):
        return text_problem(args, MAX_ARGS_CHARS)
    size = 0
    stack: list[tuple[Any, int]] = [(args, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or text_problem(key) is not None:
                    return "an object key is not valid text"
                size += len(key) + 4
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            size += 2
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            problem = text_problem(value, MAX_ARGS_CHARS)
            if problem is not None:
                return f"a string is {problem}"
            size += len(value) + 2
        elif isinstance(value, float) and not math.isfinite(value):
            return "a number is not finite"
        elif value is None or isinstance(value, bool | int | float):
            size += 8
        else:
            return f"holds a {type(value).__name__}, which is not JSON"
        if size > MAX_ARGS_CHARS:
            return f"larger than {MAX_ARGS_CHARS} characters"
    return None


def id_problem(value: Any) -> str | None:
    return text_problem(value, MAX_ID_CHARS) or (None if value else "empty")


__all__ = ["MAX_DEPTH", "MAX_TEXT_CHARS", "RefusedArgs", "args_problem", "id_problem", "text_problem"]
