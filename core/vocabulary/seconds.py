"""Durations given in seconds (timeouts, deadlines, lifetimes): one check for all of them.

A duration becomes a date (now plus it) far from where it was given: when a pause is announced, when a
run's time budget is read, when a call in doubt is fenced after a takeover. There, a NaN, an infinity
or a value that puts the date past the year 9999 fails in the middle of a run, after a model turn was
paid for (``OverflowError: date value out of range``). So every duration a user gives is checked where
it is given, with a clear error naming it: a finite number above 0, and at most ``MAX_SECONDS``.
"""

from __future__ import annotations

import math
from typing import Any

# Long enough for any person or tool; short enough that now plus it stays a valid date.
MAX_SECONDS = 100 * 365 * 24 * 3600


def is_seconds(value: Any, *, zero: bool = False) -> bool:
    """Whether ``value`` is a number of seconds above 0 (or 0 itself, with ``zero``), finite and at most
    ``MAX_SECONDS``."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value > MAX_SECONDS:
        return False
    return value > 0 or (zero and value == 0)


def seconds_expected(what: str, value: Any, *, zero: bool = False) -> str:
    """The error message for a ``value`` of ``what`` that is not a number of seconds (``is_seconds``)."""
    least = "0 or more" if zero else "above 0"
    return f"{what} must be a number of seconds {least} and at most {MAX_SECONDS} (100 years), got {value!r}"


def check_seconds(value: Any, what: str, *, zero: bool = False) -> float:
    """``value`` as a float, if it is a number of seconds (``is_seconds``); a ValueError naming ``what``
    otherwise."""
    if not is_seconds(value, zero=zero):
        raise ValueError(seconds_expected(what, value, zero=zero))
    return float(value)


__all__ = ["MAX_SECONDS", "check_seconds", "is_seconds", "seconds_expected"]
