"""Background loops that stop when they are cancelled.

A host's lease renewal, the runtime's reconciler and the notification dispatcher run until their task is
cancelled: by ``close()``, or by ``asyncio.run`` when a program ends without ``shutdown()`` (an outage
raised out of ``generate``, say).
On Python 3.11 that cancel can be lost: ``asyncio.wait_for`` returns normally when the cancel arrives just
as the awaited thing finishes (3.12 rebuilt it on ``asyncio.timeout``). redis-py sends every command
through ``wait_for``, so a cancel that lands while a command goes out is swallowed, most of the time.
A loop that lost its cancel runs on for ever and the program never exits, so these loops wait with
:func:`wait_or_timeout` and ask :func:`stop_if_cancelled` after each round: a swallowed cancel still
shows in ``Task.cancelling()``.
"""

from __future__ import annotations

import asyncio


async def wait_or_timeout(event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` pass; True if it was set. A cancel always propagates."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` if this task was asked to stop, even if something swallowed the cancel."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


__all__ = ["stop_if_cancelled", "wait_or_timeout"]
