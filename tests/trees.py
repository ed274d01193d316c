"""Supervisor trees the tests (and their subprocess drivers) build: restart-safe scripted models."""

from __future__ import annotations

from typing import Any

from helpers import delete_tool, echo_model

from troupe import Agent
from troupe.testing import CallLog, FunctionModel, text, tool_call


def delegating(name: str, *calls: tuple[str, str, str]) -> FunctionModel:
    """Delegates ``(key, prompt, call_id)`` calls in one step, then reports its tool results as
    ``"<name>: <id>=<content> | ..."``."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return [tool_call(f"agent-{key}", {"prompt": prompt}, id=cid) for key, prompt, cid in calls]
        return text(f"{name}: " + " | ".join(f"{m['tool_call_id']}={m['content']}" for m in results))

    return FunctionModel(turn)


def leaf(calls: CallLog, agent_id: str = "data", **tool_options: Any) -> Agent:
    return Agent(
        agent_id,
        description="Looks after records",
        model=echo_model(tool_call("delete_record", {"id": "u1"}, id="leaf-1")),
        tools=[delete_tool(calls, **tool_options)],
    )


def two_levels(calls: CallLog) -> Agent:
    return Agent("sup", model=delegating("sup", ("data", "delete u1", "d1")), agents={"data": leaf(calls)})


def three_levels(calls: CallLog) -> Agent:
    mid = Agent("mid", model=delegating("mid", ("data", "delete u1", "m1")), agents={"data": leaf(calls)})
    return Agent("top", model=delegating("top", ("mid", "clean up", "t1")), agents={"mid": mid})
