"""The storage contract the agent loop checkpoints through.

The protocol lives here, beside the loop that needs it; ``storage/`` holds the backends (memory, SQLite,
Redis), all held to one conformance suite. Writes of a run are compare-and-set on its ``version`` so that
a decision is claimed atomically even across processes, and audit entries are written in the same atomic
step as the state change they record. The same write keeps the run's place in the listings of paused
runs (the store's own indexes) and logs it to their change log: ``list_paused`` and ``paused_changes``,
specified in ``troupe.core.vocabulary.listing``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from troupe.core.vocabulary.errors import InvalidPaginationError, TroupeError
from troupe.core.vocabulary.listing import (
    DEFAULT_PER_PAGE,
    MAX_PER_PAGE,
    PausedChanges,
    PausedPage,
    PausedQuery,
    page_window,
)
from troupe.core.vocabulary.options import text_or_none
from troupe.core.vocabulary.run_record import RunRecord, expiry_timestamp, pause_timestamp
from troupe.core.vocabulary.state import RunState, utcnow


class StaleSnapshotError(TroupeError):
    """A compare-and-set lost: the run changed (or vanished) since it was read.

    Raised by a store's writes; Troupe's own callers read the run again and retry. Code
    ``STORAGE_STALE_SNAPSHOT``, HTTP 409.
    """

    code = "STORAGE_STALE_SNAPSHOT"
    http_status = 409


class StoredRun(NamedTuple):
    state: RunState
    version: int


class ThreadAppend(NamedTuple):
    """Messages that join a conversation thread in the same atomic step as a run's write, so that a
    crash can never leave a thread saying more (or less) than the run's state."""

    thread_id: str
    resource_id: str | None
    messages: list[dict[str, Any]]


