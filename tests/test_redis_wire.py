"""The store's own connection to one Redis server (troupe.storage.redis_wire): every command pipelined on
one socket, so what must hold is that each reply reaches the caller that asked, whatever callers give up,
and that the connection logs in, picks its database and survives Redis dropping it.

Everything here runs against a real redis-server; the store semantics are the conformance suite's.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from redis_server import RedisServer
from troupe.core.vocabulary.state import RunState
from troupe.storage import RedisStore
from troupe.storage.redis_wire import Address, WireClient, address_of

from troupe.errors import StorageUnavailableError

pytestmark = pytest.mark.redis

SECRET = "wire-s3cret-pw"


async def test_each_reply_reaches_its_own_caller_when_callers_give_up_midway(
    redis_url: str, redis_prefix: str
):
    """A caller cancelled after its command went out leaves its reply to be read and dropped; the replies
    after it still reach their own callers (a client that forgot the cancelled command would hand each
    later caller the reply before its own)."""
    address = address_of(redis_url)
    assert address is not None
    client = WireClient(address, timeout=5.0)
    keys = [f"{redis_prefix}k{i}" for i in range(60)]
    for i, key in enumerate(keys):
        await client.execute("SET", key, f"value-{i}")

    gets = [asyncio.create_task(client.get(key)) for key in keys]
    await asyncio.sleep(0)  # one turn of the loop: every GET is written, no reply has been read yet
    wire = client._wire
    assert wire is not None and len(wire.waiting) == len(keys)
    given_up = set(range(0, len(keys), 3))
    for i in given_up:
        gets[i].cancel()
    results = await asyncio.gather(*gets, return_exceptions=True)

    for i, result in enumerate(results):
        if i in given_up:
            assert isinstance(result, asyncio.CancelledError)
        else:
            assert result == f"value-{i}", (i, result)
    assert await client.get(keys[0]) == "value-0"  # and the next command after them
    assert not wire.waiting and wire.lost is None
    await client.execute("DEL", *keys)
    await client.aclose()


@pytest.mark.parametrize("via", ["tcp", "unix"])
async def test_the_store_logs_in_and_uses_the_database_its_url_names(tmp_path: Path, via: str):
    socket_path = tmp_path / "r.sock"
    settings = {"requirepass": SECRET, "unixsocket": str(socket_path), "unixsocketperm": "700"}
    with RedisServer(tmp_path / "redis", settings=settings) as server:
        url = (
            f"redis://:{SECRET}@127.0.0.1:{server.port}/3"
            if via == "tcp"
            else f"unix://:{SECRET}@{socket_path}?db=3"
        )
        assert address_of(url) is not None  # served by the store's own connection
        store = RedisStore(url, prefix="wire:")
        await store.create_run(RunState(run_id="r1", agent_id="a"))
        assert isinstance((await store._link()).client, WireClient)
        assert (await store.load_run("r1")) is not None
        await store.close()

        plain = server.client(decode_responses=True)
        assert plain.keys("wire:*") == []  # nothing in database 0
        plain.select(3)
        assert "wire:run:r1" in plain.keys("wire:*")
        plain.close()


def _keepalive_of_sockets_to(port: int) -> list[tuple[int, int]]:
    """(SO_KEEPALIVE, idle seconds before the first probe) of every TCP socket of this process connected
    to ``port``, read from the kernel through a duplicate of each descriptor, whichever client made it."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue  # not a socket (or closed meanwhile)
        with sock:
            try:
                peer = sock.getpeername()
            except OSError:
                continue
            if sock.family == socket.AF_INET and sock.type == socket.SOCK_STREAM and peer[1] == port:
                found.append(
                    (
                        sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    )
                )
    return found


@pytest.mark.parametrize("client", ["own connection", "redis-py"])
async def test_every_tcp_connection_to_redis_keeps_itself_alive(tmp_path: Path, client: str):
    """TCP keepalive, probing after 30 s idle, on the store's own connection as on redis-py's (its default
    from redis-py 8 on): a connection a NAT or load balancer dropped between approvals is then kept
    open, or found dead by the kernel, instead of failing the next decision after a whole timeout."""
    with RedisServer(tmp_path / "redis") as server:
        # An option the own connection leaves to redis-py's client (``troupe.storage.redis_wire``).
        url = server.url + ("?client_name=keepalive-test" if client == "redis-py" else "")
        store = RedisStore(url, prefix="wire:")
        await store.create_run(RunState(run_id="r1", agent_id="a"))
        assert isinstance((await store._link()).client, WireClient) == (client == "own connection")
        assert _keepalive_of_sockets_to(server.port) == [(1, 30)]
        await store.close()


async def test_a_wrong_password_is_refused_as_unavailable_without_showing_it(tmp_path: Path):
    with RedisServer(tmp_path / "redis", settings={"requirepass": SECRET}) as server:
        store = RedisStore(f"redis://:not-{SECRET}@127.0.0.1:{server.port}/0", prefix="wire:")
        with pytest.raises(StorageUnavailableError) as refused:
            await store.load_run("r1")
        assert "AuthenticationError" in str(refused.value)
        assert SECRET not in str(refused.value) and SECRET not in repr(refused.value.__cause__)
        await store.close()


