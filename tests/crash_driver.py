"""A driver process for crash tests: starts a run, reports it, and waits to be killed (SIGKILL).

    python crash_driver.py STORE LOG GATE SCENARIO EXECUTOR [RAY_ADDRESS]

SCENARIO is ``midtool`` (the run is inside its tool when killed), ``paused`` (the run waits for
approval; the tool is gated) or ``delegated`` (a supervisor's subagent is inside its tool when killed).
"""

from __future__ import annotations

import asyncio
import sys

from blocking import worker_agent
from trees import delegating

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog


async def main(store: str, log: str, gate: str, scenario: str, executor: str, address: str | None) -> None:
    agent = worker_agent(CallLog(log), gate, require_approval=scenario == "paused")
    if scenario == "delegated":
        agent = supervising(agent)
    Runtime(  # binds the agent; it keeps the runtime alive
        [agent],
        storage=SqliteStore(store),
        executor=executor,  # type: ignore[arg-type]
        ray_address=address,
    )
    if scenario == "paused":
        result = await agent.generate("work please")
        print(f"PAUSED {result.run_id}", flush=True)
    else:
        stream = await agent.stream("work please")
        print(f"STARTED {stream.run_id}", flush=True)
    await asyncio.Event().wait()  # keep serving (heartbeat, the run) until killed


def supervising(worker: Agent) -> Agent:
    return Agent("boss", model=delegating("boss", ("worker", "do the job", "b1")), agents={"worker": worker})


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(*args[:5], args[5] if len(args) > 5 else None))
