"""RedisStore's own connection to one Redis server: one socket per event loop, every command pipelined on
it, replies parsed by hiredis and handed back in the order the commands went out.

Why not redis-py's client here: measured on one core, its asyncio client spends about 100 µs of CPU on a
GET (a pool checkout and release, retry and observability wrappers, two or three loop iterations), and
this connection about 30 µs. The store makes three to six commands per approval cycle, so that is a
tenth of a cycle on Ray. redis-py still serves what this connection does not (Sentinel, Cluster, a
query option other than a password, a database or TLS's ``ssl_*``), reads the TLS options (so
``rediss://`` checks the server's certificate and name by default, as redis-py does) and decides
what each Redis error is (``BaseParser.parse_error``, from a private module: where it or hiredis is
missing, troupe.storage.redis_link serves every URL with redis-py's client instead).

How it stays correct:
- Redis answers a connection's commands in the order it read them, so each command's future waits in
  a FIFO. A caller that gives up (cancelled) leaves its future there; its reply is read and dropped,
  so no reply ever reaches the wrong caller.
- A reply that does not come within ``timeout`` aborts the connection: every command still waiting
  fails (Redis is unreachable for all of them alike), and bytes not yet sent are never sent, so a
  half-written command cannot complete later.
- A lost connection fails the commands waiting on it; the next command opens a new one. A command that
  failed with a connection error is sent once more on a new connection, as redis-py's retry did
  (the store's writes are compare-and-set scripts, so one that did land is refused, not doubled).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
from collections import deque
from dataclasses import dataclass, field
from typing import Any, cast

import hiredis
from redis import exceptions as redis_errors
from redis._parsers.base import BaseParser
from redis.asyncio.connection import (
    Connection,
    RedisSSLContext,
    SSLConnection,
    UnixDomainSocketConnection,
    parse_url,
)

# The URL options this connection understands (and, with TLS, every ``ssl_*`` option); any other makes
# the store use redis-py's client.
_SUPPORTED = frozenset({"host", "port", "path", "db", "username", "password", "connection_class"})


@dataclass(frozen=True, repr=False)
class Address:
    """Where one Redis server listens, how to log in, and with TLS, how to check the server."""

    host: str | None = None
    port: int = 6379
    path: str | None = None  # a Unix socket
    db: int = 0
    username: str | None = None
    password: str | None = None
    # redis-py's reading of the URL's ``ssl_*`` options (its defaults: a certificate is required, and
    # checked against the host's name), so ``rediss://`` means the same whichever client serves it.
    tls: RedisSSLContext | None = field(default=None, compare=False)

    def __repr__(self) -> str:  # never the password
        where = self.path or f"{self.host}:{self.port}"
        return f"Address({where!r}, db={self.db}{', tls' if self.tls else ''})"


def address_of(url: str) -> Address | None:
    """The server a ``redis://``, ``rediss://`` or ``unix://`` URL names, or None when the URL needs
    redis-py's client (Sentinel, Cluster, or an option such as ``?socket_timeout=``)."""
    try:
        options = parse_url(url)
    except ValueError:
        return None
    kind = options.get("connection_class", Connection)
    tls_options: dict[str, Any] = (
        {k: v for k, v in options.items() if k.startswith("ssl_")} if kind is SSLConnection else {}
    )
    if not set(options) - set(tls_options) <= _SUPPORTED:
        return None
    if kind not in (Connection, SSLConnection, UnixDomainSocketConnection):
        return None
    try:
        tls = SSLConnection(**tls_options).ssl_context if kind is SSLConnection else None
    except (TypeError, ValueError, redis_errors.RedisError):
        return None  # an option redis-py's client reports better
    return Address(
        host=options.get("host", "localhost") if kind is not UnixDomainSocketConnection else None,
        port=int(options.get("port", 6379)),
        path=options.get("path") if kind is UnixDomainSocketConnection else None,
        db=int(options.get("db", 0)),
        username=options.get("username"),
        password=options.get("password"),
        tls=tls,
    )


