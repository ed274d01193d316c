"""Saying what is happening during slow work (starting Ray takes 5-15 s): a line on stderr when it
starts and, on a terminal, a spinner until it ends.

On anything but a terminal (a pipe, a log file, a notebook's stderr) it is one plain line and nothing
else: logs stay clean, with no carriage returns or spinner frames in them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PLAIN_FRAMES = "|/-\\"  # for a terminal whose encoding has no braille
FRAME_S = 0.1


@contextlib.contextmanager
def starting(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """Announce ``what`` on ``stream`` (stderr by default) for as long as the block runs.

    Args:
        what: what is starting, with the time it usually takes, e.g. "starting Ray (usually 5-15 s)".
        stream: where to write; a terminal gets a spinner, anything else the line alone.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> with starting("starting Ray (usually 5-15 s)", out):
        ...     pass
        >>> out.getvalue()
        'troupe: starting Ray (usually 5-15 s)...\\n'
    """
    out = stream if stream is not None else sys.stderr
    line = f"troupe: {what}..."
    if not _is_terminal(out):
        _write(out, line + "\n")
        yield
        return
    done = threading.Event()
    spinner = threading.Thread(
        target=_spin, args=(out, line, _frames(out), done), name="troupe-spinner", daemon=True
    )
    began = time.monotonic()
    spinner.start()
    outcome = "failed"
    try:
        yield
        outcome = "done"
    finally:
        done.set()
        spinner.join()
        # \x1b[K clears what is left of the spinner's longer line.
        _write(out, f"\r{line} {outcome} ({time.monotonic() - began:.1f} s)\x1b[K\n")


def _spin(out: TextIO, line: str, frames: str, done: threading.Event) -> None:
    turn = 0
    while not done.is_set():
        _write(out, f"\r{line} {frames[turn % len(frames)]}")
        turn += 1
        done.wait(FRAME_S)


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _frames(out: TextIO) -> str:
    try:
        FRAMES.encode(getattr(out, "encoding", None) or "ascii")
    except (LookupError, UnicodeEncodeError):
        return PLAIN_FRAMES
    return FRAMES


def _write(out: TextIO, text: str) -> None:
    # Saying what happens must never be what fails: a closed or broken stderr is skipped.
    with contextlib.suppress(OSError, ValueError):
        out.write(text)
        out.flush()


__all__ = ["starting"]
