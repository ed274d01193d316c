"""Tools that block until the test releases them, so a test can crash a process mid-tool."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

from troupe import create_tool
from troupe.testing import CallLog


class Job(BaseModel):
    name: str


def blocking_tool(log: CallLog, gate: str, **options: Any):
    """Records "started", then waits until the file ``gate`` exists, records "finished" and returns."""

    async def work(inp: Job, ctx: Any) -> dict[str, Any]:
        log.record("work", phase="started", job=inp.name, run_id=ctx.run_id, pid=os.getpid())
        while not os.path.exists(gate):
            await asyncio.sleep(0.02)
        log.record("work", phase="finished", job=inp.name)
        return {"done": inp.name}

    return create_tool("work", "Do a piece of work", Job, work, **options)


async def wait_for(predicate: Any, within: float = 30.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def worker_agent(log: CallLog, gate: str, **tool_options: Any):
    """An agent that calls ``work`` once and then reports what it was told (restart-safe model)."""
    from helpers import echo_model

    from troupe import Agent
    from troupe.testing import tool_call

    return Agent(
        "worker",
        model=echo_model(tool_call("work", {"name": "job-1"}, id="w1")),
        tools=[blocking_tool(log, gate, **tool_options)],
    )


async def kill_actor(actor) -> None:
    """SIGKILL an agent's actor (Ray restarts it) and return once its process is really gone: ``ray.kill``
    only asks, so a tool released right after it could still finish in the dying process."""
    import ray

    pid = int((await actor.call("stats"))["pid"])
    ray.kill(actor.handle, no_restart=False)
    await wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what=f"actor process {pid} to exit")
