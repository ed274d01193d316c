"""ScratchStore: where the hosts of a Ray runtime keep state when the caller gave a one-process store.

A ``MemoryStore`` (or an in-memory SQLite) lives in one process, but a Ray runtime's hosts are actors,
each a process of its own. Rather than serve such a store from one more actor (a hop on every
checkpoint, and everything lost if that actor restarts), the runtime keeps its state in a SQLite file
that each actor opens for itself: made 0600 in a fresh 0700 folder of this user's, and removed when the
runtime shuts down, so it lives exactly as long as the memory store it stands in for. It is on this
machine's disk: on a cluster of several nodes, give the runtime a store every node reaches (Redis).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from troupe.storage.sqlite import SqliteStore


class ScratchStore(SqliteStore):
    """A SqliteStore in a private temporary folder that ``close()`` removes. Copies sent to other
    processes are plain ``SqliteStore``s of the same file: only the one that made it removes it."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="troupe-store-"))  # mode 0700, a name nobody chose first
        super().__init__(self.folder / "runs.db")

    async def close(self) -> None:
        await super().close()
        shutil.rmtree(self.folder, ignore_errors=True)


__all__ = ["ScratchStore"]
