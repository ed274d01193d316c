"""``ToolThreads``: the bounded pool of worker threads that sync tools run in.

A sync tool may block (``requests``, a database driver, ``time.sleep``), so it holds one worker thread
instead of the event loop that every run of its agent shares. A call's way there and back is kept short:
the caller's future is answered straight from the worker with one ``call_soon_threadsafe``, without a
``concurrent.futures.Future`` between them (which ``ThreadPoolExecutor`` and ``asyncio.wrap_future``
add, with a lock and two rounds of callbacks): about 40% less time per hop on a 2-core machine, where an
approval cycle's one sync tool call had cost 0.15 ms.

A thread cannot be stopped. A call given up by its caller (the run was stopped, the call timed out)
before its thread took it never runs; one given up while it runs goes on, and its outcome goes to the
caller's ``late`` on the event loop once it ends.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

# asyncio's own default for its executor, which is what the peers' sync tools end up running on.
DEFAULT_TOOL_THREADS = min(32, (os.cpu_count() or 1) + 4)

# Told the outcome of a sync tool that finished after its caller gave up: its result, or the exception
# it raised.
Late = Callable[[Any, BaseException | None], None]

# Where a call stands: waiting for a thread, taken by one, or given up before a thread took it.
_QUEUED, _TAKEN, _DROPPED = range(3)


class _Call:
    """One sync call on its way to a worker thread, and where its outcome goes."""

    __slots__ = ("args", "context", "fn", "future", "late", "loop", "outcome", "stage")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        # The caller's context (tracing spans) goes with the call, as asyncio.to_thread does.
        self.context = contextvars.copy_context()
        self.fn = fn
        self.args = args
        self.stage = _QUEUED  # changed under the pool's lock
        # Who hears the outcome of a call its caller gave up while it ran (set on the event loop).
        self.late: Late | None = None
        # The outcome once it is on the event loop: for ``late``, should the caller give up after it came.
        self.outcome: tuple[Any, BaseException | None] | None = None

    def run(self) -> None:
        """In a worker thread: run the call and send its outcome to the event loop."""
        try:
            result, error = self.context.run(self.fn, *self.args), None
        except BaseException as exc:  # the tool's failure is the caller's to see, whatever it is
            result, error = None, exc
        # The event loop may be gone (the process is ending): then nobody is left to hear it.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._arrived, result, error)

    def _arrived(self, result: Any, error: BaseException | None) -> None:
        """On the event loop: the caller's answer, or ``late``'s if the caller gave up meanwhile. Kept
        too: a caller cancelled after its answer came, before it woke up, hands it to ``late`` itself."""
        self.outcome = (result, error)
        if not self.future.cancelled():
            if error is None:
                self.future.set_result(result)
            else:
                self.future.set_exception(error)
        elif self.late is not None:
            self.late(result, error)


class ToolThreads:
    """The bounded pool that sync tools run in, so a tool that blocks (``requests``, a database driver,
    ``time.sleep``) holds one worker thread instead of the event loop every run of the agent shares.

    Threads start on first use, in the process that runs the tools (a Ray actor builds its own), and
    calls beyond ``size`` queue for a free thread.
    """

    def __init__(self, size: int = DEFAULT_TOOL_THREADS) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"tool_threads must be a positive integer, got {size!r}")
        self.size = size
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Threads waiting for a call that no call has been handed to yet (as ThreadPoolExecutor counts:
        # exact until every thread has started, which is the only time it decides anything).
        self._idle = 0
        _POOLS.add(self)

    async def call(self, fn: Callable[..., Any], *args: Any, late: Late | None = None) -> Any:
        """Run ``fn(*args)`` in a worker thread and return what it returns. A thread cannot be stopped:
        if the caller gives up waiting (its task is cancelled: the run was cancelled, the call timed
        out), ``fn`` runs on, and ``late`` is called on this event loop with its outcome once it ends
        (not if it had not started yet: then it never runs)."""
        call = _Call(asyncio.get_running_loop(), fn, args)
        self._submit(call)
        try:
            return await call.future
        except asyncio.CancelledError:
            with self._lock:
                taken = call.stage == _TAKEN
                if not taken:
                    call.stage = _DROPPED  # no thread will run it now
            if taken and late is not None:
                if call.outcome is not None:  # it ended, and its outcome is here already
                    call.loop.call_soon(late, *call.outcome)  # as ``_arrived`` would: the cancel goes on
                else:  # it runs on: its outcome goes to ``late`` when it comes (``_Call._arrived``)
                    call.late = late
            raise

    def _submit(self, call: _Call) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self.size:
                thread = threading.Thread(
                    target=self._work,
                    args=(self._calls,),
                    name=f"troupe-tool_{len(self._threads)}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
            self._calls.put(call)

    def _work(self, calls: queue.SimpleQueue[_Call | None]) -> None:
        """A worker thread: take calls from ``calls`` (this pool's until it is closed) until told to
        stop (``None``)."""
        while True:
            call = calls.get()
            if call is None:
                return
            with self._lock:
                taken = call.stage == _QUEUED
                if taken:
                    call.stage = _TAKEN
            if taken:
                call.run()
            with self._lock:
                if self._calls is calls:  # not if the pool was closed meanwhile: this thread ends
                    self._idle += 1

    def close(self) -> None:
        """Stop taking calls; a tool still running finishes in its thread, as do calls already queued.
        A later call starts threads anew."""
        with self._lock:
            threads, self._threads, self._idle = self._threads, [], 0
            calls, self._calls = self._calls, queue.SimpleQueue()
        for _ in threads:
            calls.put(None)

    def _join(self) -> None:
        """At the interpreter's exit: let every call already handed over end, as ThreadPoolExecutor's
        threads do (daemon threads, so that an idle one never holds the exit up)."""
        threads = self._threads
        self.close()
        for thread in threads:
            thread.join()


# Every pool of this process, for the exit (``_join``).
_POOLS: weakref.WeakSet[ToolThreads] = weakref.WeakSet()


@atexit.register
def _join_all() -> None:
    for pool in list(_POOLS):
        pool._join()


__all__ = ["DEFAULT_TOOL_THREADS", "Late", "ToolThreads"]
