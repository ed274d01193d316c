"""MemoryStore: the reference backend, in one process's memory (tests, notebooks, quick use).

State is kept as JSON text, exactly as the durable backends keep it, so nothing a caller holds aliases
what is stored and every round trip exercises the same (de)serialisation.
"""

from __future__ import annotations

import bisect
import heapq
import time
import uuid
from collections import defaultdict, deque
from dataclasses import replace
from typing import Any

from troupe.core.vocabulary.errors import DuplicateRunError, InvalidPaginationError
from troupe.core.vocabulary.listing import (
    KEEP_CHANGES,
    IndexKey,
    Order,
    PausedChange,
    PausedChanges,
    PausedPage,
    PausedQuery,
    Place,
    page_of,
    readable,
)
from troupe.core.vocabulary.run_record import RunRecord, as_record
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import (
    AuditEntry,
    LinkRecord,
    OutboxEntry,
    StaleSnapshotError,
    StoredRun,
    SuspendedRunQuery,
    ThreadAppend,
    suspended_runs,
)


class MemoryStore:
    """A store in this process's memory: runs, decisions and threads are gone when the process ends.

    The default store of a ``Runtime``: for tests, notebooks and trying things. Under Ray it cannot be
    shared with the agents' actors, so the runtime stands in a private SQLite file for it. Its methods
    are the store protocol's (``troupe.core.vocabulary.store.Store``); the runtime calls them.

    Example:
        >>> runtime = Runtime([agent], storage=MemoryStore())
    """

    # Under Ray a MemoryStore cannot be copied into each actor: the Runtime stands in a private SQLite file.
    shared_across_processes = False

    def __init__(self) -> None:
        self.identity = f"memory:{uuid.uuid4().hex[:12]}"
        self._runs: dict[str, tuple[str, int, str]] = {}  # run id -> (state JSON, version, agent id)
        self._finished: set[str] = set()
        # Indexes: the listings of paused runs (``IndexKey`` -> places, sorted), where each listed run
        # is in them, running run ids per agent, and when each suspended run's first pause expires (only
        # runs with a deadline), so neither a listing nor the reconciler's sweep parses a run it skips.
        self._listings: dict[IndexKey, list[Place]] = defaultdict(list)
        self._listed: dict[str, tuple[Place, list[IndexKey], PausedChange]] = {}
        self._changes: deque[tuple[int, PausedChange]] = deque(maxlen=KEEP_CHANGES)
        self._change_seq = 0
        self._running: dict[str, set[str]] = defaultdict(set)
        self._expiring: dict[str, dict[str, float]] = defaultdict(dict)
        self._audit: dict[str, list[str]] = defaultdict(list)
        self._threads: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._thread_resources: dict[str, str] = {}
        self._owners: dict[str, float] = {}
        self._outbox: dict[str, str] = {}  # delivery id -> OutboxEntry JSON, in the order written
        # Indexes, so that a claim parses only the deliveries it takes and a run's listing only its own
        # (delivered ones stay until pruned): each delivery's place in the write order, when each pending one
        # is due, and each run's deliveries.
        self._written: dict[str, int] = {}
        self._writes = 0  # not len(_written): pruned entries leave it
        self._pending: dict[str, tuple[float, int]] = {}
        self._deliveries_of: dict[str, list[str]] = defaultdict(list)
        # Delivered entries: when each may be pruned (its delivery; later while its run lives), and the
        # same as a heap, whose stale items (redelivered, or pushed back since) are skipped when popped.
        self._prune_at: dict[str, float] = {}
        self._prunable: list[tuple[float, int, str]] = []
        self._links: dict[str, str] = {}  # decision link id -> LinkRecord JSON
        self._links_to_forget: list[tuple[float, str]] = []  # (forget at, id), a heap

    def __reduce__(self) -> Any:
        raise TypeError(
            "a MemoryStore lives in one process and cannot be pickled; under Ray the Runtime "
            "keeps its state in a private SQLite file instead"
        )

    async def create_run(self, state: RunState | RunRecord) -> int:
        return await self.save_run(state, expected_version=0)

    async def load_run(self, run_id: str) -> StoredRun | None:
        entry = self._runs.get(run_id)
        if entry is None:
            return None
        return StoredRun(RunState.from_json(entry[0]), entry[1])

    async def save_run(
        self,
        state: RunState | RunRecord,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        outbox: tuple[OutboxEntry, ...] = (),
    ) -> int:
        record = as_record(state)
        entry = self._runs.get(record.run_id)
        if expected_version == 0 and (entry is not None or record.run_id in self._finished):
            raise DuplicateRunError(f"run {record.run_id} already exists", run_id=record.run_id)
        if expected_version != (0 if entry is None else entry[1]):
            raise StaleSnapshotError(
                f"run {record.run_id} is not at version {expected_version}", run_id=record.run_id
            )
        version = expected_version + 1
        self._put(record, version)
        for item in audit:
            self._audit[item.run_id].append(item.model_dump_json())
        self._append(thread)
        for delivery in outbox:
            if delivery.id not in self._outbox:  # an id already there is kept as it is
                self._keep(delivery)
        return version

    def _append(self, thread: ThreadAppend | None) -> None:
        # An append of no messages leaves no trace: a thread belongs to the resource of its first
        # message, as the other stores read it.
        if thread is not None and thread.messages:
            self._thread_resources.setdefault(thread.thread_id, thread.resource_id or "")
            self._threads[thread.thread_id].extend(dict(m) for m in thread.messages)

    def _put(self, record: RunRecord, version: int) -> None:
        run_id, agent_id = record.run_id, record.agent_id
        was = self._unindex(run_id, agent_id)
        self._runs[run_id] = (record.json, version, agent_id)
        keys = list(record.index_keys)
        if keys:
            place = Place(record.paused_at or 0.0, run_id)
            change = PausedChange(run_id, True, agent_id, record.resource_id, record.top_level)
            self._listed[run_id] = (place, keys, change)
            for key in keys:
                bisect.insort(self._listings[key], place)
            self._log(change)
        elif was is not None:
            self._log(replace(was, listed=False))
        if record.status == "suspended":
            if record.expires_at is not None:
                self._expiring[agent_id][run_id] = record.expires_at
        elif record.status == "running":
            self._running[agent_id].add(run_id)

    def _unindex(self, run_id: str, agent_id: str) -> PausedChange | None:
        """Take the run out of every index; how it was listed, if it was."""
        self._running[agent_id].discard(run_id)
        self._expiring[agent_id].pop(run_id, None)
        found = self._listed.pop(run_id, None)
        if found is None:
            return None
        place, keys, change = found
        for key in keys:
            entries = self._listings[key]
            del entries[bisect.bisect_left(entries, place)]
            if not entries:
                del self._listings[key]
        return change

    def _log(self, change: PausedChange) -> None:
        self._change_seq += 1
        self._changes.append((self._change_seq, change))

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: ThreadAppend | None = None
    ) -> None:
        entry = self._runs.get(run_id)
        if entry is None:
            return  # already gone, and with it whatever its deletion appended
        if expected_version is not None and entry[1] != expected_version:
            raise StaleSnapshotError(f"run {run_id} is not at version {expected_version}", run_id=run_id)
        del self._runs[run_id]
        self._finished.add(run_id)  # a run id is never used again
        was = self._unindex(run_id, entry[2])
        if was is not None:
            self._log(replace(was, listed=False))
        self._append(thread)

    async def list_suspended_runs(self, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
        return await suspended_runs(self, query)

    async def list_paused(self, query: PausedQuery) -> PausedPage:
        start, (low, high), total = query.after(), query.bounds(), 0
        rows: list[tuple[Place, str]] = []
        for key in query.index_keys():
            entries = self._listings.get(key, [])
            # A range that ends before it starts holds nothing (the two bisections would cross).
            within = bisect.bisect_right(entries, high, key=_at) - bisect.bisect_left(entries, low, key=_at)
            total += max(within, 0)
            places = _following(entries, query.order, start, low, high, query.wanted())
            rows += [(place, place.run_id) for place in places]
        ids, cursor = page_of(rows, query)
        return PausedPage(readable(self._runs[run_id][0] for run_id in ids), total, cursor)

    async def paused_changes(self, after: str | None, limit: int) -> PausedChanges:
        end = str(self._change_seq)
        if after is None:
            return PausedChanges([], end)
        seen = _position(after)
        oldest = self._changes[0][0] if self._changes else self._change_seq + 1
        # A position past the end is not this log's (a store started afresh): the reader reads the
        # listing again from the end, or it would skip every change until this log caught up with it.
        if seen > self._change_seq or seen < oldest - 1:
            return PausedChanges([], end, complete=False)
        found = [change for seq, change in self._changes if seq > seen][:limit]
        return PausedChanges(found, str(seen + len(found)))

    async def list_running_runs(self, agent_id: str) -> list[str]:
        return sorted(self._running[agent_id])

    async def list_expiring_runs(self, agent_id: str, before: float) -> list[str]:
        due = sorted((at, run_id) for run_id, at in self._expiring[agent_id].items() if at <= before)
        return [run_id for _, run_id in due]

    async def append_audit(self, entry: AuditEntry) -> None:
        self._audit[entry.run_id].append(entry.model_dump_json())

    async def list_audit(self, run_id: str) -> list[AuditEntry]:
        return [AuditEntry.model_validate_json(raw) for raw in self._audit.get(run_id, [])]

    # ---- outbox -------------------------------------------------------------------------------------

    def _keep(self, delivery: OutboxEntry) -> None:
        """Write ``delivery``, and its place in the indexes."""
        if delivery.id not in self._written:
            self._written[delivery.id] = self._writes = self._writes + 1
            self._deliveries_of[delivery.run_id].append(delivery.id)
        self._outbox[delivery.id] = delivery.model_dump_json()
        if delivery.status == "pending":
            self._pending[delivery.id] = (delivery.due_at(), self._written[delivery.id])
        else:
            self._pending.pop(delivery.id, None)
        if delivery.status == "delivered" and delivery.delivered_at is not None:
            self._prune_later(delivery.id, delivery.delivered_at)
        else:
            self._prune_at.pop(delivery.id, None)

    def _prune_later(self, delivery_id: str, at: float) -> None:
        self._prune_at[delivery_id] = at
        heapq.heappush(self._prunable, (at, self._written[delivery_id], delivery_id))

    async def claim_deliveries(
        self, owner: str, now: float, lease_s: float, limit: int, *, target: str | None = None
    ) -> list[OutboxEntry]:
        # The earliest due first, ties in the order written.
        due = sorted((when, delivery_id) for delivery_id, when in self._pending.items() if when[0] <= now)
        entries = (OutboxEntry.model_validate_json(self._outbox[delivery_id]) for _, delivery_id in due)
        claimed = [
            entry.leased(owner, now + lease_s)
            for entry in entries
            if target is None or entry.target == target
        ][:limit]
        for delivery in claimed:
            self._keep(delivery)
        return claimed

    async def settle_delivery(self, entry: OutboxEntry) -> bool:
        raw = self._outbox.get(entry.id)
        if raw is None or OutboxEntry.model_validate_json(raw).lease_owner != entry.lease_owner:
            return False
        self._keep(entry.released())
        return True

    async def list_deliveries(self, run_id: str) -> list[OutboxEntry]:
        return [OutboxEntry.model_validate_json(self._outbox[i]) for i in self._deliveries_of.get(run_id, [])]

    async def redeliver(self, delivery_id: str, now: float) -> OutboxEntry | None:
        raw = self._outbox.get(delivery_id)
        if raw is None:
            return None
        again = OutboxEntry.model_validate_json(raw).requeued(now)
        self._keep(again)
        return again

    async def prune_deliveries(self, now: float, keep_s: float, limit: int) -> int:
        pruned, alive = 0, []
        while self._prunable and self._prunable[0][0] <= now - keep_s and pruned < limit:
            at, _, delivery_id = heapq.heappop(self._prunable)
            if self._prune_at.get(delivery_id) != at:
                continue  # redelivered, or pushed back, since
            run_id = OutboxEntry.model_validate_json(self._outbox[delivery_id]).run_id
            if run_id in self._runs:
                alive.append(delivery_id)  # pushed back after the loop, so this call looks at it once
                continue
            del self._outbox[delivery_id], self._written[delivery_id], self._prune_at[delivery_id]
            self._deliveries_of[run_id].remove(delivery_id)
            if not self._deliveries_of[run_id]:
                del self._deliveries_of[run_id]
            pruned += 1
        for delivery_id in alive:
            self._prune_later(delivery_id, now)
        return pruned

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        self._owners[owner] = time.time() + ttl_s

    async def live_owners(self) -> set[str]:
        now = time.time()
        return {owner for owner, until in self._owners.items() if until > now}

    async def append_messages(
        self, thread_id: str, resource_id: str | None, messages: list[dict[str, Any]]
    ) -> None:
        self._append(ThreadAppend(thread_id, resource_id, messages))

    async def load_messages(self, thread_id: str) -> list[dict[str, Any]]:
        return [dict(m) for m in self._threads.get(thread_id, [])]

    async def thread_resource(self, thread_id: str) -> str | None:
        return self._thread_resources.get(thread_id)

    # ---- decision links -----------------------------------------------------------------------------

    async def issue_link(self, record: LinkRecord) -> LinkRecord:
        self._forget_links(time.time())
        if record.id not in self._links:
            self._links[record.id] = record.model_dump_json()
            heapq.heappush(self._links_to_forget, (record.forget_at(), record.id))
        return LinkRecord.model_validate_json(self._links[record.id])

    def _forget_links(self, now: float) -> None:
        while self._links_to_forget and self._links_to_forget[0][0] <= now:
            _, link_id = heapq.heappop(self._links_to_forget)
            self._links.pop(link_id, None)

    async def load_link(self, link_id: str) -> LinkRecord | None:
        raw = self._links.get(link_id)
        return None if raw is None else LinkRecord.model_validate_json(raw)

    async def use_link(self, link_id: str, who: str, now: float) -> LinkRecord | None:
        record = await self.load_link(link_id)
        if record is None or not record.usable_by(who, now):
            return None
        record.used_by.append(who)
        self._links[link_id] = record.model_dump_json()
        return record

    async def release_link(self, link_id: str, who: str) -> None:
        record = await self.load_link(link_id)
        if record is not None and who in record.used_by:
            record.used_by.remove(who)
            self._links[link_id] = record.model_dump_json()

    async def close(self) -> None:
        return None


def _at(place: Place) -> float:
    return place.at


def _following(
    entries: list[Place], order: Order, start: Place | None, low: float, high: float, wanted: int
) -> list[Place]:
    """Up to ``wanted`` places of a sorted index (ascending) that come after ``start`` in ``order``,
    paused between ``low`` and ``high``: a seek and a slice, never a walk over the index."""
    if order == "oldest":
        begin = bisect.bisect_left(entries, low, key=_at)
        if start is not None:
            begin = max(begin, bisect.bisect_right(entries, start))
        return [place for place in entries[begin : begin + wanted] if place.at <= high]
    # Newest first, ties by id ascending: the index read backwards one pause time at a time.
    found: list[Place] = []
    end = bisect.bisect_right(entries, high, key=_at)
    stop = bisect.bisect_left(entries, low, key=_at)
    if start is not None:
        tied_end = bisect.bisect_right(entries, start.at, key=_at)
        if low <= start.at <= high:
            found += entries[bisect.bisect_right(entries, start) : tied_end]
        end = min(end, bisect.bisect_left(entries, start.at, key=_at))
    while len(found) < wanted and end > stop:
        group = max(bisect.bisect_left(entries, entries[end - 1].at, key=_at), stop)
        found += entries[group:end]
        end = group
    return found[:wanted]


def _position(after: str) -> int:
    try:
        return int(after)
    except (TypeError, ValueError):
        raise InvalidPaginationError(f"not a position in this store's change log: {after!r}") from None


__all__ = ["MemoryStore"]
