"""RedisStore: the production backend, shared by every process and actor that reaches one Redis.

Key layout (``P`` is the prefix, ``troupe:`` by default; on Redis Cluster each shard adds its hash tag,
``P{P<n>}:``: see ``troupe.storage.redis_keys``)::

    P run:<run_id>                              hash: state (RunState JSON), version, write, indexes
    P home:<run_id>                             the shard a run lives in, if not the shard of its id
    P audit:<run_id>                            list of AuditEntry JSON, oldest first; outlives the run
    P thread:<thread_id>                        list of message JSON, in order
    P suspended:<agent>                         zset of suspended run ids, score: -pause time
    P suspended:<agent>:thread:<thread_id>      the same, for one thread (and :resource:<id> beside it)
    P suspended:<agent>:resource:<resource_id>  the same, for one resource
    P suspended-all, P suspended-top[:<agent>[:resource:<id>][:role:<role>]]
                                                every agent's; top-level runs (troupe.storage.redis_listing)
    P paused-changes                            stream: what entered or left those listings
    P listing-version                           which listings the indexes hold (rebuilt once if older)
    P running:<agent>                           zset of in-flight run ids, score 0 (so ZRANGE is sorted)
    P expiring:<agent>                          zset of suspended runs with a deadline, score: expiry
    P owners                                    zset of host heartbeats, score: expiry (server clock)
    P outbox:<delivery_id>                      hash: entry (OutboxEntry JSON), owner (lease holder),
                                                target (once a lane's claim has read it)
    P outbox-due                                zset of pending outbox entry keys, score: when due
    P outbox-run:<run_id>                       zset of a run's outbox entry keys, in the order written
    P outbox-delivered                          zset of delivered outbox entry keys, score: when delivered
    P write:<token>                             marks an append as done, for a minute (see retries)
    P link:<link_id>                            hash: a decision link's record, expiry and users

An id that ends a key is used as it is; an id followed by more parts has ``%`` and ``:`` escaped, so no two
(agent, thread) pairs share a key. The indexes and the outbox's due set are kept per shard, beside the
runs they list, so each write stays one script on one slot; a listing reads every shard and merges.

Every write that must be atomic is one Lua script (``troupe.storage.redis_scripts``): the compare-and-set on
``version``, the audit entries and the index maintenance happen together or not at all. A run remembers
which index keys it is in (the ``indexes`` field), so a script takes it out of them without parsing the
state. Suspended indexes are scored by the negated pause time; a listing seeks to its page by rank and
counts it in one script per shard, so the total and the page agree (``troupe.storage.redis_listing``).
(On a cluster that holds for each shard's part; the merged listing may see two shards a moment apart,
but a run is only ever in one shard, so it is never listed twice.) Nothing is ever found by SCAN or
KEYS.

Redis errors are never swallowed: connection failures and timeouts raise ``StorageUnavailableError``
naming the store's URL (without its password). A command that fails on a connection error is retried once
at once, because after a Redis restart every pooled connection is stale and fails its next command; to
make that retry safe every write carries a random token, and a retried write whose first attempt did land
(only its reply was lost) finds its token and reports success instead of applying itself twice.

Durability is the server's: checkpoints survive a Redis crash only with ``appendonly yes`` (and lose
nothing acknowledged only with ``appendfsync always``; the default ``everysec`` may lose the last second).

A redis.asyncio connection pool belongs to the event loop that opened it, and callers use one store from
several ``asyncio.run`` calls in turn, so the store keeps one client per event loop, closed when that loop
shuts down (or by ``close()``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from redis import exceptions as redis_errors
from troupe.core.vocabulary.errors import DuplicateRunError, StorageError, StorageUnavailableError
from troupe.core.vocabulary.listing import PausedChanges, PausedPage, PausedQuery
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
from troupe.storage.redis_keys import CLUSTER_SHARDS, Keys, Layout
from troupe.storage.redis_link import (
    UNAVAILABLE,
    Link,
    check_url,
    cluster_unreachable,
    is_cluster,
    redacted,
)
from troupe.storage.redis_listing import Listings, change_of

log = logging.getLogger(__name__)

# Run homes remembered per store (they never change); forgotten all at once past this many.
_HOMES_KEPT = 10_000
# Stores (by identity) whose server's eviction policy this process has looked at.
_POLICY_CHECKED: set[str] = set()


class RedisStore:
    """A store in Redis: durable, and shared by every process and host of a deployment.

    Make one with ``RedisStore.from_url(url)``. Writes that must be atomic (decision claims, status
    changes) are compare-and-set scripts; an outage raises ``StorageUnavailableError``, never
    swallowed. Its methods are the store protocol's (``troupe.core.vocabulary.store.Store``); the
    runtime calls them.

    Args:
        url: Where Redis is: ``redis://[[user]:password@]host:6379/0`` (``rediss://`` for TLS,
            ``unix:///path``), ``redis+cluster://...`` for a Redis Cluster, or
            ``redis+sentinel://s1:26379,s2:26379/mymaster`` (docs/how-to/stores.md). A password in it is
            never shown.
        prefix: Put before every key (default ``"troupe:"``): several deployments can share a Redis.
        timeout: Seconds a Redis command may take before the store counts Redis as unavailable.
        shards: How many shards the keys are spread over (default 16 on a cluster, else 1); fixed for
            the store's life.

    Raises:
        ValueError: A URL of a form the store does not know.

    Example:
        >>> runtime = Runtime([agent], storage=RedisStore.from_url("redis://127.0.0.1:6379/0"))
    """

    shared_across_processes = True

    def __init__(
        self, url: str, *, prefix: str = "troupe:", timeout: float = 5.0, shards: int | None = None
    ) -> None:
        check_url(url)
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.shards = shards if shards is not None else CLUSTER_SHARDS if is_cluster(url) else 1
        self.layout = Layout(prefix, self.shards)
        self.identity = f"redis:{redacted(url)}/{prefix}"
        self._links: dict[asyncio.AbstractEventLoop, Link] = {}
        self._homes: dict[str, Keys] = {}
        self._listings = Listings(self.layout)

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = "troupe:", timeout: float = 5.0, shards: int | None = None
    ) -> RedisStore:
        """A store at ``url``; nothing connects until it is first used.

        Args:
            url: Where Redis is (see the class).
            prefix: Put before every key (default ``"troupe:"``).
            timeout: Seconds a Redis command may take (default 5).
            shards: How many shards the keys are spread over (default 16 on a cluster, else 1).

        Returns:
            The store.

        Raises:
            ValueError: A URL of a form the store does not know.
        """
        return cls(url, prefix=prefix, timeout=timeout, shards=shards)

    def __reduce__(self) -> Any:
        # Each process (each Ray actor) opens its own connections to the same Redis.
        return (_reopen, (self.url, self.prefix, self.timeout, self.shards))

    def __repr__(self) -> str:
        return f"RedisStore({redacted(self.url)!r}, prefix={self.prefix!r})"

    # ---- plumbing -----------------------------------------------------------------------------------

    async def _link(self) -> Link:
        loop = asyncio.get_running_loop()
        link = self._links.get(loop)
        if link is None:
            self._forget_closed_loops()
            link = self._links[loop] = Link(self.url, self.timeout)
            await link.close_with_loop()
        await link.ready()
        if self.identity not in _POLICY_CHECKED:
            await self._check_eviction(link)
        return link

    async def _check_eviction(self, link: Link) -> None:
        """Say so, once per process, if Redis evicts keys when it is full: it would drop runs, their
        listings and their audit without an error. An outage raises (it is the operation's outage too)
        and the policy is looked at again next time; a server that refuses CONFIG is taken on trust."""
        _POLICY_CHECKED.add(self.identity)  # before the await: concurrent first calls look once
        try:
            policy = await link.eviction_policy()
        except redis_errors.ResponseError:
            return
        except BaseException:
            _POLICY_CHECKED.discard(self.identity)
            raise
        if policy != "noeviction":
            log.warning(
                "Redis at %s evicts keys when it is full (maxmemory-policy %s): paused runs, their "
                "listings and audit can vanish without an error. Set maxmemory-policy noeviction "
                "(docs/how-to/stores.md)",
                redacted(self.url),
                policy,
            )

    def _forget_closed_loops(self) -> None:
        for loop in [loop for loop in self._links if loop.is_closed()]:
            del self._links[loop]

    @asynccontextmanager
    async def _session(self, operation: str) -> AsyncIterator[Link]:
        """This loop's link, with Redis errors raised as storage errors that name the store."""
        with self._errors(operation):
            yield await self._link()

    @contextmanager
    def _errors(self, operation: str) -> Iterator[None]:
        try:
            yield
        except UNAVAILABLE as exc:
            raise self._unavailable(operation, exc) from exc
        except (redis_errors.RedisError, redis_errors.RedisClusterException) as exc:
            if cluster_unreachable(exc):
                raise self._unavailable(operation, exc) from exc
            shown = redacted(self.url)
            raise StorageError(
                f"Redis store at {shown} failed ({operation}): {type(exc).__name__}: {exc}",
                url=shown,
                operation=operation,
            ) from exc

    def _unavailable(self, operation: str, exc: BaseException) -> StorageUnavailableError:
        shown = redacted(self.url)
        # The operation is in the details, not the message: a person needs to know the store is down.
        why = "is unavailable (is redis-server running there, and reachable?)"
        if isinstance(exc, redis_errors.OutOfMemoryError):
            why = "is full (its maxmemory is reached)"
        return StorageUnavailableError(
            f"Redis store at {shown} {why}: {type(exc).__name__}: {exc}",
            url=shown,
            operation=operation,
        )

    def _remember(self, run_id: str, home: Keys) -> Keys:
        if len(self._homes) >= _HOMES_KEPT:
            self._homes.clear()
        self._homes[run_id] = home
        return home

    async def _home(self, link: Link, run_id: str) -> Keys:
        """The shard a run lives in (where it would live, for a run that does not exist)."""
        known = self._homes.get(run_id) or (self.layout.first if self.shards == 1 else None)
        if known is not None:
            return known
        own = self.layout.own(run_id)
        pointer = await link.client.get(own.home_of(run_id))
        # Without a pointer the run lives (or would) in the shard of its id; not remembered, since a run
        # created later with a thread elsewhere leaves a pointer.
        return own if pointer is None else self._remember(run_id, self.layout.shards[int(pointer)])

    # ---- runs ---------------------------------------------------------------------------------------

    async def create_run(self, state: RunState | RunRecord) -> int:
        return await self.save_run(state, expected_version=0)

    async def load_run(self, run_id: str) -> StoredRun | None:
        found: list[str | None] = []
        async with self._session("load_run") as link:
            home = self._homes.get(run_id) or (self.layout.first if self.shards == 1 else None)
            if home is None:
                own = self.layout.own(run_id)
                pointer, *found = await link.load(keys=[own.home_of(run_id), own.run(run_id)])
                home = self._remember(run_id, self.layout.shards[int(pointer)]) if pointer else own
            if not found:
                found = await link.client.hmget(home.run(run_id), ["state", "version"])
        raw, version = found
        if raw is None or version is None:
            return None
        if self.shards > 1 and home is self.layout.own(run_id):
            self._remember(run_id, home)  # found there, so no pointer can ever be set for it
        return StoredRun(RunState.from_json(raw), int(version))

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
        run_id = record.run_id
        home, own = self.layout.home(record), self.layout.own(run_id)
        keys, args = self._save_call(home, own, record, expected_version, audit, thread, outbox)
        async with self._session("save_run") as link:
            if not self._listings.known_ready:  # once per process: indexes of an older Troupe rebuilt
                await self._listings.ready(link)
            # A first write away from the shard of its id points the id there first (as create_run does).
            taken = (
                expected_version == 0
                and home is not own
                and not await link.claim_home(keys=[own.home_of(run_id), own.run(run_id)], args=[home.number])
            )
            version = -1 if taken else int(await link.save(keys=keys, args=args))
        if version == -1:
            raise DuplicateRunError(f"run {run_id} already exists", run_id=run_id)
        if not version:
            raise StaleSnapshotError(f"run {run_id} is not at version {expected_version}", run_id=run_id)
        return version

    def _save_call(
        self,
        home: Keys,
        own: Keys,
        record: RunRecord,
        expected_version: int,
        audit: tuple[AuditEntry, ...],
        thread: ThreadAppend | None,
        outbox: tuple[OutboxEntry, ...],
    ) -> tuple[list[str], list[str | float]]:
        """The keys and arguments of the save script: the run's compare-and-set with everything written
        in the same step (audit and thread appends, outbox entries, the listing indexes)."""
        run_id = record.run_id
        indexes = home.indexes(record)
        appends = self._appends(home, run_id, audit, thread)
        is_listed, of = change_of(record)
        keys = [
            home.run(run_id),
            own.home_of(run_id) if home is own else home.run(run_id),  # a first write's guard
            home.changes(),
            *(key for key, _ in appends),
            home.outbox_due(),
            home.outbox_of_run(run_id),
            *(home.outbox(entry.id) for entry in outbox),
            *(key for key, _ in indexes),
        ]
        args: list[str | float] = [
            _token(),
            expected_version,
            record.json,
            run_id,
            is_listed,
            of,
            len(appends),
            *(value for _, value in appends),
            len(outbox),
            *(entry.model_dump_json() for entry in outbox),
            *(entry.due_at() for entry in outbox),
            *(score for _, score in indexes),
        ]
        return keys, args

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: ThreadAppend | None = None
    ) -> None:
        expected = "" if expected_version is None else expected_version
        async with self._session("delete_run") as link:
            home = await self._home(link, run_id)
            appends = self._appends(home, run_id, (), thread)
            keys = [home.run(run_id), home.changes(), *(key for key, _ in appends)]
            deleted = await link.delete(keys=keys, args=[expected, run_id, *(value for _, value in appends)])
        if not deleted:
            raise StaleSnapshotError(f"run {run_id} is not at version {expected_version}", run_id=run_id)

    def _appends(
        self, home: Keys, run_id: str, audit: tuple[AuditEntry, ...], thread: ThreadAppend | None
    ) -> list[tuple[str, str]]:
        """List pushes that ride along with a run's write: audit entries, then thread messages. Both
        must live in the run's shard to be written in its script: its own audit, and its own thread."""
        strays = {entry.run_id for entry in audit} - {run_id}
        if strays:
            raise ValueError(f"audit entries of runs {sorted(strays)} cannot be written with run {run_id}")
        pushes = [(home.audit(run_id), entry.model_dump_json()) for entry in audit]
        if thread is not None:
            if self.layout.of_thread(thread.thread_id) is not home:
                raise ValueError(f"thread {thread.thread_id!r} is not the thread of run {run_id}")
            pushes += [
                (home.thread(thread.thread_id), _thread_entry(thread.resource_id, m)) for m in thread.messages
            ]
        return pushes

    async def list_suspended_runs(self, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
        return await suspended_runs(self, query)

    async def list_paused(self, query: PausedQuery) -> PausedPage:
        async with self._session("list_paused") as link:
            return await self._listings.page(link, query)

    async def paused_changes(self, after: str | None, limit: int) -> PausedChanges:
        async with self._session("paused_changes") as link:
            return await self._listings.changes(link, after, limit)

    async def list_expiring_runs(self, agent_id: str, before: float) -> list[str]:
        async with self._session("list_expiring_runs") as link:
            found = await asyncio.gather(
                *(
                    link.client.zrangebyscore(shard.expiring(agent_id), "-inf", before, withscores=True)
                    for shard in self.layout.shards
                )
            )
        return [run_id for run_id, _ in sorted(((r, s) for part in found for r, s in part), key=_by_score)]

    async def list_running_runs(self, agent_id: str) -> list[str]:
        async with self._session("list_running_runs") as link:
            found = await asyncio.gather(
                *(link.client.zrange(shard.running(agent_id), 0, -1) for shard in self.layout.shards)
            )
        return sorted(run_id for part in found for run_id in part)

    # ---- audit --------------------------------------------------------------------------------------

    async def append_audit(self, entry: AuditEntry) -> None:
        async with self._session("append_audit") as link:
            home = await self._home(link, entry.run_id)
            await link.client.rpush(home.audit(entry.run_id), entry.model_dump_json())

    async def list_audit(self, run_id: str) -> list[AuditEntry]:
        async with self._session("list_audit") as link:
            home = await self._home(link, run_id)
            raw = await link.client.lrange(home.audit(run_id), 0, -1)
        return [AuditEntry.model_validate_json(entry) for entry in raw]

    # ---- outbox -------------------------------------------------------------------------------------

    async def claim_deliveries(
        self, owner: str, now: float, lease_s: float, limit: int, *, target: str | None = None
    ) -> list[OutboxEntry]:
        until = now + lease_s
        shards = self.layout.shards
        async with self._session("claim_deliveries") as link:
            wanted = {0: limit} if self.shards == 1 else await self._soonest_due(link, now, limit, target)
            raw = await asyncio.gather(
                *(
                    link.claim_outbox(keys=[shards[n].outbox_due()], args=[now, until, count, owner])
                    if target is None
                    else link.claim_outbox_of(
                        keys=[shards[n].outbox_due()], args=[now, until, count, owner, target, ""]
                    )
                    for n, count in wanted.items()
                )
            )
        entries = sorted((OutboxEntry.model_validate_json(e) for part in raw for e in part), key=_due)
        return [entry.leased(owner, until) for entry in entries]

    async def _soonest_due(self, link: Link, now: float, limit: int, target: str | None) -> dict[int, int]:
        """How many entries to claim from each shard so that the ``limit`` soonest due are taken (if
        another host claims some meanwhile, a shard's claim takes its next ones instead)."""
        peeks = await asyncio.gather(
            *(
                link.client.zrangebyscore(
                    shard.outbox_due(), "-inf", now, start=0, num=limit, withscores=True
                )
                if target is None
                else self._peek_due_of(link, shard, now, limit, target)
                for shard in self.layout.shards
            )
        )
        due = sorted((score, key, n) for n, peek in enumerate(peeks) for key, score in peek)[:limit]
        return dict(Counter(n for _, _, n in due))

    async def _peek_due_of(
        self, link: Link, shard: Keys, now: float, limit: int, target: str
    ) -> list[tuple[str, float]]:
        found = await link.claim_outbox_of(keys=[shard.outbox_due()], args=[now, 0, limit, "", target, "1"])
        return [(found[i], float(found[i + 1])) for i in range(0, len(found), 2)]

    async def settle_delivery(self, entry: OutboxEntry) -> bool:
        async with self._session("settle_delivery") as link:
            home = await self._home(link, entry.run_id)
        return await self._write_delivery(home, entry.lease_owner or "", entry.released(), "settle_delivery")

    async def _write_delivery(self, shard: Keys, owner: str, entry: OutboxEntry, operation: str) -> bool:
        keys = [shard.outbox(entry.id), shard.outbox_due(), shard.outbox_delivered()]
        delivered = (
            entry.delivered_at if entry.status == "delivered" and entry.delivered_at is not None else ""
        )
        args: list[str | float] = [owner, entry.model_dump_json(), entry.status, entry.due_at(), delivered]
        async with self._session(operation) as link:
            return bool(await link.settle_outbox(keys=keys, args=args))

    async def list_deliveries(self, run_id: str) -> list[OutboxEntry]:
        async with self._session("list_deliveries") as link:
            home = await self._home(link, run_id)
            raw = await link.list_outbox(keys=[home.outbox_of_run(run_id)])
        return [OutboxEntry.model_validate_json(entry) for entry in raw if entry is not None]

    async def redeliver(self, delivery_id: str, now: float) -> OutboxEntry | None:
        # Only an id is given, not its run: every shard is asked (an operator's action, rare).
        shards = self.layout.shards
        async with self._session("redeliver") as link:
            found = await asyncio.gather(*(link.client.hget(s.outbox(delivery_id), "entry") for s in shards))
        held = [(shard, raw) for shard, raw in zip(shards, found, strict=True) if raw is not None]
        if not held:
            return None
        shard, raw = held[0]
        again = OutboxEntry.model_validate_json(raw).requeued(now)
        return again if await self._write_delivery(shard, "", again, "redeliver") else None

    async def prune_deliveries(self, now: float, keep_s: float, limit: int) -> int:
        before, pruned = now - keep_s, 0
        async with self._session("prune_deliveries") as link:
            for shard in self.layout.shards:
                if pruned >= limit:
                    break
                delivered = shard.outbox_delivered()
                keys = await link.client.zrangebyscore(delivered, "-inf", before, start=0, num=limit - pruned)
                if not keys:
                    continue
                found = await asyncio.gather(*(link.client.hget(key, "entry") for key in keys))
                # An entry's run is in its JSON: its run's listing loses it, and a live run keeps it.
                runs = [
                    (key, OutboxEntry.model_validate_json(raw).run_id)
                    for key, raw in zip(keys, found, strict=True)
                    if raw is not None
                ]
                triples = [k for key, run in runs for k in (key, shard.outbox_of_run(run), shard.run(run))]
                pruned += int(await link.prune_outbox(keys=[delivered, *triples], args=[before, now]))
        return pruned

    # ---- host heartbeats -----------------------------------------------------------------------------

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        async with self._session("touch_owner") as link:
            await link.touch_owner(keys=[self.layout.first.owners()], args=[owner, ttl_s])

    async def live_owners(self) -> set[str]:
        async with self._session("live_owners") as link:
            owners: list[str] = await link.live_owners(keys=[self.layout.first.owners()])
        return set(owners)

    # ---- threads ------------------------------------------------------------------------------------

    async def append_messages(
        self, thread_id: str, resource_id: str | None, messages: list[dict[str, Any]]
    ) -> None:
        if not messages:
            return
        shard = self.layout.of_thread(thread_id)
        async with self._session("append_messages") as link:
            await link.append(
                keys=[shard.thread(thread_id), shard.write_token(_token())],
                args=[_thread_entry(resource_id, m) for m in messages],
            )

    async def load_messages(self, thread_id: str) -> list[dict[str, Any]]:
        async with self._session("load_messages") as link:
            raw = await link.client.lrange(self.layout.of_thread(thread_id).thread(thread_id), 0, -1)
        return [json.loads(entry)["m"] for entry in raw]

    async def thread_resource(self, thread_id: str) -> str | None:
        async with self._session("thread_resource") as link:
            first = await link.client.lindex(self.layout.of_thread(thread_id).thread(thread_id), 0)
        return None if first is None else str(json.loads(first)["r"])

    # ---- decision links -----------------------------------------------------------------------------

    async def issue_link(self, record: LinkRecord) -> LinkRecord:
        key = self.layout.of_link(record.id).link(record.id)
        body = record.model_copy(update={"used_by": []}).model_dump_json()
        args: list[str | int] = [body, repr(record.expires_at), math.ceil(record.forget_at())]
        async with self._session("issue_link") as link:
            found = await link.issue_link(keys=[key], args=args)
        # Nothing kept: the record was past forgetting already, and Redis dropped it at once.
        return _link_record(found) or record

    async def load_link(self, link_id: str) -> LinkRecord | None:
        async with self._session("load_link") as link:
            return _link_record(await link.link(keys=[self.layout.of_link(link_id).link(link_id)]))

    async def use_link(self, link_id: str, who: str, now: float) -> LinkRecord | None:
        key = self.layout.of_link(link_id).link(link_id)
        async with self._session("use_link") as link:
            return _link_record(await link.use_link(keys=[key], args=[who, repr(now)]))

    async def release_link(self, link_id: str, who: str) -> None:
        async with self._session("release_link") as link:
            await link.link(keys=[self.layout.of_link(link_id).link(link_id)], args=[who])

    async def close(self) -> None:
        """Close this event loop's connections. The store stays usable: the next call reconnects."""
        link = self._links.pop(asyncio.get_running_loop(), None)
        self._forget_closed_loops()
        if link is not None:
            with self._errors("close"):
                await link.close()


def _by_score(member: tuple[str, float]) -> tuple[float, str]:
    return (member[1], member[0])


def _due(entry: OutboxEntry) -> tuple[float, str]:
    return (entry.due_at(), entry.id)


def _thread_entry(resource_id: str | None, message: dict[str, Any]) -> str:
    """A thread's list entry: the message, with the resource it was written for (so the thread's
    first entry says whose the thread is)."""
    return json.dumps({"r": resource_id or "", "m": message})


def _link_record(found: list[str] | None) -> LinkRecord | None:
    """A link's record from its hash (HGETALL's flat list), its users in the order they used it."""
    if not found:
        return None
    fields = dict(zip(found[::2], found[1::2], strict=True))
    used = sorted((int(n), f.removeprefix("used:")) for f, n in fields.items() if f.startswith("used:"))
    record = LinkRecord.model_validate_json(fields["record"])
    return record.model_copy(update={"used_by": [who for _, who in used]})


def _token() -> str:
    return uuid.uuid4().hex


def _reopen(url: str, prefix: str, timeout: float, shards: int = 1) -> RedisStore:
    return RedisStore(url, prefix=prefix, timeout=timeout, shards=shards)


__all__ = ["Keys", "RedisStore"]
