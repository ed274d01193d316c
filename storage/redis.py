"""RedisStore: the production backend, shared by every process and actor that reaches one Redis.

Key layout (``P`` is the prefix, ``troupe:`` by default)::

    P run:<run_id>                              hash: state (RunState JSON), version, write, indexes
    P audit:<run_id>                            list of AuditEntry JSON, oldest first; outlives the run
    P thread:<thread_id>                        list of message JSON, in order
    P suspended:<agent>                         zset of suspended run ids, score: -pause time
    P suspended:<agent>:thread:<thread_id>      the same, for one thread
    P suspended:<agent>:resource:<resource_id>  the same, for one resource
    P running:<agent>                           zset of in-flight run ids, score 0 (so ZRANGE is sorted)
    P expiring:<agent>                          zset of suspended runs with a deadline, score: expiry
    P owners                                    zset of host heartbeats, score: expiry (server clock)
    P outbox:<delivery_id>                      hash: entry (OutboxEntry JSON), owner (lease holder)
    P outbox-due                                zset of pending outbox entry keys, score: when due
    P outbox-run:<run_id>                       zset of a run's outbox entry keys, in the order written
    P write:<token>                             marks an append as done, for a minute (see retries)

An id that ends a key is used as it is; an id followed by more parts has ``%`` and ``:`` escaped, so no two
(agent, thread) pairs share a key. For Redis Cluster, give a hash-tagged prefix such as ``{troupe}:`` so
that every key of a store lives in one slot (the scripts touch several).

Every write that must be atomic is one Lua script (``troupe.storage.redis_scripts``): the compare-and-set on
``version``, the audit entries and the index maintenance happen together or not at all. A run remembers
which index keys it is in (the ``indexes`` field), so a script takes it out of them without parsing the
state. Suspended indexes are scored by the negated pause time so that one ``ZRANGEBYSCORE`` lists newest
first, ties by run id (the order SqliteStore gives); a listing counts and reads its page in one script,
so the total and the page agree. Nothing is ever found by SCAN or KEYS.

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
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from troupe.core.errors import (
    DuplicateRunError,
    InvalidPaginationError,
    StorageError,
    StorageUnavailableError,
)
from troupe.core.state import RunState
from troupe.core.store import (
    AuditEntry,
    OutboxEntry,
    StaleSnapshotError,
    StoredRun,
    SuspendedRunQuery,
    ThreadAppend,
    expiry_timestamp,
    pause_timestamp,
)
from troupe.storage import redis_scripts as lua

# Errors that say Redis cannot be reached now (a read-only replica answers while a failover is under way).
_UNAVAILABLE = (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.ReadOnlyError, OSError)


_MAX_CONNECTIONS = 64
_POOL_WAIT_S = 30.0


def _part(value: str) -> str:
    """An id inside a key, escaped so that it cannot run into the next part."""
    return value.replace("%", "%25").replace(":", "%3A")


class Keys:
    """Every key of one store, built from its prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}"

    def audit(self, run_id: str) -> str:
        return f"{self.prefix}audit:{run_id}"

    def thread(self, thread_id: str) -> str:
        return f"{self.prefix}thread:{thread_id}"

    def suspended(self, agent_id: str | None) -> str:
        """Suspended runs of one agent, or of all agents (``None``)."""
        if agent_id is None:
            return f"{self.prefix}suspended-all"
        return f"{self.prefix}suspended:{_part(agent_id)}"

    def suspended_on_thread(self, agent_id: str, thread_id: str) -> str:
        return f"{self.suspended(agent_id)}:thread:{_part(thread_id)}"

    def suspended_for_resource(self, agent_id: str, resource_id: str) -> str:
        return f"{self.suspended(agent_id)}:resource:{_part(resource_id)}"

    def running(self, agent_id: str) -> str:
        return f"{self.prefix}running:{_part(agent_id)}"

    def expiring(self, agent_id: str) -> str:
        return f"{self.prefix}expiring:{_part(agent_id)}"

    def owners(self) -> str:
        return f"{self.prefix}owners"

    def outbox(self, delivery_id: str) -> str:
        return f"{self.prefix}outbox:{delivery_id}"

    def outbox_due(self) -> str:
        return f"{self.prefix}outbox-due"

    def outbox_of_run(self, run_id: str) -> str:
        return f"{self.prefix}outbox-run:{run_id}"

    def write_token(self, token: str) -> str:
        return f"{self.prefix}write:{token}"

    def indexes(self, state: RunState) -> list[tuple[str, float]]:
        """The index keys a run belongs to, each with the run's score there."""
        if state.status == "running":
            return [(self.running(state.agent_id), 0.0)]
        at = pause_timestamp(state)
        if state.status != "suspended" or at is None:
            # A finished run is in no listing; nor is a suspended one with nothing paused (as in MemoryStore).
            return []
        agent = state.agent_id
        found = [(self.suspended(agent), -at), (self.suspended(None), -at)]
        if state.thread_id is not None:
            found.append((self.suspended_on_thread(agent, state.thread_id), -at))
        if state.resource_id is not None:
            found.append((self.suspended_for_resource(agent, state.resource_id), -at))
        expires = expiry_timestamp(state)
        if expires is not None:
            found.append((self.expiring(agent), expires))
        return found


