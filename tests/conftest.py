"""Shared fixtures: one Ray instance per session, runtimes on both executors, a cross-process call log,
real redis-servers (one for the session, and one per test for tests that crash it), a real
Redis Cluster and a real Sentinel."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from redis_cluster import RedisClusterNodes
from redis_sentinel import RedisSentinelSetup
from redis_server import RedisServer

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@pytest.fixture(autouse=True)
def _cli_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the CLI remembers between commands (troupe.ops.recall) stays in the test's own directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture(scope="session")
def ray_session() -> Any:
    """Ray, started once for the whole session (a start costs seconds); workers can import test modules."""
    import ray
    from troupe.actors.remote import ensure_ray

    ensure_ray()  # the same start-up users get; workers import what this process can (tests included)
    yield ray
    ray.shutdown()


@pytest.fixture(params=["local", "ray"])
def executor(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return str(request.param)


@pytest.fixture
def calls(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.jsonl")


RuntimeFactory = Callable[..., Runtime]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """The suite never skips: every component (redis-server, Ray, Chromium, npm) is installed where it
    runs, so a skip can only mean a test that silently checked nothing. It is reported as a failure."""
    report = yield
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} skipped ({reason}); tests here never skip: install what it needs"
    return report


@pytest.fixture
async def make_runtime(executor: str, tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
    made: list[Runtime] = []

    def make(agents: Any, storage: Any = None, **kwargs: Any) -> Runtime:
        runtime = Runtime(
            agents, storage=storage or SqliteStore(tmp_path / "troupe.db"), executor=executor, **kwargs
        )
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.shutdown()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server for the whole session (127.0.0.1, a free port, its own directory)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server.url
    server.stop()


Started = TypeVar("Started", RedisClusterNodes, RedisSentinelSetup)


def _until_the_session_ends(servers: Started) -> Iterator[Started]:
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    """A real three-master Redis Cluster for the whole session (127.0.0.1, with a password)."""
    yield from _until_the_session_ends(RedisClusterNodes(tmp_path_factory.mktemp("redis-cluster")))


@pytest.fixture(scope="session")
def redis_sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisSentinelSetup]:
    """A real master, replica and Sentinel for the whole session (127.0.0.1, with passwords)."""
    yield from _until_the_session_ends(RedisSentinelSetup(tmp_path_factory.mktemp("redis-sentinel")))


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix of this test's own, so tests sharing the session's server never see each other."""
    return f"test-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def dedicated_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, for tests that kill and restart it."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def terminals() -> Iterator[list[Any]]:
    """Pseudo-terminals a test opened (``test_demo.Terminal``), closed after it whatever happened."""
    opened: list[Any] = []
    yield opened
    for term in opened:
        term.close()


@pytest.fixture
def http_server() -> Iterator[Callable[..., Any]]:
    """Start real HTTP servers (uvicorn on a free port, own thread and loop): ``http_server(build,
    keys=..., open_mode=...)`` with ``build`` returning the Runtime to serve. Stopped after the test."""
    from http_server import LiveServer

    started: list[LiveServer] = []

    def start(build: Callable[[], Runtime], **options: Any) -> LiveServer:
        server = LiveServer(build, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