# TCP keepalive on every TCP connection, with redis-py's own defaults (from redis-py 8 on): probes after
# 30 s idle, every 5 s, 3 unanswered and the connection is dead. Without it, a connection that a NAT or
# load balancer dropped while idle (overnight, between approvals) is found dead only by the next
# command's timeout, which then fails a decision as an outage; with it, the kernel keeps such mappings
# alive and reports a dead peer, so the next command opens a new connection. (Constants a platform
# lacks are left out: macOS names the idle time TCP_KEEPALIVE.)
_IDLE = getattr(socket, "TCP_KEEPIDLE", getattr(socket, "TCP_KEEPALIVE", None))
_KEEPALIVE = {
    option: value
    for option, value in (
        (_IDLE, 30),
        (getattr(socket, "TCP_KEEPINTVL", None), 5),
        (getattr(socket, "TCP_KEEPCNT", None), 3),
    )
    if option is not None
}


def keep_alive(transport: asyncio.BaseTransport) -> None:
    """Turn TCP keepalive on for ``transport``'s socket (see ``_KEEPALIVE``); a Unix socket needs none."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in _KEEPALIVE.items():
        sock.setsockopt(socket.IPPROTO_TCP, option, value)


def encode(*args: Any) -> bytes:
    """One command in RESP, its arguments encoded as redis-py encodes them."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, bool) or not isinstance(arg, int | float):
            raise redis_errors.DataError(
                f"a Redis argument must be bytes, str, int or float, not {type(arg).__name__}"
            )
        else:
            data = (repr(arg) if isinstance(arg, float) else str(arg)).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