class AuditEntry(BaseModel):
    """One human decision (or expiry), kept after the run's snapshot is gone."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    agent_id: str
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    fingerprint: str
    # "completed": a tool that finished after its run was taken over by another host, or after its run
    # was cancelled or its call timed out (``result``; never given to a model then). "cancelled": the
    # run was cancelled (an entry for the run, with ``tool_call_id`` "", and one per call it withdrew).
    kind: Literal["approved", "declined", "resumed", "expired", "approval-recorded", "completed", "cancelled"]
    reason: str | None = None
    edited_args: dict[str, Any] | None = None
    resume_data: Any = None
    decided_by: str | None = None
    # Who decided, as separation of duties and quorum compare them (issuer + subject), and where:
    # python, http, inbox, link, cli or system (None in entries from before identities).
    subject: str | None = None
    issuer: str | None = None
    surface: str | None = None
    decided_at: datetime = Field(default_factory=utcnow)
    agent_path: list[str] = Field(default_factory=list)
    # Whose run it was: tenancy checks still work once the run's snapshot is gone.
    resource_id: str | None = None
    # A quorum's approvals so far (``kind="approval-recorded"``: one approver of several has approved).
    approvals: list[str] | None = None
    quorum: int | None = None
    # What a completed tool returned, and whether that was an error (``kind="completed"``).
    result: Any = None
    is_error: bool | None = None


class OutboxEntry(BaseModel):
    """One notification event on its way to one target. Written with the state change it reports;
    delivered at least once by whichever live host claims it (a lease, so two hosts never send it at
    the same time); kept after delivery (for ``Notifications.keep_delivered_s``) so its state can be
    shown and it can be sent again."""

    model_config = ConfigDict(extra="forbid")

    id: str  # the delivery: event id and target
    event_id: str  # the receiver's idempotency key (``webhook-id``)
    target: str
    run_id: str
    body: dict[str, Any]  # the event as sent
    status: Literal["pending", "delivered", "failed"] = "pending"
    attempts: int = 0
    next_at: float = 0.0  # epoch seconds of the next attempt while pending
    created_at: float = 0.0
    last_error: str | None = None
    delivered_at: float | None = None
    lease_owner: str | None = None
    lease_until: float | None = None

    def due_at(self) -> float:
        """When a host may take it: its next attempt, or later if a sender holds it."""
        return max(self.next_at, self.lease_until or 0.0)

    def leased(self, owner: str, until: float) -> OutboxEntry:
        return self.model_copy(update={"lease_owner": owner, "lease_until": until})

    def requeued(self, now: float) -> OutboxEntry:
        """Pending again from ``now``, with a fresh retry schedule (a redelivery)."""
        update = {"status": "pending", "attempts": 0, "next_at": now}
        return self.released().model_copy(update=update)

    def released(self) -> OutboxEntry:
        return self.model_copy(update={"lease_owner": None, "lease_until": None})


# How long a decision link's record is kept after it expired (so using it says "expired", not "unknown").
LINK_KEPT_S = 24 * 3600.0


class LinkRecord(BaseModel):
    """A decision link as the server issued it (``troupe.core.notifying.links``): the one call and action
    it may decide, until when, for whom, and who has decided through it. The link's token names only the
    record's ``id``; everything a link allows is read from here, so a token can never carry an identity
    or a grant of its own."""

    model_config = ConfigDict(extra="forbid")

    id: str
    action: Literal["approve", "decline"]
    agent_id: str
    run_id: str
    tool_call_id: str
    fingerprint: str
    expires_at: float  # epoch seconds
    # Issued to one approver ({"issuer", "subject", "name", "roles"}): it decides only as them. None:
    # whoever uses it says who they are (or is the link's anonymous holder).
    approver: dict[str, Any] | None = None
    channel: str | None = None  # the notification target it was sent through, if any
    created_at: float = 0.0
    # The principals (issuer + subject) who decided through it, in that order.
    used_by: list[str] = Field(default_factory=list)

    def usable_by(self, who: str, now: float) -> bool:
        """Whether ``who`` may decide through it at ``now``: not expired, and not used by ``who``."""
        return now < self.expires_at and who not in self.used_by

    def forget_at(self) -> float:
        """When a store may delete it."""
        return self.expires_at + LINK_KEPT_S


@dataclass(frozen=True)
class SuspendedRunQuery:
    """The suspended-runs listing as Mastra asks for it (``list_suspended_runs``): one agent's runs (or
    every agent's), newest pause first, by thread, resource and pause time, paged by ``offset`` and
    ``limit`` (``None``: every run) or by ``cursor``. A view of ``PausedQuery``."""

    # None: every agent's suspended runs (an operator's view; thread/resource filters need an agent).
    agent_id: str | None
    thread_id: str | None = None
    resource_id: str | None = None
    from_date: datetime | None = None
    to_date: datetime | None = None
    offset: int = 0
    limit: int | None = None
    cursor: str | None = None

    @classmethod
    def paged(
        cls,
        agent_id: str | None,
        *,
        page: int | None = None,
        per_page: int | None = None,
        cursor: str | None = None,
        **filters: Any,
    ) -> SuspendedRunQuery:
        """Build a query from 0-based ``page`` and ``per_page`` (or a ``cursor``: the ``next_cursor``
        of the page before); bad paging is the caller's error (``InvalidPaginationError``), and so is
        a thread or resource id that is no text (``InvalidOptionError``)."""
        # A number where an id goes would match no run: the caller's error, not an empty page.
        text_or_none(thread_id=filters.get("thread_id"), resource_id=filters.get("resource_id"))
        limit, offset = page_window(page, per_page, cursor)
        query = cls(agent_id=agent_id, offset=offset, limit=limit, cursor=cursor, **filters)
        if agent_id is None and (query.thread_id is not None or query.resource_id is not None):
            raise InvalidPaginationError("filtering by thread or resource needs an agent")
        query.paused()  # a bad cursor is refused here, before any store is asked
        return query

    def paused(self, limit: int | None = None) -> PausedQuery:
        """The same listing as a ``PausedQuery`` of ``limit`` runs (default: this query's own, within
        one page's largest size)."""
        size = limit if limit is not None else min(self.limit or MAX_PER_PAGE, MAX_PER_PAGE)
        return PausedQuery(
            agents=None if self.agent_id is None else (self.agent_id,),
            resources=None if self.resource_id is None else (self.resource_id,),
            thread_id=self.thread_id,
            from_date=self.from_date,
            to_date=self.to_date,
            order="newest",
            limit=size,
            offset=self.offset,
            cursor=self.cursor,
        )

    def matches(self, state: RunState) -> bool:
        """The filter, for backends that check candidates in Python."""
        if state.status != "suspended" or (self.agent_id is not None and state.agent_id != self.agent_id):
            return False
        if self.thread_id is not None and state.thread_id != self.thread_id:
            return False
        if self.resource_id is not None and state.resource_id != self.resource_id:
            return False
        at = state.suspended_at
        if at is None:
            return False
        if self.from_date is not None and at < self.from_date:
            return False
        return not (self.to_date is not None and at > self.to_date)


@runtime_checkable
class Store(Protocol):
    """Async storage for run snapshots, the decision audit log and conversation threads."""

    async def create_run(self, state: RunState | RunRecord) -> int:
        """Store a new run at version 1; ``DuplicateRunError`` if its id exists. The same as
        ``save_run(state, expected_version=0)``."""
        ...

    async def load_run(self, run_id: str) -> StoredRun | None:
        """The run's state and version, or None if there is no such run (or it has finished)."""
        ...

    async def save_run(
        self,
        state: RunState | RunRecord,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        outbox: tuple[OutboxEntry, ...] = (),
    ) -> int:
        """Replace the run if it is still at ``expected_version`` (else ``StaleSnapshotError``), appending
        ``audit`` and ``thread`` and adding the ``outbox`` entries (an id already there is kept as it is)
        in the same atomic step. Returns the new version. ``expected_version=0`` is a run's first write: it
        stores the run at version 1 with all of the above (``DuplicateRunError`` if its id is taken, by a
        run or by a finished run's tombstone).

        ``state`` is the run's state, or its ``RunRecord``: the state serialized once by the caller, in
        the form the store keeps, with the fields the store files it under. Given a record, the store
        writes exactly its JSON and files it by its fields (it never reads the live state, which may have
        moved on since: a write sent ahead); given a state, it takes the record itself. Either way what is
        stored reads back (``load_run``) as the state was when its record was taken."""
        ...

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: ThreadAppend | None = None
    ) -> None:
        """Delete the run (if at ``expected_version`` when given) and append ``thread``, atomically."""
        ...

    async def list_suspended_runs(self, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
        """Suspended runs of one agent, newest pause first, and the total before paging: the listing of
        ``list_paused`` with the query's filters (``suspended_runs`` implements it for every store)."""
        ...

    async def list_paused(self, query: PausedQuery) -> PausedPage:
        """One page of a listing of paused runs (``troupe.core.vocabulary.listing``: the spec).

        Guarantees:
            - The page holds ``query.limit`` runs at most, in the query's order (oldest or newest pause
              first, then run id), and only runs that are listed (suspended with an open pause) and
              match every filter; ``next_cursor`` is set when more follow.
            - It is read from the indexes the query names (``PausedQuery.index_keys``), with a seek to
              the cursor's place: what it costs grows with the page's size (plus its offset) and the
              number of indexes, never with the number of runs waiting. Only the page's runs are parsed.
            - ``total`` is the number of runs the filters match, read in the same snapshot as the page
              (one read transaction, one script per Redis shard), from a counter or an index's size.
            - Under concurrent writes a cursor stays valid: runs that leave the listing never shift the
              pages after it; a run that enters it after the cursor's place is on a later page.

        Raises:
            InvalidPaginationError: a cursor of another listing (already refused by ``PausedQuery``).
            StorageUnavailableError: the store cannot be reached; never an empty page instead.
        """
        ...

    async def paused_changes(self, after: str | None, limit: int) -> PausedChanges:
        """What entered, changed in, or left the listings after ``after`` (a position this store gave;
        ``None``: from now on, no changes), oldest first, at most ``limit`` of them.

        Every write that lists a run (a pause, an approval short of its quorum) logs it as listed, and
        every write that takes it out (a claim, the run's end or deletion) as not listed, in the same
        atomic step as the write, so a reader that starts from a position and applies the changes it
        reads misses nothing. The log keeps the last ``KEEP_CHANGES`` entries (per shard on Redis
        Cluster): a position older than that returns ``complete=False`` (read the listing again).
        """
        ...

    async def list_running_runs(self, agent_id: str) -> list[str]:
        """Ids of the agent's runs that were in flight (not paused) at their last checkpoint."""
        ...

    async def list_expiring_runs(self, agent_id: str, before: float) -> list[str]:
        """Ids of the agent's suspended runs with a pause whose deadline (``expiry_timestamp``) is at or
        before ``before`` (epoch seconds), most overdue first."""
        ...

    async def list_audit(self, run_id: str) -> list[AuditEntry]:
        """The run's audit log (its decisions, cancels and late results), oldest first; kept after the
        run is gone."""
        ...

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append to a run's audit log on its own, with no compare-and-set on the run: for what happened
        after the run was taken over by another host (a tool that finished late), whatever the run's
        state says now."""
        ...

    async def claim_deliveries(
        self, owner: str, now: float, lease_s: float, limit: int, *, target: str | None = None
    ) -> list[OutboxEntry]:
        """Up to ``limit`` pending outbox entries due at ``now`` (soonest first), of ``target`` only when
        it is given, leased to ``owner`` until ``now + lease_s`` in one atomic step, so no other host
        takes them meanwhile."""
        ...

    async def settle_delivery(self, entry: OutboxEntry) -> bool:
        """Record an attempt's outcome (``entry`` as the sender updated it) and end its lease; False, and
        nothing written, if the lease is no longer ``entry.lease_owner``'s."""
        ...

    async def list_deliveries(self, run_id: str) -> list[OutboxEntry]:
        """The outbox entries of a run, oldest first (kept after the run is gone)."""
        ...

    async def redeliver(self, delivery_id: str, now: float) -> OutboxEntry | None:
        """Make an entry pending again, due at ``now``, with a fresh retry schedule and no lease (a
        sender still holding one cannot settle it). None if there is no such entry."""
        ...

    async def prune_deliveries(self, now: float, keep_s: float, limit: int) -> int:
        """Delete up to ``limit`` entries delivered ``keep_s`` or more before ``now`` (epoch seconds) whose
        run has finished, the longest delivered first; returns how many went. An entry whose run still
        lives is kept (its pause may be announced again) and looked at again ``keep_s`` after ``now``.
        Pending and failed entries are kept: one is still to be sent, the other waits for a redelivery.
        Several hosts may prune at once."""
        ...

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        """Say that host ``owner`` is alive for the next ``ttl_s`` seconds (a heartbeat)."""
        ...

    async def live_owners(self) -> set[str]:
        """Hosts whose heartbeat has not expired: runs owned by anyone else are orphans."""
        ...

    async def append_messages(
        self, thread_id: str, resource_id: str | None, messages: list[dict[str, Any]]
    ) -> None:
        """Append ``messages`` to a thread (of ``resource_id``, if the thread is new)."""
        ...

    async def load_messages(self, thread_id: str) -> list[dict[str, Any]]:
        """A thread's messages, oldest first (none for an unknown thread)."""
        ...

    async def thread_resource(self, thread_id: str) -> str | None:
        """The resource a thread belongs to (the one its first messages were written with; ``""`` for
        a thread started without one), or None if the thread has no messages yet."""
        ...

    # ---- decision links (troupe.core.notifying.links) -------------------------------------------------

    async def issue_link(self, record: LinkRecord) -> LinkRecord:
        """Keep ``record`` unless one with its id is kept already; returns the record kept (issuing one
        link twice, as a retried delivery does, gives the first). A record may be deleted once its
        ``forget_at()`` has passed."""
        ...

    async def load_link(self, link_id: str) -> LinkRecord | None:
        """The record of a decision link, or None if there is none (or it was forgotten)."""
        ...

    async def use_link(self, link_id: str, who: str, now: float) -> LinkRecord | None:
        """Claim the link for ``who`` (a principal id) in one atomic step: the record with ``who`` added
        to ``used_by``, or None, and nothing written, if there is no such link, it expired at ``now``, or
        ``who`` used it already (so two uses by one person never both pass)."""
        ...

    async def release_link(self, link_id: str, who: str) -> None:
        """Undo ``use_link`` for ``who`` (the decision it was for was refused, so the link was not used)."""
        ...

    async def close(self) -> None:
        """Close the store's connections and files in this process (the runtime's shutdown does)."""
        ...


async def suspended_runs(store: Store, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
    """``list_suspended_runs`` through ``list_paused``: one page, or every run when the query has no
    limit (read a page at a time, as the caller asked for all of them)."""
    wanted = query.limit
    page = await store.list_paused(query.paused())
    states = list(page.states)
    while page.next_cursor is not None and (wanted is None or len(states) < wanted):
        rest = None if wanted is None else wanted - len(states)
        follow = replace(query, offset=0, cursor=page.next_cursor)
        page = await store.list_paused(follow.paused(None if rest is None else min(rest, MAX_PER_PAGE)))
        states += page.states
    return states, page.total


__all__ = [
    "DEFAULT_PER_PAGE",
    "LINK_KEPT_S",
    "AuditEntry",
    "LinkRecord",
    "OutboxEntry",
    "RunRecord",
    "StaleSnapshotError",
    "Store",
    "StoredRun",
    "SuspendedRunQuery",
    "ThreadAppend",
    "expiry_timestamp",
    "pause_timestamp",
    "suspended_runs",
]
