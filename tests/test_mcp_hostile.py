"""Whatever an MCP server sends is hostile input: a tool with an invalid schema or an uncallable name is
left out (and said so), a result nested too deep or too large is refused with a clear error, an
elicitation whose schema is not an object is refused; no run is lost. Two servers offering one tool
name is a clear error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import chunks_of, echo_model
from mcp_servers import filesystem, refused_beside_good

from troupe import Agent, MCPStdio, create_tool
from troupe.errors import ToolNameConflictError
from troupe.testing import tool_call

HOSTILE = Path(__file__).resolve().parent / "hostile_mcp_server.py"


def hostile(**options: Any) -> MCPStdio:
    return MCPStdio("hostile", sys.executable, [str(HOSTILE)], **options)


async def test_tools_with_bad_schemas_or_names_are_left_out_and_the_rest_work(make_runtime, executor):
    refused = await refused_beside_good(make_runtime, hostile(), "bad_schema")
    if executor == "local":
        assert refused is not None
        assert "'bad_schema': not a valid JSON schema" in " ".join(refused)
        assert "'bad name!': tool name" in " ".join(refused)


@pytest.mark.parametrize(
    ("tool", "why"), [("deep", "nested deeper than 64"), ("huge", "longer than 1000000")]
)
async def test_a_result_too_deep_or_too_large_is_refused_and_the_run_goes_on(make_runtime, tool, why):
    runtime = make_runtime(
        [Agent("h", model=echo_model(tool_call(tool, {}, id="t1")), mcp_servers=[hostile()])]
    )
    stream = await runtime.get_agent("h").stream("go")
    chunks = await chunks_of(stream)
    error = next(c for c in chunks if c.type == "tool-error")
    assert why in error.payload["result"]["error"] and "was refused" in error.payload["result"]["error"]
    assert (await stream.result()).finish_reason == "stop"


async def test_an_error_told_only_in_structured_content_reaches_the_model(make_runtime):
    runtime = make_runtime(
        [Agent("h", model=echo_model(tool_call("quota", {}, id="q1")), mcp_servers=[hostile()])]
    )
    stream = await runtime.get_agent("h").stream("go")
    chunks = await chunks_of(stream)
    error = next(c for c in chunks if c.type == "tool-error")
    assert error.payload["result"]["error"] == 'MCPToolError: {"why": "quota"}'
    told = json.loads((await stream.result()).text.removeprefix("q1="))  # what the model was told
    assert told == {"error": 'MCPToolError: {"why": "quota"}'}


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("ask_string", "the call to 'ask_string' failed"),
        ("ask_bad", "elicitation refused: not a valid JSON schema"),
    ],
)
async def test_an_elicitation_schema_that_is_no_object_schema_is_refused(make_runtime, tool, why):
    """A schema that is not an object is refused by the MCP SDK before it reaches Troupe; an object schema
    that is no valid JSON schema, by Troupe before anything pauses. Either way the call fails clearly."""
    runtime = make_runtime(
        [Agent("h", model=echo_model(tool_call(tool, {}, id="a1")), mcp_servers=[hostile()])]
    )
    stream = await runtime.get_agent("h").stream("go")
    chunks = await chunks_of(stream)
    assert "tool-call-suspended" not in [c.type for c in chunks]
    error = next(c for c in chunks if c.type == "tool-error")
    assert why in error.payload["result"]["error"]
    assert len(error.payload["result"]["error"]) < 3000
    assert (await stream.result()).finish_reason == "stop"


async def test_two_sources_offering_one_tool_name_is_a_clear_error(make_runtime, tmp_path):
    from pydantic import BaseModel

    class NoInput(BaseModel):
        pass

    own = create_tool("read_text_file", "mine", NoInput, lambda inp, ctx: "mine")
    agent = Agent(
        "h",
        model=echo_model(tool_call("read_text_file", {}, id="r1")),
        tools=[own],
        mcp_servers=[filesystem(tmp_path)],
    )
    runtime = make_runtime([agent])
    with pytest.raises(ToolNameConflictError, match="'read_text_file' is offered by MCP server 'files'"):
        await runtime.get_agent("h").generate("go")
    prefixed = Agent(
        "p",
        model=echo_model(tool_call("fs_list_allowed_directories", {}, id="l1")),
        tools=[own],
        mcp_servers=[filesystem(tmp_path, prefix="fs_")],
    )
    result = await make_runtime([prefixed]).get_agent("p").generate("go")
    assert str(tmp_path) in result.text
