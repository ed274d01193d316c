"""Files that hold run state (the arguments of paused calls, who decided what) are this user's alone."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def create_private(path: Path) -> None:
    """Create the file readable by this user alone, if it does not exist. SQLite gives the -wal and -shm
    files it makes beside a database the database file's mode, so they are 0600 too. A file that already
    exists keeps its mode (a group may share it on purpose); say so if others can read it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        if path.stat().st_mode & 0o007:
            log.warning(
                "SQLite store %s is readable by every user of this machine (mode %o)",
                path,
                path.stat().st_mode & 0o777,
            )


__all__ = ["create_private"]
