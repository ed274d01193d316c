"""RedisStore's connection to Redis: which client a URL asks for, and how a URL is shown without secrets.

URL forms (docs/how-to/stores.md, "Redis: where a URL points"):

- ``redis://[[user]:password@]host:port/db``, ``rediss://...`` (TLS), ``unix:///path``: one server;
- ``redis+cluster://[[user]:password@]host:port`` (``rediss+cluster://`` for TLS): a Redis Cluster,
  reached through any of its nodes; the client learns the others from it. A cluster has no ``/db``.
- ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]`` (``rediss+sentinel://``):
  the master that these Sentinels name ``service``, found again after a failover. The password is the
  master's; Sentinels that want one of their own get ``?sentinel_password=``.

A ``redis://``, ``rediss://`` or ``unix://`` URL with a user, a password, a ``/db`` and TLS's ``ssl_*``
options at most is served by the store's own pipelined connection (troupe.storage.redis_wire).
Sentinel, Cluster and any other query parameter go through redis-py's client, which takes the
parameters as connection options (``?socket_timeout=1``, ``?client_name=``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlencode, urlunsplit

from redis import exceptions as redis_errors
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection, parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from troupe.storage import redis_scripts as lua

_WIRE_MISSING = ""  # why the own connection could not be imported, if it could not
try:
    from troupe.storage import redis_wire
except ImportError as missing:
    # The own connection builds on hiredis and on redis-py internals (``redis._parsers``, present in
    # redis-py 5 to 8). Without them (no hiredis, or a redis-py that moved them) every URL goes through
    # redis-py's client: slower, but the store works.
    redis_wire = None  # type: ignore[assignment]
    _WIRE_MISSING = f"{type(missing).__name__}: {missing}"

log = logging.getLogger(__name__)

# Errors that say Redis cannot take the command now, and may later: it cannot be reached, a read-only
# replica answers while a failover is under way, it is full (``maxmemory`` reached with ``noeviction``:
# Redis 7 refuses a script that may write before it runs, so nothing of it landed), or a cluster is
# down or moving the key's slot.
UNAVAILABLE = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,
    redis_errors.OutOfMemoryError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    OSError,
)

_MAX_CONNECTIONS = 64
_POOL_WAIT_S = 30.0
# The cluster client refuses a command past its per-node limit instead of queueing for a connection,
# so its limit is set well above what the store's callers hold at once.
_MAX_CLUSTER_CONNECTIONS = 512
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
_SENTINEL_SCHEMES = {"redis+sentinel": "redis", "rediss+sentinel": "rediss"}
_SENTINEL_PORT = 26379


_URL = re.compile(
    r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):)?(?://(?P<netloc>[^/?#]*))?(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?",
    re.S,
)


def split_url(url: str) -> SplitResult:
    """``urlsplit`` without its checks of the host part: a Sentinel URL lists several hosts, bracketed
    IPv6 ones among them, which some Python 3.11 releases refuse to split ("Invalid IPv6 URL")."""
    found = _URL.fullmatch(url)
    assert found is not None  # every part of the pattern is optional, so any string matches
    return SplitResult(
        (found["scheme"] or "").lower(),
        found["netloc"] or "",
        found["path"],
        found["query"] or "",
        found["fragment"] or "",
    )


URL_FORMS = (
    "redis://[[user]:password@]host:6379/0 (rediss:// for TLS), unix:///path/redis.sock, "
    "redis+cluster://host:7000, redis+sentinel://s1:26379,s2:26379/mymaster"
)
# One server (``unix`` for its socket), a Redis Cluster, or the master a set of Sentinels name.
REDIS_SCHEMES = frozenset({"redis", "rediss", "unix", *_CLUSTER_SCHEMES, *_SENTINEL_SCHEMES})


def check_url(url: str) -> None:
    """Refuse at once what is no Redis URL (another scheme, or no scheme at all), naming the forms that
    are: redis-py would only say so at the first command, in a message that omits the cluster and
    Sentinel forms."""
    parts = split_url(url) if isinstance(url, str) else None
    where = parts.path if parts is not None and parts.scheme == "unix" else parts.netloc if parts else ""
    if parts is None or parts.scheme not in REDIS_SCHEMES or not where:
        raise ValueError(f"not a Redis URL: {redacted(str(url))!r}; expected one of {URL_FORMS}")


def is_cluster(url: str) -> bool:
    return split_url(url).scheme.lower() in _CLUSTER_SCHEMES


def cluster_unreachable(exc: BaseException) -> bool:
    """Whether a cluster client error means no node could be reached (an outage, not a bug): the
    cluster client raises its own exception type when it cannot learn the cluster's layout."""
    return isinstance(exc, redis_errors.RedisClusterException) and (
        isinstance(exc.__cause__, UNAVAILABLE) or "cannot be connected" in str(exc)
    )


