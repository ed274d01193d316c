"""Per-run locks: operations on one run are serialised inside a process (the store's compare-and-set
keeps other processes honest)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class RunLocks:
    """One asyncio lock per run id, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def acquire(self, key: str) -> Callable[[], None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._forget(key)
            raise
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                lock.release()
                self._forget(key)

        return release

    def _forget(self, key: str) -> None:
        lock, users = self._locks[key]
        if users <= 1:
            del self._locks[key]
        else:
            self._locks[key] = (lock, users - 1)

    def held(self, key: str) -> bool:
        return key in self._locks

    def __len__(self) -> int:
        return len(self._locks)


__all__ = ["RunLocks"]