class _Wire(asyncio.Protocol):
    """One socket: commands written in order, replies matched to them in the same order."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(encoding="utf-8")
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not an asyncio.Transport subclass, so no isinstance check).
        self.transport = cast(asyncio.Transport, transport)
        keep_alive(transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                self._fail(redis_errors.ConnectionError(f"{self.label} broke the protocol: {exc}"))
                return
            if reply is False:
                return
            if not self.waiting:
                self._fail(redis_errors.ConnectionError(f"{self.label} sent a reply nobody asked for"))
                return
            waiter = self.waiting.popleft()
            if not waiter.done():  # a caller that gave up: its reply is read and dropped
                waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(
            self.lost
            or redis_errors.ConnectionError(f"Connection to {self.label} closed: {exc or 'by the server'}")
        )

    def _fail(self, error: Exception) -> None:
        self.lost = self.lost or error
        if self.transport is not None:
            self.transport.abort()
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():  # an exception of its own each (a raised one gathers its traceback)
                waiter.set_exception(type(error)(*error.args))

    def send(self, command: bytes) -> asyncio.Future[Any]:
        if self.lost is not None or self.transport is None:
            raise redis_errors.ConnectionError(f"Connection to {self.label} is closed")
        waiter = asyncio.get_running_loop().create_future()
        self.waiting.append(waiter)
        self.transport.write(command)
        return waiter

    async def call(self, command: bytes, limit_s: float | None) -> Any:
        waiter = self.send(command)
        try:
            async with asyncio.timeout(limit_s):
                reply = await waiter
        except TimeoutError:
            assert self.transport is not None
            doing = "writing to" if self.transport.get_write_buffer_size() else "reading from"
            error = redis_errors.TimeoutError(f"Timeout {doing} {self.label}")
            self._fail(error)
            raise error from None
        if isinstance(reply, hiredis.ReplyError):
            raise BaseParser.parse_error(str(reply))
        return reply

    def close(self) -> None:
        self._fail(redis_errors.ConnectionError(f"Connection to {self.label} closed by the store"))


class WireClient:
    """The commands RedisStore sends, over one ``_Wire`` per client (a client per event loop); shaped
    like redis-py's client (``decode_responses=True``) so the store uses either without knowing."""

    def __init__(self, address: Address, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.label = f"Redis at {address.path or f'{address.host}:{address.port}'}"
        self._wire: _Wire | None = None
        self._opening: asyncio.Task[_Wire] | None = None

    async def _open(self) -> _Wire:
        """The live connection, or the one being opened. Callers that come while it opens wait for that
        attempt and share its outcome: with Redis unreachable they all fail after one ``timeout``, not
        one after another (which a lock around the attempt would make them do)."""
        wire = self._wire
        if wire is not None and wire.lost is None:
            return wire
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._connect())
            self._opening.add_done_callback(self._opened)
        # Shielded: a caller that gives up does not cancel the attempt the others wait for.
        return await asyncio.shield(self._opening)

    def _opened(self, attempt: asyncio.Task[_Wire]) -> None:
        self._opening = None
        if not attempt.cancelled() and attempt.exception() is None:
            self._wire = attempt.result()

    async def _connect(self) -> _Wire:
        loop = asyncio.get_running_loop()
        address = self.address
        wire = _Wire(self.label)
        try:
            async with asyncio.timeout(self.timeout):
                if address.path is not None:
                    await loop.create_unix_connection(lambda: wire, address.path)
                else:
                    tls = address.tls.get() if address.tls is not None else None
                    await loop.create_connection(
                        lambda: wire, address.host or "localhost", address.port, ssl=tls
                    )
        except TimeoutError:
            raise redis_errors.TimeoutError(f"Timeout connecting to {self.label}") from None
        except OSError as exc:
            raise redis_errors.ConnectionError(f"Error connecting to {self.label}: {exc}") from None
        login = []
        if address.password is not None:
            credentials = (address.username, address.password) if address.username else (address.password,)
            login.append(encode("AUTH", *credentials))
        if address.db:
            login.append(encode("SELECT", address.db))
        try:
            for command in login:
                await wire.call(command, self.timeout)
        except BaseException:
            wire.close()
            raise
        return wire

    async def execute(self, *args: Any) -> Any:
        command = encode(*args)
        try:
            return await (await self._open()).call(command, self.timeout)
        except redis_errors.TimeoutError:
            raise
        except redis_errors.ConnectionError:
            # A connection Redis closed while idle (a restart) fails its next command: once more, anew.
            return await (await self._open()).call(command, self.timeout)

    def register_script(self, source: str) -> WireScript:
        return WireScript(self, source)

    async def aclose(self) -> None:
        if self._opening is not None:  # let it finish, so that its connection is closed too
            with contextlib.suppress(Exception):
                await asyncio.shield(self._opening)
        if self._wire is not None:
            self._wire.close()
            self._wire = None

    # The commands the store sends outside its scripts, with redis-py's reply shapes.
    async def get(self, key: str) -> str | None:
        return await self.execute("GET", key)

    async def hget(self, key: str, field: str) -> str | None:
        return await self.execute("HGET", key, field)

    async def hmget(self, key: str, fields: list[str]) -> list[str | None]:
        return await self.execute("HMGET", key, *fields)

    async def lindex(self, key: str, index: int) -> str | None:
        return await self.execute("LINDEX", key, index)

    async def lrange(self, key: str, start: int, end: int) -> list[str]:
        return await self.execute("LRANGE", key, start, end)

    async def rpush(self, key: str, *values: str) -> int:
        return int(await self.execute("RPUSH", key, *values))

    async def zrange(self, key: str, start: int, end: int) -> list[str]:
        return await self.execute("ZRANGE", key, start, end)

    async def zrangebyscore(
        self,
        key: str,
        low: float | str,
        high: float | str,
        start: int | None = None,
        num: int | None = None,
        withscores: bool = False,
    ) -> list[Any]:
        args: list[Any] = ["ZRANGEBYSCORE", key, low, high]
        if withscores:
            args.append("WITHSCORES")
        if start is not None and num is not None:
            args += ["LIMIT", start, num]
        found = await self.execute(*args)
        if not withscores:
            return found
        return [(found[i], float(found[i + 1])) for i in range(0, len(found), 2)]


class WireScript:
    """A Lua script called by its SHA1; sent whole once if Redis does not know it yet (after a restart
    or ``SCRIPT FLUSH``), which also loads it for the calls after."""

    def __init__(self, client: WireClient, source: str) -> None:
        self.client = client
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    async def __call__(
        self, keys: list[Any] | tuple[Any, ...] = (), args: list[Any] | tuple[Any, ...] = ()
    ) -> Any:
        try:
            return await self.client.execute("EVALSHA", self.sha, len(keys), *keys, *args)
        except redis_errors.NoScriptError:
            return await self.client.execute("EVAL", self.source, len(keys), *keys, *args)


__all__ = ["Address", "WireClient", "WireScript", "address_of", "encode"]