class _Link:
    """One event loop's client (and connection pool), with the scripts bound to it."""

    def __init__(self, url: str, timeout: float) -> None:
        pool = BlockingConnectionPool.from_url(
            url,
            # Under load callers queue for one of a bounded set of connections instead of failing with
            # "too many connections" (or opening thousands).
            max_connections=_MAX_CONNECTIONS,
            timeout=_POOL_WAIT_S,
            decode_responses=True,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            # One immediate retry on a connection error: a pooled connection may be stale after a Redis
            # restart. Timeouts are not retried, so a caller waits at most ``timeout`` to hear of an outage.
            retry=Retry(NoBackoff(), 1, supported_errors=(redis_errors.ConnectionError,)),
        )
        self.client: Redis = Redis.from_pool(pool)
        self.create: AsyncScript = self.client.register_script(lua.CREATE)
        self.save: AsyncScript = self.client.register_script(lua.SAVE)
        self.delete: AsyncScript = self.client.register_script(lua.DELETE)
        self.list: AsyncScript = self.client.register_script(lua.LIST)
        self.append: AsyncScript = self.client.register_script(lua.APPEND)
        self.touch_owner: AsyncScript = self.client.register_script(lua.TOUCH_OWNER)
        self.live_owners: AsyncScript = self.client.register_script(lua.LIVE_OWNERS)
        self.claim_outbox: AsyncScript = self.client.register_script(lua.CLAIM_OUTBOX)
        self.settle_outbox: AsyncScript = self.client.register_script(lua.SETTLE_OUTBOX)
        self.list_outbox: AsyncScript = self.client.register_script(lua.LIST_OUTBOX)
        self._closer: AsyncGenerator[None, None] | None = None

    async def close_with_loop(self) -> None:
        """Close the client when its event loop shuts down: ``asyncio.run`` (like any ``asyncio.Runner``)
        finalizes the async generators still alive before it closes the loop, and this one closes the
        client in its ``finally``. A pool left open on a closed loop could not be closed at all."""
        self._closer = self._close_at_shutdown()
        await anext(self._closer)

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self.client.aclose()

    async def close(self) -> None:
        if self._closer is not None:
            await self._closer.aclose()
        else:
            await self.client.aclose()


