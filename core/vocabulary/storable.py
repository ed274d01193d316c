"""What a run can store, and why a value cannot: the checks every hostile input meets before it is
streamed or stored (a model's output; a decider's edits and resume data; what a remote agent, an MCP
server or a tool sends back).

Model output is the first of them: whoever writes the prompt writes the model's output. Arguments
nested a thousand deep, megabytes of text or a lone UTF-16 surrogate would be checkpointed and then fail
every later read or render of the run (a listing, the inbox, a decision). So at the boundary where a
model's turn enters the run:

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
# A tool's result rides in the run's state until the model has read it.
MAX_RESULT_CHARS = 4_000_000
# Python will not turn an integer of more than 4,300 digits into text (nor read one back): JSON cannot
# hold it here. About 3,000 digits is the most a stored value may have.
_MAX_INT_BITS = 10_000


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
    None."""
    return value_problem(args, MAX_ARGS_CHARS)


def result_problem(result: Any) -> str | None:
    """Why a tool's result cannot be stored with the run, or None: the same checks as arguments, since
    it is stored the same way (a tool is someone's code, and what it returns may come from anywhere)."""
    return value_problem(result, MAX_RESULT_CHARS)


def value_problem(value: Any, limit: int) -> str | None:
    """Why a JSON value cannot be stored (too deep, larger than ``limit`` characters, not JSON, invalid
    Unicode, a number too long for text), or None. Walked without recursion, so no depth can overflow
    the walk itself."""
    if isinstance(value, str):
        return text_problem(value, limit)
    size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        problem, weight = _leaf_problem(item, depth, stack, limit)
        if problem is not None:
            return problem
        size += weight
        if size > limit:
            return f"larger than {limit} characters"
    return None


def _leaf_problem(value: Any, depth: int, stack: list[tuple[Any, int]], limit: int) -> tuple[str | None, int]:
    """What is wrong with one value (its members go on ``stack``), and about how much text it takes."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or text_problem(key) is not None:
                return "an object key is not valid text", 0
            stack.append((item, depth + 1))
        return None, sum(len(key) + 4 for key in value)
    if isinstance(value, list):
        stack.extend((item, depth + 1) for item in value)
        return None, 2
    if isinstance(value, str):
        problem = text_problem(value, limit)
        return (None if problem is None else f"a string is {problem}"), len(value) + 2
    if isinstance(value, float) and not math.isfinite(value):
        return "a number is not finite", 0
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INT_BITS:
        return "a number has too many digits", 0
    if value is None or isinstance(value, bool | int | float):
        return None, 8
    return f"holds a {type(value).__name__}, which is not JSON", 0


def id_problem(value: Any) -> str | None:
    return text_problem(value, MAX_ID_CHARS) or (None if value else "empty")


__all__ = [
    "MAX_DEPTH",
    "MAX_TEXT_CHARS",
    "RefusedArgs",
    "args_problem",
    "id_problem",
    "result_problem",
    "text_problem",
    "value_problem",
]
