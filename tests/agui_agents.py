"""The agents the AG-UI tests serve (tests/test_agui.py, tests/test_agui_browser.py), on either executor.

- ``ops`` deletes one record (approval needed);
- ``planner`` asks for a city (``suspend()``, answered against ``CityAnswer``);
- ``pair`` deletes two records in one step (two pauses at once);
- ``boss`` delegates to ``clerk``, whose delete needs approval (a subagent's pause).

Every model answers, once it has tool results, with what each tool told it (``helpers.echo_model``), so
a test reads what the model was told from the run's final text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers import delete_tool, echo_model, weather_tool

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, tool_call

KEYS = {
    "key-a": {"name": "tenant-a", "resources": ["a1", "a2"]},
    "key-b": {"name": "tenant-b", "resources": ["b1"]},
}


def agui_agents(calls: CallLog) -> list[Agent]:
    clerk = Agent(
        "clerk",
        model=echo_model(tool_call("delete_record", {"id": "x-9"}, id="call-1")),
        tools=[delete_tool(calls)],
    )
    return [
        Agent(
            "ops",
            description="Deletes records",
            model=echo_model(tool_call("delete_record", {"id": "abc-123"}, id="call-1")),
            tools=[delete_tool(calls, allow_edited_args=True)],
        ),
        Agent("planner", model=echo_model(tool_call("weather", {}, id="w1")), tools=[weather_tool(calls)]),
        Agent(
            "pair",
            model=echo_model(
                tool_call("delete_record", {"id": "a"}, id="call-a"),
                tool_call("delete_record", {"id": "b"}, id="call-b"),
            ),
            tools=[delete_tool(calls)],
        ),
        Agent(
            "boss",
            model=echo_model(tool_call("agent-clerk", {"prompt": "delete x-9"}, id="d1")),
            agents={"clerk": clerk},
        ),
    ]


def agui_runtime(
    db: Path, calls: CallLog, executor: str = "local", more: Callable[[], list[Agent]] = list
) -> Callable[[], Runtime]:
    """A factory of the runtime a test server serves (SQLite at ``db``: it outlives a server restart),
    with the agents ``more`` makes besides these."""

    def build() -> Runtime:
        agents = agui_agents(calls) + more()
        return Runtime(agents, storage=SqliteStore(db), executor=executor)  # type: ignore[arg-type]

    return build
