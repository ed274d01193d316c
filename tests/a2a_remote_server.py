"""A second Troupe process serving agents over A2A, for the remote-agent tests.

    python a2a_remote_server.py DB LOG PORTFILE

Serves ``mid`` (which delegates to ``leaf``, whose ``delete_record`` needs approval), ``planner``
(whose ``weather`` tool asks for a city), ``batch`` (two gated calls in one step) and ``slow`` (whose
``work`` tool never finishes by itself) on 127.0.0.1, a free port written to PORTFILE once it listens,
behind the key ``key-sup`` (resource ``r1``); runs until it is terminated.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from cancel_agents import work_tool
from helpers import delete_tool, echo_model, weather_tool
from http_server import LiveServer

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, tool_call

KEYS = {"key-sup": {"name": "supervisor", "resources": ["r1"]}}


def agents(calls: CallLog, never: str) -> list[Agent]:
    leaf = Agent(
        "leaf",
        description="Deletes records",
        model=echo_model(tool_call("delete_record", {"id": "abc-123"}, id="c-leaf")),
        tools=[delete_tool(calls)],
    )
    mid = Agent(
        "mid",
        description="Looks after records",
        model=echo_model(tool_call("agent-leaf", {"prompt": "delete abc-123"}, id="c-mid")),
        agents={"leaf": leaf},
    )
    planner = Agent(
        "planner", model=echo_model(tool_call("weather", {}, id="w1")), tools=[weather_tool(calls)]
    )
    batch = Agent(
        "batch",
        model=echo_model(
            tool_call("delete_record", {"id": "r-1"}, id="c1"),
            tool_call("delete_record", {"id": "r-2"}, id="c2"),
        ),
        tools=[delete_tool(calls)],
    )
    slow = Agent(
        "slow",
        model=echo_model(tool_call("work", {"name": "job-1"}, id="w1")),
        tools=[work_tool(calls, never)],
    )
    return [mid, planner, batch, slow]


def main(db: str, log: str, portfile: str) -> None:
    calls = CallLog(Path(log))
    server = LiveServer(
        lambda: Runtime(agents(calls, db + ".never"), storage=SqliteStore(db), executor="local"), keys=KEYS
    ).start()
    Path(portfile).write_text(str(server.port))
    threading.Event().wait()


if __name__ == "__main__":
    main(*sys.argv[1:4])
