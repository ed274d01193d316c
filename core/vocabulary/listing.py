"""Listings of paused runs, read one page at a time from a store's own indexes.

Every surface that shows paused runs (the suspended-runs route, the inbox and its event stream, the CLI,
the Python API, A2A and AG-UI) asks the store for one page: ``Store.list_paused(PausedQuery)``. Its cost
depends on the page's size and on how many indexes the query names (one per agent and resource asked
for), never on how many runs wait: the filters are the store's indexes, not a test applied to every run.

**Order.** ``"oldest"`` (the inbox's): the oldest pause first, then the run id; ``"newest"`` (what the
suspended-runs route has always given, as Mastra does): the newest pause first, then the run id. A run's
pause time is ``RunState.suspended_at`` (its oldest open pause), so a run keeps its place while it
waits.

**Cursor.** A page ends with ``next_cursor`` when more runs follow. It is opaque text naming the last
run of the page (its pause time and id), the order and the filters: the next page is every run after
that place, read from the index with a seek, so a page deep in a listing costs what the first one
does. A cursor is refused (``InvalidPaginationError``) by a query with other filters or another order.

**Stability.** A cursor names a place, not a run: a run decided (or deleted) meanwhile, the one the
cursor names included, never shifts the next page, so no run is skipped or shown twice because others
went (an offset, ``page``/``per_page``, does shift). A run paused later than the place (every new pause,
in the oldest-first order) is on a later page; one whose pause time is before it (a clock behind the
others) is not seen by pages that follow. A run whose pause time changes while it waits (the oldest of
its several pauses decided) moves, and may be seen again or missed by one traversal.

**Filters** (each is an index, so each combination the store keeps is listed in ``PausedQuery``): the
agent, its runs' resource (the tenant) and thread, top-level runs only (what the inbox shows: a
subagent's pause is decided at the top), the role an approver policy names for a paused call
(``Pause.roles``, recorded when the call paused), and the pause time (``from_date``/``to_date``, the age).

**Total.** ``total`` counts every run the filters match (before paging). Memory and Redis count from
their indexes in O(log n) (a sorted set's size); SQLite keeps a counter per index, maintained by
triggers in the same transaction as the run's write, so neither reads the runs. Only a pause-time range
or a thread is counted from its index range (SQLite), which grows with the runs in that range or thread.

**Changes.** ``Store.paused_changes`` is the log of what entered or left the listings, so that a reader
that shows a listing (the inbox's event stream) sends changes, not whole listings, at a cost that grows
with the changes, not the runs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypeVar

from troupe.core.vocabulary.errors import InvalidPaginationError
from troupe.core.vocabulary.state import UNREADABLE, RunState

log = logging.getLogger(__name__)
# Why runs were left out of a page, each logged once per process (a listing is read on every refresh
# of every open inbox); past this many reasons, no more are remembered or logged.
_TOLD: set[str] = set()
_TOLD_MAX = 100

T = TypeVar("T")

Order = Literal["oldest", "newest"]
ORDERS: tuple[Order, ...] = ("oldest", "newest")

# A page asked for without its size has this many runs; no page has more than MAX_PER_PAGE.
DEFAULT_PER_PAGE = 100
MAX_PER_PAGE = 1000
# How many changes a store's change log keeps: a reader further behind is told to read the listing again.
KEEP_CHANGES = 10_000
# A cursor is short: anything longer was not made here.
_CURSOR_CHARS = 2048
_CURSOR_PREFIX = "c1."


class IndexKey(NamedTuple):
    """One index of paused runs: the runs that have all of these (``None``: any). A store keeps an index
    for each key ``index_keys`` gives a run, and nothing else."""

    top_level: bool
    agent: str | None = None
    resource: str | None = None
    thread: str | None = None
    role: str | None = None


class Place(NamedTuple):
    """Where a run sits in a listing: its pause time (epoch seconds) and id."""

    at: float
    run_id: str


def listed(state: RunState) -> bool:
    """Whether the run is in the listings of paused runs: it waits for a human on at least one call."""
    return state.status == "suspended" and state.suspended_at is not None


def pause_roles(state: RunState) -> list[str]:
    """The roles approver policies named for the run's open approval pauses (a top-level run's only:
    a subagent's pause is decided at the top), sorted."""
    if state.parent is not None:
        return []
    return sorted({role for _, pause in state.open_pauses() for role in pause.roles or ()})


def index_keys(state: RunState) -> list[IndexKey]:
    """Every index the run belongs to while it is listed (none otherwise)."""
    if not listed(state):
        return []
    agent, resource, thread = state.agent_id, state.resource_id, state.thread_id
    keys = [IndexKey(False), IndexKey(False, agent)]
    if resource is not None:
        keys.append(IndexKey(False, agent, resource))
    if thread is not None:
        keys.append(IndexKey(False, agent, None, thread))
        if resource is not None:
            keys.append(IndexKey(False, agent, resource, thread))
    if state.parent is None:
        keys += [IndexKey(True), IndexKey(True, agent)]
        if resource is not None:
            keys.append(IndexKey(True, agent, resource))
        for role in pause_roles(state):
            keys.append(IndexKey(True, agent, None, None, role))
            if resource is not None:
                keys.append(IndexKey(True, agent, resource, None, role))
    return keys