def _retry_once() -> Retry:
    """One immediate retry on a connection error: a pooled connection may be stale after a Redis
    restart. Timeouts are not retried, so a caller waits at most ``timeout`` to hear of an outage."""
    return Retry(NoBackoff(), 1, supported_errors=(redis_errors.ConnectionError,))


def _sentinel_client(url: str, timeout: float) -> tuple[Redis, list[Redis]]:
    """A client of the master the URL's Sentinels name, and the Sentinels' own clients (to close)."""
    parts = split_url(url)
    tls = _SENTINEL_SCHEMES[parts.scheme.lower()] == "rediss"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    service, _, db = parts.path.strip("/").partition("/")
    if not service or not hosts:
        raise ValueError(f"a Sentinel URL names its Sentinels and service: {redacted(url)}")
    # redis-py's own URL parsing reads the password and types the options; only the hosts are ours.
    scheme = "rediss" if tls else "redis"
    options: dict[str, Any] = dict(
        parse_url(urlunsplit((scheme, f"{userinfo}{at}master", f"/{db or 0}", parts.query, "")))
    )
    for drop in ("host", "port", "connection_class"):
        options.pop(drop, None)
    sockets = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    sentinel_auth = {"password": options.pop("sentinel_password", None), "ssl": tls, "retry": _retry_once()}
    manager = Sentinel(
        [_address(host) for host in hosts.split(",")], sentinel_kwargs={**sockets, **sentinel_auth}
    )
    options.update(sockets, decode_responses=True, ssl=tls, retry=_retry_once())
    master = manager.master_for(service, **options)
    pool = master.connection_pool
    pool.connection_class = _without_write_tasks(pool.connection_class)
    return master, list(manager.sentinels)


def _address(host: str) -> tuple[str, int]:
    name, colon, port = host.rpartition(":")
    if not colon or name.endswith(":"):  # no port, or a bare IPv6 address
        return host.strip("[]"), _SENTINEL_PORT
    return name.strip("[]"), int(port)


def _client(url: str, timeout: float) -> Redis | RedisCluster:
    scheme = split_url(url).scheme
    if scheme.lower() in _CLUSTER_SCHEMES:
        plain = _CLUSTER_SCHEMES[scheme.lower()] + url[len(scheme) :]
        return RedisCluster.from_url(
            plain,
            decode_responses=True,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            max_connections=_MAX_CLUSTER_CONNECTIONS,
            # One immediate retry, as on one server; the cluster client also re-reads the cluster's
            # layout before it, so a command follows a failover to the new master.
            retry=Retry(NoBackoff(), 1),
        )
    pool = BlockingConnectionPool.from_url(
        url,
        # Under load callers queue for one of a bounded set of connections instead of failing with
        # "too many connections" (or opening thousands).
        max_connections=_MAX_CONNECTIONS,
        timeout=_POOL_WAIT_S,
        decode_responses=True,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=_retry_once(),
    )
    pool.connection_class = _without_write_tasks(pool.connection_class)
    return Redis.from_pool(pool)


class _TimedWrites:
    """A connection whose writes are bounded by ``asyncio.timeout`` rather than ``asyncio.wait_for``.

    redis-py bounds each write with ``wait_for``, which on Python 3.11 starts a task per command: about
    a third of the client's CPU per command here (roughly 50 of 150 µs). The deadline is the same
    (``socket_timeout``), and so is the error a caller sees when it passes (redis-py's TimeoutError, so
    the store reports Redis as unavailable); only the task is gone."""

    socket_timeout: float | None

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        limit = self.socket_timeout
        self.socket_timeout = None  # redis-py writes directly when there is no timeout to keep
        try:
            async with asyncio.timeout(limit):
                await super().send_packed_command(command, check_health)  # type: ignore[misc]
        except TimeoutError:
            raise redis_errors.TimeoutError("Timeout writing to socket") from None
        finally:
            self.socket_timeout = limit


