"""A host that pauses a run whose notification cannot be delivered yet (its receiver is down), reports
the run, and waits to be killed (SIGKILL) with the event still in the outbox.

    python notify_driver.py STORE PORT CALL_LOG
"""

from __future__ import annotations

import asyncio
import sys

from test_notifications import FAST, SECRET, ops_agent
from troupe.core.notifying.outbox import Notifications, NotificationTarget

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog


async def main(store: str, port: str, log: str) -> None:
    target = NotificationTarget(f"http://127.0.0.1:{port}/hook", SECRET, name="hook")
    runtime = Runtime(
        [ops_agent(CallLog(log))],
        storage=SqliteStore(store),
        executor="local",
        notifications=Notifications((target,), retry=FAST),
    )
    result = await runtime.get_agent("ops").generate("delete rec-1")
    print(f"PAUSED {result.run_id}", flush=True)
    await asyncio.Event().wait()  # keep trying to deliver until killed


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