@dataclass(frozen=True)
class PausedQuery:
    """One page of a listing of paused runs.

    Attributes:
        agents: the agents whose runs are listed (``None``: every agent's).
        top_level: only runs that no other run started (a subagent's pause shows on its top-level run).
        resources: only runs of these resources (``None``: any resource, or none); needs ``agents``.
        thread_id: only runs on this thread; needs exactly one agent, and not ``top_level``.
        role: only top-level runs with an approval pause whose approver policy names this role; needs
            ``top_level`` and ``agents``.
        from_date: paused at or after this time; ``to_date``: at or before it (the age).
        order: ``"oldest"`` or ``"newest"`` first (see the module docstring).
        limit: runs per page, 1 to ``MAX_PER_PAGE``.
        offset: runs to skip first (Mastra's ``page``); costs what it skips. Not with ``cursor``.
        cursor: the ``next_cursor`` of the page before (same filters and order).

    Raises:
        InvalidPaginationError: a combination of filters no index serves, a bad size, offset or cursor.

    Example:
        >>> PausedQuery(agents=("ops",), top_level=True, resources=("acme",), limit=50).index_keys()
        [IndexKey(top_level=True, agent='ops', resource='acme', thread=None, role=None)]
    """

    agents: tuple[str, ...] | None = None
    top_level: bool = False
    resources: tuple[str, ...] | None = None
    thread_id: str | None = None
    role: str | None = None
    from_date: datetime | None = None
    to_date: datetime | None = None
    order: Order = "oldest"
    limit: int = DEFAULT_PER_PAGE
    offset: int = 0
    cursor: str | None = None

    def __post_init__(self) -> None:
        for name in ("agents", "resources"):
            value = getattr(self, name)
            if value is not None:
                value = tuple(value)
                object.__setattr__(self, name, value)
                if not all(isinstance(item, str) for item in value):
                    raise InvalidPaginationError(f"{name} must be strings, got {value!r}")
        if self.order not in ORDERS:
            raise InvalidPaginationError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if not _count(self.limit) or not 1 <= self.limit <= MAX_PER_PAGE:
            raise InvalidPaginationError(f"a page has 1 to {MAX_PER_PAGE} runs, got {self.limit!r}")
        if not _count(self.offset) or self.offset < 0:
            raise InvalidPaginationError(f"offset must be an integer >= 0, got {self.offset!r}")
        if self.cursor is not None and self.offset:
            raise InvalidPaginationError("a page is asked for by its cursor or by its offset, not both")
        self._check_filters()
        self.after()  # a bad cursor is refused now, before any store is asked

    def _check_filters(self) -> None:
        if self.resources is not None and self.agents is None:
            raise InvalidPaginationError("filtering by resource needs an agent")
        if self.thread_id is not None and (self.top_level or self.agents is None or len(self.agents) != 1):
            raise InvalidPaginationError("filtering by thread needs exactly one agent (and all its runs)")
        if self.role is not None and (not self.top_level or self.agents is None):
            raise InvalidPaginationError("filtering by role lists top-level runs of named agents")

    def index_keys(self) -> list[IndexKey]:
        """The indexes whose union is this listing (disjoint: a run has one agent and one resource)."""
        agents: Sequence[str | None] = self.agents if self.agents is not None else [None]
        resources: Sequence[str | None] = self.resources if self.resources is not None else [None]
        return [
            IndexKey(self.top_level, agent, resource, self.thread_id, self.role)
            for agent in dict.fromkeys(agents)
            for resource in dict.fromkeys(resources)
        ]

    def bounds(self) -> tuple[float, float]:
        """The pause times listed (epoch seconds, both ends included)."""
        low = -math.inf if self.from_date is None else self.from_date.timestamp()
        high = math.inf if self.to_date is None else self.to_date.timestamp()
        return low, high

    def after(self) -> Place | None:
        """The place the cursor names: the page starts after it."""
        return None if self.cursor is None else _decode(self.cursor, self)

    def wanted(self) -> int:
        """How many runs from each index a page needs to see: the offset, the page, and one more (to
        know whether another page follows)."""
        return self.offset + self.limit + 1

    def filters_digest(self) -> str:
        """What a cursor is bound to: the filters and the order, not the page's size."""
        parts = [
            self.order,
            self.agents,
            self.top_level,
            self.resources,
            self.thread_id,
            self.role,
            _stamp(self.from_date),
            _stamp(self.to_date),
        ]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PausedPage:
    """One page of a listing: its runs in order, how many runs the filters match in all, and the cursor
    of the page after it (``None`` on the last page)."""

    states: list[RunState]
    total: int
    next_cursor: str | None = None


