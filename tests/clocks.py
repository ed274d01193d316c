"""A clock the test moves by hand. It keeps the time in a file, so hosts in Ray actors (other processes)
read the same time as the test; it stands still until ``advance`` is called."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from troupe.core.vocabulary.state import utcnow


class FileClock:
    def __init__(self, path: Path) -> None:
        self.path = str(path)
        Path(self.path).write_text(utcnow().isoformat())

    def __call__(self) -> datetime:
        return datetime.fromisoformat(Path(self.path).read_text())

    def advance(self, seconds: float) -> None:
        Path(self.path).write_text((self() + timedelta(seconds=seconds)).isoformat())
