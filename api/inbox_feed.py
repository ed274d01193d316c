"""What one inbox event stream sends: the first page of the caller's inbox, then only what changed.

A stream remembers where it is in the store's change log (``Store.paused_changes``), taken before it
reads the first page, so nothing that happens meanwhile is missed (a change already in the page is sent
again, which changes nothing). Each look reads the changes since, keeps those of runs the caller may
see (top-level runs of this runtime's agents, of the caller's resources: filtered without reading a
run), reads the runs that entered or changed (one read each) and sends them with the ids of runs that
left, and the new total. What a look costs grows with the changes, never with the runs waiting. When
the stream has fallen further behind than the log keeps, it sends the first page again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.listing import PausedChange, listed
from troupe.core.vocabulary.state import UNREADABLE, RunState
from troupe.core.vocabulary.store import Store
from troupe.supervisor.runtime import Runtime

# Changes read per look: a burst larger than this is sent over the next looks.
CHANGES_PER_LOOK = 500

PageJson = Callable[..., Awaitable[dict[str, Any]]]
RunJson = Callable[[Runtime, RunState], Awaitable[dict[str, Any]]]


class InboxFeed:
    """The frames of one caller's stream: ``next()`` is the next frame to send, or None (nothing new).

    Args:
        runtime: whose agents' runs are listed.
        caller: whose inbox it is (an admin's, or a key's resources).
        page_json: the inbox's first page as the listing route answers it.
        run_json: one run as the listing shows it.
    """

    def __init__(self, runtime: Runtime, caller: Principal, page_json: PageJson, run_json: RunJson) -> None:
        self.runtime = runtime
        self.caller = caller
        self.page_json = page_json
        self.run_json = run_json
        self.position: str | None = None  # None: the first page is still to send
        self.total: int | None = None

    def seen_by(self, caller: Principal) -> None:
        """The caller as it stands now: if its resources, roles or admin changed, the next frame is its
        first page again, so that runs it may no longer see leave the listing."""
        if caller != self.caller:
            self.caller = caller
            self.position = None

    async def next(self) -> dict[str, Any] | None:
        # The stream moves on only once a frame is made: a look that fails (the store, say) leaves it
        # where it was, and the next look reads the same changes (or the page) again.
        store = self.runtime.store()
        if self.position is not None:
            batch = await store.paused_changes(self.position, CHANGES_PER_LOOK)
            if batch.complete:
                frame = await self._changes(batch.changes)
                self.position = batch.position
                return frame
        # The first look, or one that fell behind the log: the position first, then the page.
        position = (await store.paused_changes(None, 0)).position
        body = await self.page_json(self.runtime, self.caller)
        self.position, self.total = position, body["total"]
        return {"type": "page", **body}

    async def _changes(self, changes: list[PausedChange]) -> dict[str, Any] | None:
        served = {agent.id for agent in self.runtime.list_agents()}
        latest: dict[str, PausedChange] = {}
        for change in changes:  # a run's last change says where it stands
            if change.top_level and change.agent_id in served and self.caller.may(change.resource_id):
                latest[change.run_id] = change
        if not latest:
            return None  # nothing the caller sees changed: not even its total
        store = self.runtime.store()
        entered = [run_id for run_id, change in latest.items() if change.listed]
        read = await asyncio.gather(*(_readable(store, run_id) for run_id in entered))
        states = [state for state in read if state is not None and listed(state)]
        still = {state.run_id for state in states}
        left = [run_id for run_id in latest if run_id not in still]
        total = (await self.runtime.pending_page(caller=self.caller, per_page=1)).total
        if not states and not left and total == self.total:
            return None
        shown = await asyncio.gather(*(self.run_json(self.runtime, state) for state in states))
        self.total = total
        return {"type": "changes", "listed": list(shown), "unlisted": left, "total": total}


async def _readable(store: Store, run_id: str) -> RunState | None:
    """The run's state; None if it is gone, or if this Troupe cannot read it (a newer Troupe's, or
    damaged): left out, as the listings leave it out, rather than failing this look and every later
    one (a stream that fails a look reads the same changes again)."""
    try:
        found = await store.load_run(run_id)
    except UNREADABLE:
        return None
    return None if found is None else found.state


__all__ = ["CHANGES_PER_LOOK", "InboxFeed"]