def readable(bodies: Iterable[str | bytes]) -> list[RunState]:
    """The states of a page's stored runs, leaving out each one this Troupe cannot read (written by a
    newer Troupe sharing the store, or damaged): one such run must not fail the listing of every other
    (the inbox, ``suspended-runs``, the CLI), as during a rolling upgrade. The page's ``total`` still
    counts it: it waits, for a Troupe that can read it."""
    states = []
    for body in bodies:
        try:
            states.append(RunState.from_json(body))
        except UNREADABLE as exc:
            why = str(exc)[:300]
            if why not in _TOLD and len(_TOLD) < _TOLD_MAX:
                _TOLD.add(why)
                log.warning("a paused run this Troupe cannot read was left out of a listing: %s", why)
    return states


@dataclass(frozen=True)
class PausedChange:
    """One entry of a store's change log: ``run_id`` entered (or changed in) the listings
    (``listed=True``), or left them (``listed=False``: decided, finished or gone); with what a reader
    filters on without reading the run."""

    run_id: str
    listed: bool
    agent_id: str
    resource_id: str | None
    top_level: bool


@dataclass(frozen=True)
class PausedChanges:
    """Changes after a position, oldest first. ``position`` is where to read on from; ``complete`` is
    False when changes were dropped since the position asked for (more than ``KEEP_CHANGES`` came in
    between): a reader then reads its listing again."""

    changes: list[PausedChange]
    position: str
    complete: bool = True


def page_window(page: Any, per_page: Any, cursor: str | None = None) -> tuple[int | None, int]:
    """(limit, offset) of a page asked for by 0-based ``page`` and ``per_page`` (a page without its
    size has ``DEFAULT_PER_PAGE`` runs; neither: no limit); a cursor goes with a size, not a number.

    Raises:
        InvalidPaginationError: a page below 0, a size below 1, or a page number with a cursor.
    """
    if per_page is not None and (not _count(per_page) or per_page < 1):
        raise InvalidPaginationError(f"per_page must be a positive integer, got {per_page!r}")
    if page is not None and (not _count(page) or page < 0):
        raise InvalidPaginationError(f"page must be an integer >= 0, got {page!r}")
    if cursor is not None and page:
        raise InvalidPaginationError("a page is asked for by its cursor or by its number, not both")
    if (page is not None or cursor is not None) and per_page is None:
        per_page = DEFAULT_PER_PAGE
    return per_page, (page or 0) * (per_page or 0)


def order_key(order: Order, place: Place) -> tuple[float, str]:
    """Sorts places in a listing's order (ascending)."""
    return (place.at, place.run_id) if order == "oldest" else (-place.at, place.run_id)


def page_of(rows: Iterable[tuple[Place, T]], query: PausedQuery) -> tuple[list[T], str | None]:
    """The page ``query`` asks for out of the candidates each index gave (each index's first
    ``query.wanted()`` runs after the cursor, in order): merged, cut, and the next page's cursor."""
    merged = sorted(rows, key=lambda row: order_key(query.order, row[0]))
    window = merged[query.offset : query.offset + query.limit + 1]
    shown = window[: query.limit]
    cursor = encode_cursor(query, shown[-1][0]) if len(window) > query.limit else None
    return [item for _, item in shown], cursor


def encode_cursor(query: PausedQuery, place: Place) -> str:
    """The cursor of the page that starts after ``place`` in ``query``'s listing."""
    payload = json.dumps([query.order, place.at, place.run_id, query.filters_digest()], separators=(",", ":"))
    return _CURSOR_PREFIX + base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _decode(cursor: Any, query: PausedQuery) -> Place:
    """The place a cursor names; ``InvalidPaginationError`` saying what is wrong with anything else (a
    cursor is a client's text: hostile until checked)."""
    if not isinstance(cursor, str) or len(cursor) > _CURSOR_CHARS or not cursor.startswith(_CURSOR_PREFIX):
        raise InvalidPaginationError("cursor is not one this server gave (pass a page's nextCursor as it is)")
    body = cursor[len(_CURSOR_PREFIX) :]
    try:
        fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidPaginationError("cursor is damaged (pass a page's nextCursor as it is)") from None
    if (
        not isinstance(fields, list)
        or len(fields) != 4
        or not all(isinstance(f, str) for f in (fields[0], fields[2], fields[3]))
        or _place_time(fields[1]) is None
    ):
        raise InvalidPaginationError("cursor is damaged (pass a page's nextCursor as it is)")
    order, at, run_id, digest = fields
    if order != query.order or digest != query.filters_digest():
        raise InvalidPaginationError(
            "cursor belongs to a listing with other filters or another order: ask again without it"
        )
    return Place(float(at), run_id)


def _place_time(value: Any) -> float | None:
    """A cursor's pause time as a finite float, or None. JSON reads an integer of any length, and one
    past a float's range cannot even be compared with ``math.isfinite``: it is damage, not a 500."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        at = float(value)
    except OverflowError:
        return None
    return at if math.isfinite(at) else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _stamp(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


__all__ = [
    "DEFAULT_PER_PAGE",
    "KEEP_CHANGES",
    "MAX_PER_PAGE",
    "ORDERS",
    "IndexKey",
    "Order",
    "PausedChange",
    "PausedChanges",
    "PausedPage",
    "PausedQuery",
    "Place",
    "encode_cursor",
    "index_keys",
    "listed",
    "order_key",
    "page_of",
    "page_window",
    "pause_roles",
]
