"""A driver process for the cancel crash test: starts a run, cancels it, prints ``ACKED <run id>`` the
moment the cancel is acknowledged, and waits to be killed (SIGKILL).

    python cancel_crash_driver.py STORE LOG GATE SCENARIO EXECUTOR [RAY_ADDRESS]

SCENARIO is ``running`` (the run is in its tool when it is cancelled) or ``paused`` (it waits for an
approval). The store never lets a cancelled run's snapshot go (``KeepsCancelled``), so the kill always
lands between the acknowledged cancel and the run's end, whatever the timing.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from cancel_agents import phases, worker

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog


class KeepsCancelled:
    """A SqliteStore whose deletion of a cancelled run never returns (a process that dies right after
    acknowledging a cancel, before it could end the run)."""

    shared_across_processes = True

    def __init__(self, path: str) -> None:
        self.path = path
        self.inner = SqliteStore(path)

    def __reduce__(self) -> Any:
        return (KeepsCancelled, (self.path,))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def delete_run(self, run_id: str, **options: Any) -> None:
        stored = await self.inner.load_run(run_id)
        if stored is not None and stored.state.cancel is not None:
            await asyncio.Event().wait()
        await self.inner.delete_run(run_id, **options)


async def main(store: str, log: str, gate: str, scenario: str, executor: str, address: str | None) -> None:
    calls = CallLog(log)
    agent = worker(calls, gate, require_approval=scenario == "paused")
    Runtime([agent], storage=KeepsCancelled(store), executor=executor, ray_address=address)  # type: ignore[arg-type]
    if scenario == "paused":
        run_id = (await agent.generate("work please")).run_id
    else:
        run_id = (await agent.stream("work please")).run_id
        while phases(calls, "work") != ["started"]:
            await asyncio.sleep(0.02)
    await agent.cancel_run(run_id, reason="crash right after")
    print(f"ACKED {run_id}", flush=True)
    await asyncio.Event().wait()  # killed here


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(*args[:5], args[5] if len(args) > 5 else None))
