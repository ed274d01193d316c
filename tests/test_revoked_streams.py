"""A run's stream to a caller whose key is revoked while the run goes on (a slow tool): every surface that
sends a run's output stops before the next of it and says so as its protocol says a failure: the SSE
routes with an ``UNAUTHENTICATED`` error chunk, AG-UI with a ``RUN_ERROR``, A2A (the official a2a-sdk
client) and MCP (the official mcp client) with a JSON-RPC error. Real uvicorn;
the tool waits on the test (an event), never on a clock. The inbox event stream: tests/test_http_inbox.py."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.utils.errors import InvalidRequestError
from a2a_agents import sdk_client, text_message
from google.protobuf.json_format import MessageToDict
from mcp.shared.exceptions import MCPError
from mcp_clients import mcp_client
from pydantic import BaseModel
from troupe.api.keys import KeyRing, digest, write_file

from troupe import Agent, Runtime, SqliteStore, create_tool
from troupe.testing import FunctionModel, text, tool_call

SECRET = "the payroll secret is 42"
ALICE = {"Authorization": "Bearer alice"}


class Query(BaseModel):
    q: str


class SlowTool:
    """A tool that tells the test it started, then waits until the test lets it finish."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, inp: Query, ctx: Any) -> dict[str, str]:
        self.started.set()
        assert self.release.wait(60), "the test never let the tool finish"
        return {"found": f"{SECRET} ({inp.q})"}


def _turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "tool":
        return text(SECRET.capitalize() + ".")
    return tool_call("lookup", {"q": "payroll"}, id="c1")


class Setup:
    def __init__(self, http_server: Any, tmp_path: Any) -> None:
        self.keys = tmp_path / "keys.json"
        self.grant()
        self.tool = SlowTool()
        self.db = tmp_path / "revoked.db"

        def build() -> Runtime:
            def agent(id: str, **gate: Any) -> Agent:
                lookup = create_tool("lookup", "Looks a record up", Query, self.tool, **gate)
                return Agent(id, model=FunctionModel(_turn), tools=[lookup])

            agents = [agent("ops"), agent("gated", require_approval=True)]
            return Runtime(agents, storage=SqliteStore(self.db), executor="local")

        self.server = http_server(build, keys=KeyRing.load(self.keys))

    def grant(self) -> None:
        entries = [{"sha256": digest(k), "subject": k, "resources": ["a1"]} for k in ("alice", "bob")]
        write_file(self.keys, {"keys": entries})

    def revoke_alice_while_the_tool_runs(self) -> None:
        assert self.tool.started.wait(30), "the tool never started"
        entries = [{"sha256": digest("bob"), "subject": "bob", "resources": ["a1"]}]
        write_file(self.keys, {"keys": entries})
        self.tool.release.set()


@pytest.fixture
def setup(http_server: Any, tmp_path: Any) -> Iterator[Setup]:
    made = Setup(http_server, tmp_path)
    yield made
    made.tool.release.set()


def _sse(lines: Iterator[str]) -> Iterator[Any]:
    for line in lines:
        if line.startswith("data: "):
            body = line[len("data: ") :]
            yield body if body == "[DONE]" else json.loads(body)


def _until(frames: Iterator[Any], kind: str, key: str = "type") -> list[Any]:
    seen = []
    for frame in frames:
        seen.append(frame)
        if frame[key] == kind:
            return seen
    raise AssertionError(f"no {kind} frame in {seen}")


@pytest.mark.parametrize("route", ["stream", "approve-tool-call"])
def test_a_run_stream_ends_when_its_key_is_revoked(setup: Setup, route: str):
    """Before each batch of the run's chunks the key is checked again: once it is revoked, the stream's
    next frame is its ``UNAUTHENTICATED`` error, then ``[DONE]``: no tool result, no text."""
    with httpx.Client(base_url=setup.server.url + "/api/agents", timeout=30) as api:
        if route == "stream":
            agent, body = "ops", {"messages": "go", "resourceId": "a1"}
        else:
            agent = "gated"
            paused = api.post("/gated/generate", json={"messages": "go", "resourceId": "a1"}, headers=ALICE)
            assert paused.json()["finishReason"] == "suspended", paused.text
            body = {"runId": paused.json()["runId"], "toolCallId": "c1"}
        with api.stream("POST", f"/{agent}/{route}", json=body, headers=ALICE) as response:
            assert response.status_code == 200
            frames = _sse(response.iter_lines())
            if route == "stream":
                assert _until(frames, "tool-call")[-1]["payload"]["args"] == {"q": "payroll"}
            setup.revoke_alice_while_the_tool_runs()
            rest = list(frames)
        assert [f if f == "[DONE]" else f["type"] for f in rest] == ["error", "[DONE]"], rest
        assert rest[0]["payload"]["error"]["code"] == "UNAUTHENTICATED"
        assert SECRET not in json.dumps(rest)


def test_an_agui_run_ends_with_a_run_error_when_its_key_is_revoked(setup: Setup):
    """The AG-UI run stream: its next event is a ``RUN_ERROR`` (code ``UNAUTHENTICATED``), and it ends."""
    body = {
        "threadId": "t1",
        "runId": "r1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"resourceId": "a1"},
    }
    with (
        httpx.Client(base_url=setup.server.url, timeout=30) as http,
        http.stream("POST", "/api/agents/ops/agui", json=body, headers=ALICE) as response,
    ):
        assert response.status_code == 200
        frames = _sse(response.iter_lines())
        assert json.loads(_until(frames, "TOOL_CALL_ARGS")[-1]["delta"]) == {"q": "payroll"}
        _until(frames, "TOOL_CALL_END")
        setup.revoke_alice_while_the_tool_runs()
        rest = list(frames)
    assert [(e["type"], e.get("code")) for e in rest] == [("RUN_ERROR", "UNAUTHENTICATED")], rest


async def test_an_a2a_task_stream_ends_with_a_json_rpc_error_when_its_key_is_revoked(setup: Setup):
    """A2A ``message/stream`` through the official client: after the working task, the stream's next
    answer is a JSON-RPC error (invalid request, ``UNAUTHENTICATED``) instead of the task's result."""
    client, http = await sdk_client(f"{setup.server.url}/a2a/ops", "alice")
    try:
        events = client.send_message(text_message("go", metadata={"resourceId": "a1"}))
        working = MessageToDict(await anext(events))
        assert working["task"]["status"]["state"] == "TASK_STATE_WORKING", working
        await asyncio.to_thread(setup.revoke_alice_while_the_tool_runs)
        with pytest.raises(InvalidRequestError, match="UNAUTHENTICATED: unknown API key") as raised:
            await anext(events)  # the next answer is the error, not the task's end with its text
        assert SECRET not in str(raised.value)
    finally:
        await http.aclose()


async def test_an_mcp_tool_call_gets_a_json_rpc_error_when_its_key_is_revoked(setup: Setup):
    """MCP ``tools/call`` through the official client: the run's answer is not sent; the call gets a
    JSON-RPC error (``-32600``, ``UNAUTHENTICATED``)."""
    async with mcp_client(setup.server.url, "alice", None) as client:
        call = asyncio.create_task(client.call_tool("ops", {"prompt": "go"}))
        await asyncio.to_thread(setup.revoke_alice_while_the_tool_runs)
        with pytest.raises(MCPError) as raised:
            await call
    assert (raised.value.code, raised.value.message) == (-32600, "UNAUTHENTICATED: unknown API key")
