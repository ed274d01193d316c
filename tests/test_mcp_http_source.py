"""An MCP server reached over streamable HTTP (``MCPHttp``): the real server-everything on its HTTP
transport; its tools, its annotations' gates and its elicitation work as over stdio, and the headers
given for it never show in a repr."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import chunks_of, echo_model
from mcp_servers import EverythingOverHttp

from troupe import Agent, MCPHttp
from troupe.testing import tool_call


@pytest.fixture
def everything_http() -> Iterator[EverythingOverHttp]:
    server = EverythingOverHttp().start()
    yield server
    server.stop()


def test_headers_never_show_in_a_repr():
    spec = MCPHttp("remote", "http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer s3cret-token"})
    assert "s3cret" not in repr(spec)
    with pytest.raises(ValueError, match="credentials in headers"):
        MCPHttp("remote", "http://user:pw@127.0.0.1:9/mcp")


async def test_tools_and_elicitation_over_streamable_http(make_runtime, everything_http):
    server = MCPHttp(
        "everything",
        everything_http.url,
        headers={"X-Troupe-Test": "1"},
        require_approval={"never": ["trigger-elicitation-request"]},
    )
    calls = [
        tool_call("echo", {"message": "over http"}, id="e1"),
        tool_call("trigger-elicitation-request", {}, id="q1"),
    ]
    runtime = make_runtime([Agent("remote", model=echo_model(*calls), mcp_servers=[server])])
    remote = runtime.get_agent("remote")
    stream = await remote.stream("go")
    chunks = await chunks_of(stream)
    assert chunks[-1].type == "tool-call-suspended"
    assert chunks[-1].payload["tool_origin"]["mcp_server"] == "everything"
    answer = {"name": "Grace Hopper", "check": True, "email": "grace@example.com"}
    result = await (await remote.resume_stream(answer, run_id=stream.run_id)).result()
    assert "e1=Echo: over http" in result.text
    assert "Grace Hopper" in result.text
