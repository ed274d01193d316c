"""What each Ray Serve replica of the front-door test serves (``serve_app:runtime``): one agent, ``ops``,
with a gated ``delete_record`` tool, on the test's Redis. When the prompt asks it to (``hold-before``
the tool call, ``hold-after`` it), its model holds that turn until a gate file named after the prompt
exists (in ``SERVE_TEST_GATES``), recording ``held`` with its process id first, so the driver can kill
the replica serving that stream mid-turn. Settings come from the environment, which Ray's workers
inherit from the driver.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from helpers import delete_tool

from troupe import Agent, RedisStore, Runtime
from troupe.testing import CallLog, FunctionModel, text, tool_call


def _held_model(calls: CallLog, gates: str) -> FunctionModel:
    async def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        prompt = next(str(m["content"]) for m in messages if m["role"] == "user")
        gate = os.path.join(gates, prompt)
        results = [m for m in messages if m["role"] == "tool"]
        stage = "after" if results else "before"
        if f"hold-{stage}" in prompt and not os.path.exists(gate):
            calls.record("held", prompt=prompt, stage=stage, pid=os.getpid())
            while not os.path.exists(gate):
                await asyncio.sleep(0.02)
        if not results:
            return tool_call("delete_record", {"id": prompt}, id="c1")
        return text(" | ".join(f"{m['tool_call_id']}={m['content']}" for m in results))

    return FunctionModel(turn)


def runtime() -> Runtime:
    calls = CallLog(os.environ["SERVE_TEST_CALLS"])
    agent = Agent("ops", model=_held_model(calls, os.environ["SERVE_TEST_GATES"]), tools=[delete_tool(calls)])
    store = RedisStore.from_url(os.environ["SERVE_TEST_REDIS"], prefix=os.environ["SERVE_TEST_PREFIX"])
    return Runtime([agent], storage=store, executor="ray")
