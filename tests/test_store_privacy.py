"""What a store holds stays with its user: a new SQLite store's files are 0600 (paused calls' arguments
live there), and a Redis password, given in the URL's userinfo or as ``?password=`` (of one server or of a
Redis Cluster), and a TLS key's passphrase (``?ssl_password=``), show up in no repr, identity, log line,
error message or HTTP error body."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import httpx
import pytest
from helpers import delete_tool, one_call
from http_server import ADMIN, KEYS
from redis_server import free_port

from troupe import Agent, RedisStore, Runtime, SqliteStore
from troupe.errors import StorageUnavailableError
from troupe.testing import CallLog


async def test_a_new_sqlite_store_and_its_wal_files_are_readable_by_their_owner_only(tmp_path: Path):
    previous = os.umask(0o022)  # the usual umask, which would leave a plain new file world-readable
    calls = CallLog(tmp_path / "calls.jsonl")
    path = tmp_path / "sub" / "troupe.db"
    agent = Agent("ops", model=one_call("delete_record", {"id": "secret-record"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(path), executor="local")
    try:
        paused = await agent.generate("delete it")
        assert paused.finish_reason == "suspended"
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    finally:
        await runtime.shutdown()
        os.umask(previous)
    assert files == {"troupe.db": 0o600, "troupe.db-wal": 0o600, "troupe.db-shm": 0o600}


async def test_the_demos_database_is_private_though_its_records_are_written_first(tmp_path: Path, caplog):
    """`troupe serve --demo` keeps the demo's records in its run store's file, and writes them before the
    store opens it: the file is still made 0600, and the store does not warn about its own file."""
    from troupe.cli import _demo_runtime

    previous = os.umask(0o022)
    path = tmp_path / "demo.db"
    try:
        runtime = _demo_runtime(str(path), "local", None)
        paused = await runtime.get_agent("records-assistant").generate("Please delete record rec-001")
        assert paused.finish_reason == "suspended"
        await runtime.shutdown()
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "readable by every user" not in caplog.text


SECRET = "s3cret-in-query"
OTHER_SECRET = "s3cret-in-userinfo"
KEY_PASSPHRASE = ("rediss", "rediss+sentinel")


def _dead_redis_url(scheme: str = "redis", options: str = "&socket_timeout=1") -> str:
    # A TLS URL may also carry the passphrase of the client's private key (not to a cluster: redis-py's
    # cluster client takes no such option).
    tls = f"&ssl_password={SECRET}" if scheme in KEY_PASSPHRASE else ""
    return f"{scheme}://:{OTHER_SECRET}@127.0.0.1:{free_port()}/0?password={SECRET}{tls}{options}"


# One server, TLS, a Redis Cluster and a Sentinel (plain or TLS), the last two with clients of their own.
SCHEMES = ["redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"]


@pytest.mark.parametrize("scheme", SCHEMES)
# With an option the URL goes through redis-py's client; without, one server's URL is served by the
# store's own connection (troupe.storage.redis_wire).
@pytest.mark.parametrize("options", ["&socket_timeout=1", ""], ids=["redis-py", "own"])
async def test_a_redis_password_is_in_no_repr_identity_log_or_error(
    caplog: pytest.LogCaptureFixture, scheme: str, options: str
):
    caplog.set_level(logging.DEBUG)
    store = RedisStore.from_url(_dead_redis_url(scheme, options), prefix="x:")
    with pytest.raises(StorageUnavailableError) as caught:
        await store.load_run("r1")
    await store.close()
    shown = [repr(store), store.identity, str(caught.value), repr(caught.value.details), caplog.text]
    for text in shown:
        assert SECRET not in text and OTHER_SECRET not in text, text
    assert "password=***" in str(caught.value) and f"{scheme}://:***@127.0.0.1" in str(caught.value)
    if scheme in KEY_PASSPHRASE:
        assert "ssl_password=***" in str(caught.value)


@pytest.mark.redis
def test_a_redis_password_is_not_in_an_http_error_body(http_server, tmp_path: Path):
    calls = CallLog(tmp_path / "calls.jsonl")

    def build() -> Runtime:
        agent = Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(calls)])
        return Runtime([agent], storage=RedisStore.from_url(_dead_redis_url()), executor="local")

    server = http_server(build, keys=KEYS)
    response = httpx.get(f"{server.url}/api/agents/ops/suspended-runs", headers=ADMIN, timeout=30)
    assert response.status_code == 503, response.text
    assert SECRET not in response.text and OTHER_SECRET not in response.text
    assert "STORAGE_UNAVAILABLE" in response.text


def test_a_sentinel_url_with_several_hosts_is_shown_without_its_passwords():
    url = f"redis+sentinel://user:{OTHER_SECRET}@10.0.0.1:26379,[::1]:26380/svc?sentinel_password={SECRET}"
    store = RedisStore.from_url(url)
    for text in (repr(store), store.identity):
        assert SECRET not in text and OTHER_SECRET not in text, text
        assert "user:***@10.0.0.1:26379,[::1]:26380/svc?sentinel_password=***" in text
