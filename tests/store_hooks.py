"""A real store with hooks a test can use to observe and steer the order of its reads and writes.

Used in-process (``executor="local"``) only: the hooks are asyncio objects of the test's own loop.
Everything else passes straight through to the wrapped store, which does the real work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from troupe.core.vocabulary.errors import StorageUnavailableError
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import Store


class HookedStore:
    def __init__(self, inner: Store, name: str = "store") -> None:
        self.inner = inner
        self.name = name
        # run id -> status of its last write that had returned (durable from then on); None once deleted
        self.durable: dict[str, str | None] = {}
        # (what, store name, run id) in the order the wrapped store answered, for asserting interleavings
        self.events: list[tuple[str, str, str]] = []
        self._holds: dict[str, list[tuple[asyncio.Event, asyncio.Event]]] = {}
        self._after: dict[str, list[tuple[asyncio.Event, asyncio.Event]]] = {}
        self._meet_save: dict[str, asyncio.Barrier] = {}
        self._stalls: dict[str, asyncio.Event] = {}
        self._outage_after_pause = False
        self._failing: set[str] = set()
        self._before: dict[str, Callable[[], None]] = {}

    def __getattr__(self, name: str) -> Any:
        before = self._before.pop(name, None)
        if before is not None:
            before()
        reached = self._stalls.pop(name, None)
        return getattr(self.inner, name) if reached is None else self._stalled(reached)

    def before_next(self, method: str, action: Callable[[], None]) -> None:
        """The next call of ``method`` (one the wrapper passes straight through) does ``action`` first:
        kills redis-server, say, so the outage lands at exactly that point."""
        self._before[method] = action

    def meet_before_save(self, run_id: str, barrier: asyncio.Barrier) -> None:
        """The next save of ``run_id`` waits at ``barrier`` first: give two stores the same barrier and
        two writers have both read the run (and decided to write) before either writes."""
        self._meet_save[run_id] = barrier

    def hold_next_save(self, run_id: str) -> tuple[asyncio.Event, asyncio.Event]:
        """The next save of ``run_id`` not held yet waits before it writes: returns (``reached``, set once
        it waits; ``release``, to set to let it write). Holds a decision between two writes another one
        can see."""
        reached, release = asyncio.Event(), asyncio.Event()
        self._holds.setdefault(run_id, []).append((reached, release))
        return reached, release

    def hold_after_next_save(self, run_id: str) -> tuple[asyncio.Event, asyncio.Event]:
        """The next save of ``run_id`` writes, then waits before it returns: (``reached``, set once the
        write is durable; ``release``, to set to let the writer go on). Holds a writer between its write
        and what it does next (sending what it claimed, say)."""
        reached, release = asyncio.Event(), asyncio.Event()
        self._after.setdefault(run_id, []).append((reached, release))
        return reached, release

    def stall_next(self, method: str) -> asyncio.Event:
        """The next call of ``method`` waits until cancelled, then swallows the cancel and returns as if it
        had answered: what redis-py does on Python 3.11 when a cancel lands while a command goes out (it
        sends through ``asyncio.wait_for``). Returns an event set once it waits."""
        reached = self._stalls[method] = asyncio.Event()
        return reached

    def fail_next_save(self, run_id: str) -> None:
        """The next save of ``run_id`` raises as a storage outage would, writing nothing."""
        self._failing.add(run_id)

    def fail_after_pause(self) -> None:
        """Once a write has stored a run as suspended, every later write raises the way a storage outage
        does: what was durable when the pause was written is all there is."""
        self._outage_after_pause = True

    def _stalled(self, reached: asyncio.Event) -> Any:
        async def stall(*args: Any, **kwargs: Any) -> None:
            reached.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()

        return stall

    async def create_run(self, state: RunState) -> int:
        version = await self.inner.create_run(state)
        self.durable[state.run_id] = state.status
        return version

    async def save_run(self, state: RunState, **kwargs: Any) -> int:
        if state.run_id in self._failing:
            self._failing.discard(state.run_id)
            raise StorageUnavailableError("storage is down (HookedStore.fail_next_save)")
        if self._outage_after_pause and "suspended" in self.durable.values():
            raise StorageUnavailableError("storage is down (HookedStore.fail_after_pause)")
        waiting = self._holds.get(state.run_id)
        hold = waiting.pop(0) if waiting else None
        if hold is not None:
            hold[0].set()
            await hold[1].wait()
        barrier = self._meet_save.pop(state.run_id, None)
        if barrier is not None:
            self.events.append(("before-save", self.name, state.run_id))
            await barrier.wait()
        version = await self.inner.save_run(state, **kwargs)
        self.events.append(("save", self.name, state.run_id))
        self.durable[state.run_id] = state.status
        after = self._after.get(state.run_id)
        if after:
            reached, release = after.pop(0)
            reached.set()
            await release.wait()
        return version

    async def delete_run(self, run_id: str, **kwargs: Any) -> None:
        await self.inner.delete_run(run_id, **kwargs)
        self.durable[run_id] = None