# One class per kind of connection, not one per client (a client per event loop).
_TIMED_CLASSES: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def _without_write_tasks(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """The URL's connection class (TCP, TLS or Unix socket) with ``_TimedWrites``'s writes. The cluster
    client builds each node's connections itself, so its writes keep redis-py's own timeout."""
    timed = _TIMED_CLASSES.get(connection_class)
    if timed is None:
        timed = _TIMED_CLASSES[connection_class] = type(
            connection_class.__name__, (_TimedWrites, connection_class), {}
        )
    return timed


@functools.cache
def _note_wire_missing() -> None:
    """Say once per process why a plain URL is not served by the store's own connection."""
    log.warning(
        "RedisStore uses redis-py's client for every URL: its own connection is unavailable (%s)",
        _WIRE_MISSING,
    )


class Link:
    """One event loop's client (and connection pool), with the scripts bound to it."""

    def __init__(self, url: str, timeout: float) -> None:
        # Any: the single-server and cluster clients share the commands used here, not one type.
        self.client: Any
        self._sentinels: list[Redis] = []
        if split_url(url).scheme.lower() in _SENTINEL_SCHEMES:
            self.client, self._sentinels = _sentinel_client(url, timeout)
        elif redis_wire is not None and (address := redis_wire.address_of(url)) is not None:
            self.client = redis_wire.WireClient(address, timeout)  # a plain URL: the store's own connection
        else:
            if redis_wire is None:
                _note_wire_missing()
            self.client = _client(url, timeout)
        self.claim_home: AsyncScript = self.client.register_script(lua.CLAIM_HOME)
        self.load: AsyncScript = self.client.register_script(lua.LOAD)
        self.save: AsyncScript = self.client.register_script(lua.SAVE)
        self.delete: AsyncScript = self.client.register_script(lua.DELETE)
        self.append: AsyncScript = self.client.register_script(lua.APPEND)
        self.touch_owner: AsyncScript = self.client.register_script(lua.TOUCH_OWNER)
        self.live_owners: AsyncScript = self.client.register_script(lua.LIVE_OWNERS)
        self.claim_outbox: AsyncScript = self.client.register_script(lua.CLAIM_OUTBOX)
        self.claim_outbox_of: AsyncScript = self.client.register_script(lua.CLAIM_OUTBOX_OF)
        self.settle_outbox: AsyncScript = self.client.register_script(lua.SETTLE_OUTBOX)
        self.list_outbox: AsyncScript = self.client.register_script(lua.LIST_OUTBOX)
        self.prune_outbox: AsyncScript = self.client.register_script(lua.PRUNE_OUTBOX)
        self.issue_link: AsyncScript = self.client.register_script(lua.ISSUE_LINK)
        self.use_link: AsyncScript = self.client.register_script(lua.USE_LINK)
        self.link: AsyncScript = self.client.register_script(lua.LINK)
        self._scripts: dict[str, AsyncScript] = {}
        self._closer: AsyncGenerator[None, None] | None = None
        self._ready = not isinstance(self.client, RedisCluster)
        self._opening = asyncio.Lock()

    async def eviction_policy(self) -> str:
        """The server's ``maxmemory-policy`` (on a cluster, the one node's the client asks). Raises
        redis-py's ``ResponseError`` where CONFIG is refused (managed Redis, ACLs)."""
        if redis_wire is not None and isinstance(self.client, redis_wire.WireClient):
            reply = await self.client.execute("CONFIG", "GET", "maxmemory-policy")
            found = dict(zip(reply[::2], reply[1::2], strict=True))
        else:
            found = await self.client.config_get("maxmemory-policy")
        return str(found.get("maxmemory-policy", "noeviction"))

    def script(self, source: str) -> AsyncScript:
        """A script kept by another module (``troupe.storage.redis_listing``), bound to this client once."""
        found = self._scripts.get(source)
        if found is None:
            found = self._scripts[source] = self.client.register_script(source)
        return found

    async def ready(self) -> None:
        """Learn a cluster's layout before the first command: redis-py's cluster client, left to do it
        on first use, fails some of the commands sent at once (a listing sends one per shard) with
        "'NoneType' object has no attribute 'writelines'" (seen with redis-py 8.1)."""
        if self._ready:
            return
        async with self._opening:
            if not self._ready:
                await self.client.initialize()
                self._ready = True

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
            await self._close_clients()

    async def close(self) -> None:
        if self._closer is not None:
            await self._closer.aclose()
        else:
            await self._close_clients()

    async def _close_clients(self) -> None:
        await self.client.aclose()
        for sentinel in self._sentinels:
            await sentinel.aclose()


# Query parameters of a Redis URL that carry a secret (redis-py reads ``?password=`` as the password;
# ``ssl_password`` unlocks the client's TLS key).
_SECRET_PARAMS = frozenset({"password", "sentinel_password", "ssl_password"})


def redacted(url: str) -> str:
    """The URL without its secrets (the password in ``user:password@`` or ``?password=``), for
    messages, reprs and identities."""
    parts = split_url(url)
    # Split by hand: a Sentinel URL lists several hosts, which urlsplit's host and port cannot parse.
    userinfo, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}:***@{hosts}" if at and ":" in userinfo else parts.netloc
    query = urlencode(
        [
            (k, "***" if k.lower() in _SECRET_PARAMS else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*",
    )
    # Swap the parts in place: urlunsplit would turn unix:///path into unix:/path.
    shown = url.replace(parts.netloc, netloc, 1) if netloc != parts.netloc else url
    return shown.replace(f"?{parts.query}", f"?{query}", 1) if parts.query else shown


__all__ = [
    "REDIS_SCHEMES",
    "UNAVAILABLE",
    "URL_FORMS",
    "Link",
    "check_url",
    "cluster_unreachable",
    "is_cluster",
    "redacted",
]
