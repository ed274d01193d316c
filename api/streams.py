"""How many inbox event streams may be open at once: each one re-reads the caller's paused runs every
interval, so one tenant opening many (or asking for a short interval) would slow everybody's store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from troupe.core.vocabulary.errors import TroupeError

# At most this many streams per caller and in all; a page needs one (a few tabs, a few more).
PER_CALLER = 4
IN_ALL = 256
# The shortest interval between two re-reads of one stream, whatever it asks for (seconds).
MIN_INTERVAL_S = 1.0


class TooManyStreamsError(TroupeError):
    code = "TOO_MANY_STREAMS"
    http_status = 429


@dataclass
class OpenStreams:
    per_caller: int = PER_CALLER
    in_all: int = IN_ALL
    _open: Counter[str] = field(default_factory=Counter)

    def open(self, caller: str, shown: str | None = None) -> Callable[[], None]:
        """Count a new stream of ``caller``'s (a principal's subject id: never a display name, which two
        people may share or both lack), or refuse it (429); returns what closes it. ``shown`` is the
        name the error gives."""
        if self._open[caller] >= self.per_caller:
            raise TooManyStreamsError(
                f"{self.per_caller} inbox event streams are open for {shown or caller!r} already; close "
                "one first",
                limit=self.per_caller,
            )
        if self._open.total() >= self.in_all:
            raise TooManyStreamsError(f"{self.in_all} inbox event streams are open; try again later")
        self._open[caller] += 1
        closed = False

        def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                self._open[caller] -= 1

        return close


__all__ = ["MIN_INTERVAL_S", "OpenStreams", "TooManyStreamsError"]
