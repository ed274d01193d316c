"""Shared fixtures: one Ray instance per session, runtimes on both executors, a cross-process call log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@pytest.fixture(scope="session")
def ray_session() -> Any:
    """Ray, started once for the whole session (a start costs seconds); workers can import test modules."""
    import ray

    from actors.remote import ensure_ray

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
