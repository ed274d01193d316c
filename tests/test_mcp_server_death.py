"""A stdio MCP server whose process dies is started again: the call in flight when it died fails with a
tool error the model sees, and the next run's calls go to a new process of the server (written with the
Python MCP SDK: ``tests/mortal_mcp_server.py``), on both executors. Nothing here waits on time: each
start of the server is written to a file, and each run is awaited to its end."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from troupe import Agent, MCPStdio
from troupe.testing import FunctionModel, text, tool_call

MORTAL = Path(__file__).resolve().parent / "mortal_mcp_server.py"


def call_the_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Calls the tool the user's message names, then says what the tool answered."""
    told = [m["content"] for m in messages if m["role"] == "tool"]
    if told:
        return text(told[0])
    return tool_call(messages[-1]["content"], {}, id="c1")


def starts(log: Path) -> list[str]:
    """The process ids of the server's starts, in order."""
    return log.read_text().split()


async def test_a_server_that_dies_mid_call_is_started_again_for_the_next_run(make_runtime, tmp_path):
    log = tmp_path / "starts.txt"
    server = MCPStdio("mortal", sys.executable, [str(MORTAL), str(log)], timeout_s=60)
    runtime = make_runtime([Agent("m", model=FunctionModel(call_the_prompt), mcp_servers=[server])])
    agent = runtime.get_agent("m")

    died = await agent.generate("exit")
    assert died.finish_reason == "stop"
    assert "the call to 'exit' failed" in died.text  # a tool error, at once (not the 60 s timeout)
    assert len(starts(log)) == 1

    again = await agent.generate("pid")
    assert again.finish_reason == "stop"
    first, second = starts(log)
    assert again.text == second != first  # answered by the server's new process

    still = await agent.generate("pid")
    assert still.text == second and len(starts(log)) == 2  # a live session is kept, not reopened