async def test_a_connection_redis_dropped_while_idle_costs_the_next_command_nothing(
    dedicated_redis: RedisServer,
):
    """Redis closed the store's idle connection (a restart, ``CLIENT KILL``, an idle timeout) and the
    store has not noticed yet: its next command is sent on it, fails, and is sent again on a new one.
    Scripts Redis no longer knows (``SCRIPT FLUSH``, as after a restart) are sent whole."""
    store = RedisStore(dedicated_redis.url, prefix="idle:")
    await store.create_run(RunState(run_id="r1", agent_id="a"))
    plain = dedicated_redis.client()
    # Blocking calls: the store's loop does not run between them and the store's next command, so the
    # store cannot have seen the connection close before it sends on it.
    plain.script_flush()
    assert plain.client_kill_filter(skipme=True) >= 1
    stored = await store.load_run("r1")
    assert stored is not None and stored.version == 1
    assert await store.save_run(stored.state, expected_version=1) == 2
    plain.close()
    await store.close()


@pytest.mark.parametrize(
    ("url", "served"),
    [
        ("redis://127.0.0.1:6379/0", Address(host="127.0.0.1", port=6379)),
        (
            f"redis://user:{SECRET}@10.1.2.3:7000/5",
            Address(host="10.1.2.3", port=7000, db=5, username="user", password=SECRET),
        ),
        (f"redis://127.0.0.1:6379/0?password={SECRET}", Address(host="127.0.0.1", password=SECRET)),
        ("unix:///run/redis.sock?db=2", Address(path="/run/redis.sock", db=2)),
        ("rediss://127.0.0.1:6379/0?ssl_ca_certs=/etc/ca.pem", Address(host="127.0.0.1", port=6379)),
        ("rediss://127.0.0.1:6379/0?ssl_ciphers_typo=x", None),  # an option redis-py reports better
        ("redis://127.0.0.1:6379/0?socket_timeout=1", None),  # an option: redis-py's client
        ("redis+sentinel://127.0.0.1:26379/svc", None),
        ("redis+cluster://127.0.0.1:7000", None),
    ],
)
def test_which_urls_the_stores_own_connection_serves(url: str, served: Address | None):
    found = address_of(url)
    assert found == served
    if found is not None:
        assert SECRET not in repr(found)
        assert (found.tls is not None) == url.startswith("rediss:")


async def test_callers_waiting_on_an_unanswered_login_share_one_connection_attempt(tmp_path: Path):
    """Redis accepts the connection but answers nothing (stopped: the kernel still completes the TCP
    handshake). Ten callers wait for one attempt and fail together after one timeout; taking turns,
    they would open ten connections and the last would wait ten timeouts."""
    with RedisServer(tmp_path / "redis", settings={"requirepass": SECRET}) as server:
        plain = server.client()
        opened = plain.info("stats")["total_connections_received"]
        store = RedisStore(f"redis://:{SECRET}@127.0.0.1:{server.port}/0", prefix="wire:", timeout=0.5)
        os.kill(server.pid, signal.SIGSTOP)
        try:
            failed = await asyncio.wait_for(
                asyncio.gather(*(store.load_run(f"r{i}") for i in range(10)), return_exceptions=True), 20
            )
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert all(isinstance(e, StorageUnavailableError) and "Timeout" in str(e) for e in failed), failed
        assert await store.load_run("r1") is None  # and it connects again afterwards
        # Redis accepts what waited in its backlog (in order) once it runs again: the one attempt, then
        # the connection that just answered.
        assert plain.info("stats")["total_connections_received"] == opened + 2
        await store.close()
        plain.close()


# Run in a fresh interpreter: the own connection's imports fail there, as with a redis-py that moved
# its parser module or an install without hiredis.
_WITHOUT_THE_WIRE = """
import asyncio, importlib.abc, sys

missing = sys.argv[1]
if missing == "hiredis":
    class NoHiredis(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "hiredis" or name.startswith("hiredis."):
                raise ImportError(f"No module named {name!r}")
            return None
    sys.meta_path.insert(0, NoHiredis())
else:  # a redis-py whose private parser module no longer has BaseParser
    import redis._parsers.base
    del redis._parsers.base.BaseParser

from troupe.core.vocabulary.state import RunState
from troupe.storage import RedisStore

async def main():
    for name in ("one", "two"):
        store = RedisStore(sys.argv[2], prefix=sys.argv[3] + name + ":")
        await store.create_run(RunState(run_id="r1", agent_id="a"))
        loaded = await store.load_run("r1")
        print(type((await store._link()).client).__module__, loaded.version, loaded.state.agent_id)
        await store.close()

asyncio.run(main())
"""


@pytest.mark.parametrize("missing", ["hiredis", "BaseParser"])
def test_without_what_the_own_connection_builds_on_the_store_uses_redis_pys_client(
    redis_url: str, redis_prefix: str, missing: str
):
    """hiredis is optional for redis-py, and ``redis._parsers`` is private: without either, importing the
    store must still work and every URL go through redis-py's client, saying why once per process."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_THE_WIRE, missing, redis_url, redis_prefix],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["redis.asyncio.client 1 a"] * 2 + [""]
    assert done.stderr.count("its own connection is unavailable") == 1, done.stderr
    assert missing in done.stderr
