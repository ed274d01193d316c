"""MCP servers as an agent's tool sources, with a real server nobody here wrote
(``@modelcontextprotocol/server-filesystem``): its tools gated by their annotations, by a server's rule
and by a run's option; results mapped for the model; on both executors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import chunks_of, echo_model, types_of
from mcp_servers import filesystem

from troupe import Agent
from troupe.testing import tool_call


def files_agent(root: Path, *calls: Any, **server: Any) -> Agent:
    return Agent("files", model=echo_model(*calls), mcp_servers=[filesystem(root, **server)])


async def test_write_file_pauses_by_its_annotations_and_approval_writes_it(make_runtime, tmp_path):
    target = tmp_path / "notes.txt"
    agent = files_agent(tmp_path, tool_call("write_file", {"path": str(target), "content": "hello"}, id="w1"))
    runtime = make_runtime([agent])
    stream = await runtime.get_agent("files").stream("write a note")
    chunks = await chunks_of(stream)
    assert types_of(chunks)[-1] == "tool-call-approval"
    pause = chunks[-1].payload
    assert pause["tool_name"] == "write_file"
    origin = pause["tool_origin"]
    assert origin["mcp_server"] == "files"
    assert origin["annotations"]["readOnlyHint"] is False and origin["annotations"]["destructiveHint"] is True
    assert not target.exists()  # nothing ran before the decision

    approved = await runtime.get_agent("files").approve_tool_call(run_id=stream.run_id, tool_call_id="w1")
    done = await chunks_of(approved)
    result = next(c for c in done if c.type == "tool-result")
    assert "Successfully wrote" in str(result.payload["result"])
    assert target.read_text() == "hello"
    assert (await approved.result()).finish_reason == "stop"


async def test_declined_write_never_happens(make_runtime, tmp_path):
    target = tmp_path / "never.txt"
    agent = files_agent(tmp_path, tool_call("write_file", {"path": str(target), "content": "x"}, id="w1"))
    runtime = make_runtime([agent])
    stream = await runtime.get_agent("files").stream("write")
    await chunks_of(stream)
    declined = await runtime.get_agent("files").decline_tool_call(run_id=stream.run_id, reason="no")
    result = await declined.result()
    assert result.finish_reason == "stop"
    assert "w1=no" in result.text
    assert not target.exists()


async def test_read_only_tool_runs_without_a_pause(make_runtime, tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    agent = files_agent(tmp_path, tool_call("read_text_file", {"path": str(tmp_path / "a.txt")}, id="r1"))
    runtime = make_runtime([agent])
    result = await runtime.get_agent("files").generate("read it")
    assert result.finish_reason == "stop"
    assert result.text == 'r1={"content": "alpha"}'  # its structured content


async def test_a_never_rule_wins_over_annotations_and_a_run_option_wins_over_the_rule(make_runtime, tmp_path):
    target = tmp_path / "n.txt"
    call = tool_call("write_file", {"path": str(target), "content": "ruled"}, id="w1")
    agent = files_agent(tmp_path, call, require_approval={"never": ["write_file"]})
    runtime = make_runtime([agent])
    files = runtime.get_agent("files")
    result = await files.generate("write")
    assert result.finish_reason == "stop" and target.read_text() == "ruled"

    target.unlink()
    gated = await files.generate("write", require_tool_approval=True)
    assert gated.finish_reason == "suspended"
    assert gated.suspend_payload["tool_name"] == "write_file"
    assert not target.exists()


async def test_an_always_rule_gates_a_tool_its_annotations_leave_ungated(make_runtime, tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    call = tool_call("read_text_file", {"path": str(tmp_path / "a.txt")}, id="r1")
    agent = files_agent(tmp_path, call, require_approval={"always": ["read_text_file"]})
    runtime = make_runtime([agent])
    files = runtime.get_agent("files")
    stream = await files.stream("read it")
    chunks = await chunks_of(stream)
    assert types_of(chunks)[-1] == "tool-call-approval"  # readOnlyHint: true, gated by the rule alone
    assert chunks[-1].payload["tool_name"] == "read_text_file"
    assert chunks[-1].payload["tool_origin"]["annotations"]["readOnlyHint"] is True
    assert "tool-result" not in types_of(chunks)  # nothing was read before the decision

    approved = await (await files.approve_tool_call(run_id=stream.run_id, tool_call_id="r1")).result()
    assert approved.finish_reason == "stop"
    assert approved.text == 'r1={"content": "alpha"}'


async def test_invalid_arguments_are_refused_before_anything_pauses(make_runtime, tmp_path):
    agent = files_agent(tmp_path, tool_call("write_file", {"path": 5}, id="w1"))
    runtime = make_runtime([agent])
    chunks = await chunks_of(await runtime.get_agent("files").stream("write"))
    assert "tool-call-approval" not in types_of(chunks)
    error = next(c for c in chunks if c.type == "tool-error")
    assert "invalid arguments for tool 'write_file'" in error.payload["result"]["error"]


def test_the_inbox_shows_the_server_and_the_tools_annotations(http_server, tmp_path):
    import httpx

    from troupe import Runtime, SqliteStore

    target = tmp_path / "inbox.txt"
    call = tool_call("write_file", {"path": str(target), "content": "x"}, id="w1")

    def build() -> Runtime:
        agent = files_agent(tmp_path, call)
        return Runtime([agent], storage=SqliteStore(tmp_path / "inbox.db"), executor="local")

    server = http_server(build, open_mode=True)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        started = client.post("/api/agents/files/generate", json={"messages": "write"}).json()
        assert started["finishReason"] == "suspended"
        pending = client.get("/api/inbox").json()["runs"][0]["toolCalls"][0]
    origin = pending["toolOrigin"]
    assert origin["mcp_server"] == "files" and origin["tool"] == "write_file"
    assert origin["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    # the server's own description of the tool:
    assert "overwrite an existing file" in pending["context"]["toolDescription"]