class RedisStore:
    shared_across_processes = True

    def __init__(self, url: str, *, prefix: str = "troupe:", timeout: float = 5.0) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.keys = Keys(prefix)
        self.identity = f"redis:{_redacted(url)}/{prefix}"
        self._links: dict[asyncio.AbstractEventLoop, _Link] = {}

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "troupe:", timeout: float = 5.0) -> RedisStore:
        return cls(url, prefix=prefix, timeout=timeout)

    def __reduce__(self) -> Any:
        # Each process (each Ray actor) opens its own connections to the same Redis.
        return (_reopen, (self.url, self.prefix, self.timeout))

    def __repr__(self) -> str:
        return f"RedisStore({_redacted(self.url)!r}, prefix={self.prefix!r})"

    # ---- plumbing -----------------------------------------------------------------------------------

    async def _link(self) -> _Link:
        loop = asyncio.get_running_loop()
        link = self._links.get(loop)
        if link is None:
            self._forget_closed_loops()
            link = self._links[loop] = _Link(self.url, self.timeout)
            await link.close_with_loop()
        return link

    def _forget_closed_loops(self) -> None:
        for loop in [loop for loop in self._links if loop.is_closed()]:
            del self._links[loop]

    @asynccontextmanager
    async def _session(self, operation: str) -> AsyncIterator[_Link]:
        """This loop's link, with Redis errors raised as storage errors that name the store."""
        with self._errors(operation):
            yield await self._link()

    @contextmanager
    def _errors(self, operation: str) -> Iterator[None]:
        try:
            yield
        except _UNAVAILABLE as exc:
            raise StorageUnavailableError(
                f"Redis store at {_redacted(self.url)} is unavailable ({operation}): "
                f"{type(exc).__name__}: {exc}",
                url=_redacted(self.url),
                operation=operation,
            ) from exc
        except redis_errors.RedisError as exc:
            raise StorageError(
                f"Redis store at {_redacted(self.url)} failed ({operation}): {type(exc).__name__}: {exc}",
                url=_redacted(self.url),
                operation=operation,
            ) from exc

    # ---- runs ---------------------------------------------------------------------------------------

    async def create_run(self, state: RunState) -> int:
        indexes = self.keys.indexes(state)
        keys = [self.keys.run(state.run_id), *(key for key, _ in indexes)]
        args: list[str | float] = [_token(), state.to_json(), state.run_id, *(score for _, score in indexes)]
        async with self._session("create_run") as link:
            created = await link.create(keys=keys, args=args)
        if not created:
            raise DuplicateRunError(f"run {state.run_id} already exists", run_id=state.run_id)
        return 1

    async def load_run(self, run_id: str) -> StoredRun | None:
        async with self._session("load_run") as link:
            raw, version = await link.client.hmget(self.keys.run(run_id), ["state", "version"])
        if raw is None or version is None:
            return None
        return StoredRun(RunState.from_json(raw), int(version))

    async def save_run(
        self,
        state: RunState,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        outbox: tuple[OutboxEntry, ...] = (),
    ) -> int:
        indexes = self.keys.indexes(state)
        appends = self._appends(audit, thread)
        keys = [
            self.keys.run(state.run_id),
            *(key for key, _ in appends),
            self.keys.outbox_due(),
            self.keys.outbox_of_run(state.run_id),
            *(self.keys.outbox(entry.id) for entry in outbox),
            *(key for key, _ in indexes),
        ]
        args: list[str | float] = [
            _token(),
            expected_version,
            state.to_json(),
            state.run_id,
            len(appends),
            *(value for _, value in appends),
            len(outbox),
            *(entry.model_dump_json() for entry in outbox),
            *(entry.due_at() for entry in outbox),
            *(score for _, score in indexes),
        ]
        async with self._session("save_run") as link:
            version = int(await link.save(keys=keys, args=args))
        if not version:
            raise StaleSnapshotError(
                f"run {state.run_id} is not at version {expected_version}", run_id=state.run_id
            )
        return version

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: ThreadAppend | None = None
    ) -> None:
        expected = "" if expected_version is None else expected_version
        appends = self._appends((), thread)
        keys = [self.keys.run(run_id), *(key for key, _ in appends)]
        async with self._session("delete_run") as link:
            deleted = await link.delete(keys=keys, args=[expected, run_id, *(value for _, value in appends)])
        if not deleted:
            raise StaleSnapshotError(f"run {run_id} is not at version {expected_version}", run_id=run_id)

    def _appends(self, audit: tuple[AuditEntry, ...], thread: ThreadAppend | None) -> list[tuple[str, str]]:
        """List pushes that ride along with a run's write: audit entries, then thread messages."""
        pushes = [(self.keys.audit(entry.run_id), entry.model_dump_json()) for entry in audit]
        if thread is not None:
            pushes += [
                (self.keys.thread(thread.thread_id), _thread_entry(thread.resource_id, m))
                for m in thread.messages
            ]
        return pushes

    async def list_suspended_runs(self, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
        keys = [self.keys.suspended(query.agent_id)]
        if query.thread_id is not None or query.resource_id is not None:
            if query.agent_id is None:
                raise InvalidPaginationError("filtering by thread or resource needs an agent")
            keys = []
            if query.thread_id is not None:
                keys.append(self.keys.suspended_on_thread(query.agent_id, query.thread_id))
            if query.resource_id is not None:
                keys.append(self.keys.suspended_for_resource(query.agent_id, query.resource_id))
        # Scores are negated pause times: the newest pause has the lowest score.
        low = "-inf" if query.to_date is None else repr(-query.to_date.timestamp())
        high = "+inf" if query.from_date is None else repr(-query.from_date.timestamp())
        count = -1 if query.limit is None else query.limit
        async with self._session("list_suspended_runs") as link:
            reply = await link.list(keys=keys, args=[low, high, query.offset, count, self.keys.run("")])
        total, *bodies = reply
        return [RunState.from_json(b) for b in bodies if b is not None], int(total)

    async def list_expiring_runs(self, agent_id: str, before: float) -> list[str]:
        async with self._session("list_expiring_runs") as link:
            ids = await link.client.zrangebyscore(self.keys.expiring(agent_id), "-inf", before)
        return cast(list[str], ids)

    async def list_running_runs(self, agent_id: str) -> list[str]:
        async with self._session("list_running_runs") as link:
            ids = await link.client.zrange(self.keys.running(agent_id), 0, -1)
        return cast(list[str], ids)

    # ---- audit --------------------------------------------------------------------------------------

    async def list_audit(self, run_id: str) -> list[AuditEntry]:
        async with self._session("list_audit") as link:
            raw = await link.client.lrange(self.keys.audit(run_id), 0, -1)
        return [AuditEntry.model_validate_json(entry) for entry in raw]

    # ---- outbox -------------------------------------------------------------------------------------

    async def claim_deliveries(self, owner: str, now: float, lease_s: float, limit: int) -> list[OutboxEntry]:
        until = now + lease_s
        async with self._session("claim_deliveries") as link:
            raw = await link.claim_outbox(keys=[self.keys.outbox_due()], args=[now, until, limit, owner])
        return [OutboxEntry.model_validate_json(entry).leased(owner, until) for entry in raw]

    async def settle_delivery(self, entry: OutboxEntry) -> bool:
        return await self._write_delivery(entry.lease_owner or "", entry.released(), "settle_delivery")

    async def _write_delivery(self, owner: str, entry: OutboxEntry, operation: str) -> bool:
        keys = [self.keys.outbox(entry.id), self.keys.outbox_due()]
        args: list[str | float] = [owner, entry.model_dump_json(), entry.status, entry.due_at()]
        async with self._session(operation) as link:
            return bool(await link.settle_outbox(keys=keys, args=args))

    async def list_deliveries(self, run_id: str) -> list[OutboxEntry]:
        async with self._session("list_deliveries") as link:
            raw = await link.list_outbox(keys=[self.keys.outbox_of_run(run_id)])
        return [OutboxEntry.model_validate_json(entry) for entry in raw if entry is not None]

    async def redeliver(self, delivery_id: str, now: float) -> OutboxEntry | None:
        async with self._session("redeliver") as link:
            raw = await link.client.hget(self.keys.outbox(delivery_id), "entry")
        if raw is None:
            return None
        again = OutboxEntry.model_validate_json(raw).requeued(now)
        return again if await self._write_delivery("", again, "redeliver") else None

    # ---- host heartbeats -----------------------------------------------------------------------------

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        async with self._session("touch_owner") as link:
            await link.touch_owner(keys=[self.keys.owners()], args=[owner, ttl_s])

    async def live_owners(self) -> set[str]:
        async with self._session("live_owners") as link:
            owners: list[str] = await link.live_owners(keys=[self.keys.owners()])
        return set(owners)

    # ---- threads ------------------------------------------------------------------------------------

    async def append_messages(
        self, thread_id: str, resource_id: str | None, messages: list[dict[str, Any]]
    ) -> None:
        if not messages:
            return
        async with self._session("append_messages") as link:
            await link.append(
                keys=[self.keys.thread(thread_id), self.keys.write_token(_token())],
                args=[_thread_entry(resource_id, m) for m in messages],
            )

    async def load_messages(self, thread_id: str) -> list[dict[str, Any]]:
        async with self._session("load_messages") as link:
            raw = await link.client.lrange(self.keys.thread(thread_id), 0, -1)
        return [json.loads(entry)["m"] for entry in raw]

    async def thread_resource(self, thread_id: str) -> str | None:
        async with self._session("thread_resource") as link:
            first = await link.client.lindex(self.keys.thread(thread_id), 0)
        return None if first is None else str(json.loads(first)["r"])

    async def close(self) -> None:
        """Close this event loop's connections. The store stays usable: the next call reconnects."""
        link = self._links.pop(asyncio.get_running_loop(), None)
        self._forget_closed_loops()
        if link is not None:
            with self._errors("close"):
                await link.close()


def _thread_entry(resource_id: str | None, message: dict[str, Any]) -> str:
    """A thread's list entry: the message, with the resource it was written for (so the thread's
    first entry says whose the thread is)."""
    return json.dumps({"r": resource_id or "", "m": message})


def _token() -> str:
    return uuid.uuid4().hex


def _reopen(url: str, prefix: str, timeout: float) -> RedisStore:
    return RedisStore(url, prefix=prefix, timeout=timeout)


# Query parameters of a Redis URL that carry a secret (redis-py reads ``?password=`` as the password).
_SECRET_PARAMS = frozenset({"password"})


def _redacted(url: str) -> str:
    """The URL without its secrets (the password in ``user:password@`` or ``?password=``), for
    messages, reprs and identities."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    query = urlencode(
        [
            (k, "***" if k.lower() in _SECRET_PARAMS else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*",
    )
    # Swap the parts in place: urlunsplit would turn unix:///path into unix:/path.
    redacted = url.replace(parts.netloc, netloc, 1) if netloc != parts.netloc else url
    return redacted.replace(f"?{parts.query}", f"?{query}", 1) if parts.query else redacted


__all__ = ["Keys", "RedisStore"]
