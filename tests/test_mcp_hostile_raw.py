"""Hostile MCP servers that no SDK would let anyone write, spoken by hand (``tests/raw_mcp_server.py``:
JSON-RPC and nothing else), over stdio and streamable HTTP, on both executors:
- a tool whose ``inputSchema`` is not an object (``{"type": "string"}``) fails the MCP SDK's check of the
  whole listing; it is left out (logged, and in the host's stats, with why) and the server's other tools
  work, instead of every run of the agent failing;
- a result nested 200 deep, past the SDK's JSON parser's limit, fails the call at once with a tool error,
  instead of the call waiting for the server's timeout;
- so does an answer that is JSON but no JSON-RPC response (``"result": null``, a list, no ``result``),
  which the SDK drops as well;
- a message holding a lone UTF-16 surrogate (over stdio: a question, a result) is read with U+FFFD in
  its place, instead of being dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import chunks_of, echo_model
from mcp_servers import RawServer, refused_beside_good

from troupe import Agent
from troupe.testing import tool_call

# Far longer than a refused answer takes, far shorter than the 300 s default: a call that waited for
# it instead of failing at once reads "no answer from the MCP server within 20 s".
TIMEOUT_S = 20


@pytest.fixture(params=["stdio", "http"])
def raw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RawServer]:
    server = RawServer(request.param, tmp_path / "received.jsonl")
    yield server
    server.stop()


async def test_a_tool_whose_schema_is_no_object_is_left_out_and_the_others_work(make_runtime, executor, raw):
    refused = await refused_beside_good(make_runtime, raw.spec(), "string_input")
    if executor == "local":
        assert refused == [
            "'string_input': the schema must describe an object (type: object), got type 'string'"
        ]


async def test_a_result_nested_past_the_parsers_limit_fails_the_call_at_once(make_runtime, raw):
    server = raw.spec("--objects-only", timeout_s=TIMEOUT_S)
    agent = Agent("h", model=echo_model(tool_call("deep", {}, id="d1")), mcp_servers=[server])
    runtime = make_runtime([agent])
    stream = await runtime.get_agent("h").stream("go")
    chunks = await chunks_of(stream)
    error = next(c for c in chunks if c.type == "tool-error").payload["result"]["error"]
    assert "no answer from the MCP server" not in error
    if raw.transport == "stdio":
        refused = "the result of 'deep' from MCP server 'raw' was refused: nested deeper than 64 levels"
        assert error.endswith(refused)
    else:  # the SDK's HTTP transport answers the request itself, with its parser's error
        assert "the call to 'deep' failed: Failed to parse JSON response" in error
        assert "recursion limit exceeded" in error and len(error) < 3000
    assert (await stream.result()).finish_reason == "stop"


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        pytest.param("null_result", "result: Input should be an object", id="null"),
        pytest.param("list_result", "result: Input should be an object", id="list"),
        pytest.param("no_result", "result: Field required", id="none"),
    ],
)
async def test_an_answer_that_is_no_json_rpc_response_fails_the_call_at_once(make_runtime, raw, tool, why):
    server = raw.spec("--objects-only", timeout_s=TIMEOUT_S)
    calls = [tool_call(tool, {}, id="m1")]
    runtime = make_runtime([Agent("h", model=echo_model(*calls), mcp_servers=[server])])
    stream = await runtime.get_agent("h").stream("go")
    chunks = await chunks_of(stream)
    error = next(c for c in chunks if c.type == "tool-error").payload["result"]["error"]
    assert "no answer from the MCP server" not in error
    if raw.transport == "stdio":
        refused = f"the result of {tool!r} from MCP server 'raw' was refused: not a valid JSON-RPC response"
        assert error.endswith(f"{refused} ({why})")
    else:  # the SDK's HTTP transport answers the request itself, with its parser's error
        assert f"the call to {tool!r} failed: Failed to parse JSON response" in error and len(error) < 3000
    assert (await stream.result()).finish_reason == "stop"



@pytest.fixture
def raw_stdio(tmp_path: Path) -> Iterator[RawServer]:
    server = RawServer("stdio", tmp_path / "received.jsonl")
    yield server
    server.stop()


async def test_a_question_with_a_lone_surrogate_reaches_a_person_and_the_answer_the_server(
    make_runtime, raw_stdio
):
    """JSON can spell a lone UTF-16 surrogate (``"\\ud800"``); the SDK's parser refuses a whole message
    for it, so a server's question holding one was dropped and its call waited for the timeout. It is
    read with U+FFFD in the surrogate's place."""
    server = raw_stdio.spec("--objects-only", timeout_s=TIMEOUT_S)
    agent = Agent("h", model=echo_model(tool_call("odd_ask", {}, id="a1")), mcp_servers=[server])
    h = make_runtime([agent]).get_agent("h")
    stream = await h.stream("go")
    chunks = await chunks_of(stream)
    assert chunks[-1].type == "tool-call-suspended", [c.payload for c in chunks if c.type == "tool-error"]
    assert chunks[-1].payload["suspend_payload"]["message"] == "proceed \ufffd?"
    result = await (await h.resume_stream({"approved": True}, run_id=stream.run_id)).result()
    assert result.finish_reason == "stop"
    answers = [m["result"] for m in raw_stdio.received() if m.get("id") == "odd-ask"]
    assert answers == [{"action": "accept", "content": {"approved": True}}]


async def test_a_result_with_a_lone_surrogate_is_read_as_a_replacement_character(make_runtime, raw_stdio):
    server = raw_stdio.spec("--objects-only", timeout_s=TIMEOUT_S)
    agent = Agent("h", model=echo_model(tool_call("odd_text", {}, id="t1")), mcp_servers=[server])
    result = await make_runtime([agent]).get_agent("h").generate("go")
    assert result.text == "t1=odd \ufffd text"
