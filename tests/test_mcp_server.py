"""Troupe served over MCP at ``/mcp``, driven by the Python ``mcp`` SDK's client: each agent is a tool;
a run's approval arrives as an elicitation and the answer decides the call through the agent's own
decision path (audited as the key's principal); a client without elicitation gets the paused result and
the call is decided over HTTP; keys, tenancy and the Origin check hold as on ``/api``."""

from __future__ import annotations

import httpx
import pytest
from blocking import wait_for
from http_server import KEYS, A, B, runtime_factory
from mcp_clients import accept, action, mcp_client

from troupe import SqliteStore

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture
def server(http_server, tmp_path, calls):
    return http_server(runtime_factory(tmp_path, calls), keys=KEYS)


async def test_each_agent_is_a_tool(server):
    async with mcp_client(server.url, "key-a", None) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"ops", "planner"}
    assert tools["ops"].description == "Deletes records"
    assert tools["ops"].input_schema["required"] == ["prompt"]


async def test_an_approval_arrives_as_an_elicitation_and_approving_runs_the_tool(server, calls, tmp_path):
    asked: list = []
    async with mcp_client(server.url, "key-a", accept({"approved": True}), asked) as client:
        result = await client.call_tool("ops", {"prompt": "delete abc-123", "resourceId": "a1"})
    assert not result.is_error
    assert result.structured_content["status"] == "stop"
    assert calls.count("delete_record") == 1
    message, schema = asked[0]
    assert "delete_record" in message and "abc-123" in message
    assert schema["required"] == ["approved"]
    run_id = result.structured_content["runId"]
    audit = await SqliteStore(tmp_path / "http.db").list_audit(run_id)
    assert [(e.kind, e.decided_by) for e in audit] == [("approved", "tenant-a")]


async def test_declining_the_elicitation_never_runs_the_tool(server, calls):
    async with mcp_client(server.url, "key-a", accept({"approved": False, "reason": "not today"})) as client:
        result = await client.call_tool("ops", {"prompt": "delete", "resourceId": "a1"})
    assert result.structured_content["status"] == "stop"
    assert "not today" in result.structured_content["text"]
    assert calls.count("delete_record") == 0

    async with mcp_client(server.url, "key-a", action("decline")) as client:
        result = await client.call_tool("ops", {"prompt": "delete", "resourceId": "a1"})
    assert "not approved" in result.structured_content["text"]
    assert calls.count("delete_record") == 0


async def test_a_suspend_pause_asks_for_its_resume_schema(server):
    asked: list = []
    async with mcp_client(server.url, "key-a", accept({"city": "Lyon"}), asked) as client:
        result = await client.call_tool("planner", {"prompt": "weather?", "resourceId": "a1"})
    assert asked[0][1]["properties"]["city"]["type"] == "string"
    assert "Which city?" in asked[0][0]
    assert "Lyon" in result.structured_content["text"]


async def test_without_elicitation_the_result_says_where_to_decide_and_http_decides_it(server, calls):
    async with mcp_client(server.url, "key-a", None) as client:
        result = await client.call_tool("ops", {"prompt": "delete", "resourceId": "a1"})
    paused = result.structured_content
    assert paused["status"] == "paused" and paused["kind"] == "approval"
    assert paused["decide"]["inbox"] == f"{server.url}/inbox"
    run_id, call_id = paused["runId"], paused["toolCallId"]
    assert run_id in result.content[0].text and "/api/agents/ops/approve-tool-call" in result.content[0].text
    assert calls.count("delete_record") == 0

    body = {"runId": run_id, "toolCallId": call_id}
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{server.url}/api/agents/ops/approve-tool-call-generate", json=body, headers=A
        )
    assert response.status_code == 200, response.text
    assert calls.count("delete_record") == 1


async def test_cancel_leaves_the_run_paused(server, calls):
    async with mcp_client(server.url, "key-a", action("cancel")) as client:
        result = await client.call_tool("ops", {"prompt": "delete", "resourceId": "a1"})
    assert result.structured_content["status"] == "paused"
    assert calls.count("delete_record") == 0


async def test_a_wrong_key_is_refused_and_a_key_stays_in_its_resources(server):
    for headers in ({}, {"Authorization": "Bearer nope"}):
        async with httpx.AsyncClient() as http:
            response = await http.post(f"{server.url}/mcp", json=PING, headers=headers)
        assert response.status_code == 401
        assert response.json()["code"] == "UNAUTHENTICATED"
    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own errors
        async with mcp_client(server.url, "nope", None) as client:
            await client.list_tools()
    async with mcp_client(server.url, "key-a", None) as client:
        result = await client.call_tool("ops", {"prompt": "x", "resourceId": "b1"})
    assert result.is_error and "may not access" in result.content[0].text


async def test_a_key_with_one_resource_needs_no_resource_id_one_with_several_is_told_its_own(
    server, tmp_path
):
    async with mcp_client(server.url, "key-b", None) as client:
        result = await client.call_tool("ops", {"prompt": "delete"})  # key-b has b1 alone
    assert not result.is_error, result.content
    stored = await SqliteStore(tmp_path / "http.db").load_run(result.structured_content["runId"])
    assert stored is not None and stored.state.resource_id == "b1"

    async with mcp_client(server.url, "key-a", None) as client:
        refused = await client.call_tool("ops", {"prompt": "delete"})
    assert refused.is_error
    told = refused.content[0].text
    assert "INVALID_REQUEST: 'tenant-a' has several resources ('a1', 'a2'): name one" in told


async def test_a_browser_origin_of_another_site_is_refused(server):
    headers = {**A, "Origin": "http://evil.example", "Content-Type": "application/json"}
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{server.url}/mcp", json=PING, headers=headers)
    assert response.status_code == 403


async def test_an_mcp_session_answers_only_the_key_that_opened_it(server):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=server.url) as http:
        opened = await http.post("/mcp", json=initialize, headers={**A, **accept})
        assert opened.status_code == 200, opened.text
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        mine = await http.post("/mcp", json=PING, headers={**A, **accept, **session})
        theirs = await http.post("/mcp", json=PING, headers={**B, **accept, **session})
    assert mine.status_code == 200
    assert theirs.status_code == 404  # as if the session did not exist


async def test_the_paused_result_carries_decision_links_that_decide_the_call(http_server, tmp_path, calls):
    import base64

    from http_server import ops_agents

    from troupe import LinkSigner, Notifications, Runtime

    secret = "whsec_" + base64.b64encode(b"links are signed with this key!!").decode()

    def build() -> Runtime:
        links = Notifications(links=LinkSigner("https://troupe.test", secret))
        store = SqliteStore(tmp_path / "links.db")
        return Runtime(ops_agents(calls), storage=store, executor="local", notifications=links)  # type: ignore[arg-type]

    server = http_server(build, keys=KEYS)
    async with mcp_client(server.url, "key-a", None) as client:
        result = await client.call_tool("ops", {"prompt": "delete", "resourceId": "a1"})
    links = result.structured_content["decide"]["links"]
    assert links["approve"].startswith("https://troupe.test/decide/")
    async with httpx.AsyncClient() as http:
        done = await http.post(links["approve"].replace("https://troupe.test", server.url))
    assert done.status_code == 200, done.text
    await wait_for(lambda: calls.count("delete_record") == 1, what="the linked approval to run the tool")
