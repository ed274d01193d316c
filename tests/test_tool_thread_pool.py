"""``ToolThreads``, the pool sync tools run in (issue 42 made its hop shorter): a call's result, error and
context reach the caller; a call given up before a thread took it never runs; one given up while it ran
hands its outcome to ``late``, also when that outcome came just before the cancel; a closed pool's calls
finish, and a later call still runs; a process that ends while a call runs waits for it. Real threads
throughout, held by ``threading.Event`` gates the test opens."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from troupe.core.vocabulary.tool_threads import ToolThreads

WHO = contextvars.ContextVar("who", default="nobody")
GATE_S = 30.0  # a gate left shut fails the test instead of hanging it


class Held:
    """A sync function that says when it started and waits for the test to let it finish."""

    def __init__(self, result: Any = "done", error: Exception | None = None) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.ran = 0
        self.result = result
        self.error = error

    def __call__(self) -> Any:
        self.ran += 1
        self.started.set()
        assert self.go.wait(GATE_S), "the test never let the call finish"
        if self.error is not None:
            raise self.error
        return self.result


async def _started(held: Held) -> None:
    assert await asyncio.to_thread(held.started.wait, GATE_S), "the call never started"


class Told:
    """A ``late``: what it was told, and when the loop had it."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[Any, BaseException | None]] = []
        self.came = asyncio.Event()

    def __call__(self, result: Any, error: BaseException | None) -> None:
        self.outcomes.append((result, error))
        self.came.set()


@pytest.fixture
def pool() -> Any:
    threads = ToolThreads(1)
    yield threads
    threads.close()


async def test_a_call_returns_its_result_raises_its_error_and_keeps_the_callers_context(pool: Any) -> None:
    WHO.set("the caller")
    assert await pool.call(lambda a, b: (a + b, WHO.get()), 2, 3) == (5, "the caller")
    with pytest.raises(ZeroDivisionError):
        await pool.call(lambda: 1 / 0)
    assert threading.current_thread().name != await pool.call(lambda: threading.current_thread().name)


async def test_a_call_given_up_before_a_thread_took_it_never_runs(pool: Any) -> None:
    first, second = Held(), Held()
    told = Told()
    running = asyncio.create_task(pool.call(first))
    await _started(first)  # the pool's one thread is busy: the next call waits in the queue
    queued = asyncio.create_task(pool.call(second, late=told))
    await asyncio.sleep(0)  # it is handed to the pool
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    second.go.set()
    first.go.set()
    assert await running == "done"
    assert await pool.call(lambda: "after") == "after"  # the thread went past the dropped call
    assert second.ran == 0 and told.outcomes == []


@pytest.mark.parametrize("error", [None, ValueError("the tool failed late")])
async def test_a_call_given_up_while_it_runs_hands_its_outcome_to_late(
    pool: Any, error: Exception | None
) -> None:
    held = Held(result={"paid": 10}, error=error)
    told = Told()
    call = asyncio.create_task(pool.call(held, late=told))
    await _started(held)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert told.outcomes == []
    held.go.set()
    await asyncio.wait_for(told.came.wait(), GATE_S)
    assert told.outcomes == [(None, error) if error else ({"paid": 10}, None)]


@pytest.mark.parametrize("answered", [False, True], ids=["outcome-on-its-way", "outcome-given"])
async def test_an_outcome_that_came_just_before_the_cancel_still_goes_to_late(
    pool: Any, answered: bool
) -> None:
    held = Held(result="sent")
    told = Told()
    call = asyncio.create_task(pool.call(held, late=told))
    await _started(held)
    held.go.set()
    # Holding the loop: the thread ends and hands its outcome to the loop, which has not run it yet.
    deadline = time.monotonic() + GATE_S
    while not pool._idle and time.monotonic() < deadline:
        time.sleep(0.001)
    if answered:
        await asyncio.sleep(0)  # one turn: the outcome answers the call, whose task has not woken yet
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(told.came.wait(), GATE_S)
    assert told.outcomes == [("sent", None)]


async def test_a_closed_pool_lets_its_calls_finish_and_a_later_call_still_runs(pool: Any) -> None:
    held = Held()
    running = asyncio.create_task(pool.call(held))
    await _started(held)
    (old,) = pool._threads
    pool.close()
    held.go.set()
    assert await running == "done"
    await asyncio.to_thread(old.join, GATE_S)  # it finished its call, and ended
    assert not old.is_alive()
    # The closed pool's thread was not counted as idle: a new call starts a thread of its own.
    assert await asyncio.wait_for(pool.call(lambda: "new"), 10) == "new"


def test_a_process_that_ends_while_a_call_runs_waits_for_it(tmp_path: Path) -> None:
    marker = tmp_path / "written"
    script = textwrap.dedent(
        f"""
        import asyncio, threading, time
        from troupe.core.vocabulary.tool_threads import ToolThreads

        started = threading.Event()

        def write():
            started.set()
            time.sleep(0.5)  # still running when the event loop and the interpreter end
            open({str(marker)!r}, "w").write("written")

        async def main():
            pool = ToolThreads()
            call = asyncio.ensure_future(pool.call(write))
            await asyncio.to_thread(started.wait)
            call.cancel()

        asyncio.run(main())
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert marker.read_text() == "written"
