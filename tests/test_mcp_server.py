"""Troupe served over MCP at ``/mcp``, driven by the Python ``mcp`` SDK's client: each agent is a tool;
a run's approval arrives as an elicitation and the answer decides the call through the agent's own
decision path (audited as the key's principal); a client without elicitation gets the paused result and
the call is decided over HTTP; keys, tenancy and the Origin check hold as on ``/api``."""

from __future__ import annotations

import asyncio

import httpx
import mcp_types as types
import pytest
from helpers import echo_model
from http_server import KEYS, A, B, runtime_factory
from mcp_clients import accept, action, mcp_client
from pydantic import BaseModel, ConfigDict

from troupe import Agent, Runtime, SqliteStore, create_tool
from troupe.testing import tool_call

A1 = {"resourceId": "a1"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
STREAMABLE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


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


async def test_an_elicitation_shows_every_argument_however_one_is_padded(http_server, tmp_path, calls):
    """The elicitation's message is all the person sees before answering "Approve?": a model that pads
    an early argument with pages of text must not push the one that matters out of it, and a direction
    override or tag characters in it are shown as marks."""
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "hi")
    memo = "Routine monthly payroll, approved as every month. " * 60
    padded = {"memo": memo, "to_account": "ATTACKER-IBAN-666", "note": f"x\u202egnp.exe{hidden}"}

    def build() -> Runtime:
        model = echo_model(tool_call("pay", padded, id="p1"))
        agent = Agent("bank", description="Pays", model=model, tools=[free_tool(calls)])
        return Runtime([agent], storage=SqliteStore(tmp_path / "http.db"), executor="local")

    served = http_server(build, keys=KEYS)
    asked: list = []
    async with mcp_client(served.url, "key-a", action("decline"), asked) as client:
        await client.call_tool("bank", {"prompt": "pay the staff", "resourceId": "a1"})
    message, _ = asked[0]
    assert message.startswith('bank wants to call pay with {"memo": "Routine monthly payroll')
    assert f"\u27e6\u2026 {len(memo) - 200:,} more characters\u27e7" in message
    assert '"to_account": "ATTACKER-IBAN-666"' in message
    assert '"note": "x\u27e6U+202E\u27e7gnp.exe\u27e6U+E0068\u27e7\u27e6U+E0069\u27e7"' in message
    assert calls.count("pay") == 0


def free_tool(calls):
    """``pay``, approval needed, taking whatever arguments the model gives."""

    class Free(BaseModel):
        model_config = ConfigDict(extra="allow")

    def pay(inp: Free, ctx: object) -> dict[str, bool]:
        calls.record("pay")
        return {"paid": True}

    return create_tool("pay", "Pay someone", Free, pay, require_approval=True)


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


@pytest.mark.parametrize("content", [{}, {"approved": "true"}, {"approve": True}, {"approved": True, "x": 1}])
async def test_an_accepted_answer_that_does_not_fit_the_question_decides_nothing(
    server, calls, tmp_path, content
):
    """The SDKs do not check an accepted answer against the requested schema: one that does not fit
    {approved: boolean, reason?: string} is refused with why, never taken as the person's decline; the
    run stays paused and can still be approved."""
    async with mcp_client(server.url, "key-a", accept(content)) as client:
        result = await client.call_tool("ops", {"prompt": "delete abc-123", "resourceId": "a1"})
    paused = result.structured_content
    assert paused["status"] == "paused", paused
    text = result.content[0].text
    assert "The answer was not taken (AGENT_RESUME_DATA_INVALID)" in text, text
    assert "{approved: boolean, reason?: string}" in text
    run_id = paused["runId"]
    assert await SqliteStore(tmp_path / "http.db").list_audit(run_id) == []
    assert calls.count("delete_record") == 0

    async with httpx.AsyncClient() as http:
        body = {"runId": run_id, "toolCallId": paused["toolCallId"]}
        response = await http.post(
            f"{server.url}/api/agents/ops/approve-tool-call-generate", json=body, headers=A
        )
    assert response.status_code == 200, response.text
    assert calls.count("delete_record") == 1


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"prompt": "x" * 100_001}, "'prompt' is longer than 100,000 characters"),
        ({"prompt": "delete", "threadId": "t" * 257}, "'threadId' must be a string of at most 256"),
        ({"prompt": "delete", "resourceId": 7}, "'resourceId' must be a string of at most 256"),
    ],
    ids=["prompt-too-long", "thread-id-too-long", "resource-id-not-a-string"],
)
async def test_what_api_refuses_as_too_long_or_not_text_starts_no_run_over_mcp(
    server, calls, tmp_path, arguments, said
):
    async with mcp_client(server.url, "key-a", accept({"approved": True})) as client:
        result = await client.call_tool("ops", {"resourceId": "a1", **arguments})
    assert result.is_error and said in result.content[0].text, result.content[0].text
    async with httpx.AsyncClient() as http:
        listed = await http.get(f"{server.url}/api/agents/ops/suspended-runs", params=A1, headers=A)
    assert listed.json()["total"] == 0 and calls.count("delete_record") == 0


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



async def test_a_call_id_the_model_chose_is_shown_inert_where_to_decide_it(http_server, tmp_path, calls):
    """The paused result suggests a CLI command to paste into a shell: a call id the model chose was
    written into it raw (``; touch pwned``), and into the text with its hidden characters unmarked."""
    import shlex

    chosen = "p1; touch pwned \u202e"

    def build() -> Runtime:
        model = echo_model(tool_call("pay", {"to": "x"}, id=chosen))
        agent = Agent("bank", description="Pays", model=model, tools=[free_tool(calls)])
        return Runtime([agent], storage=SqliteStore(tmp_path / "http.db"), executor="local")

    served = http_server(build, keys=KEYS)
    async with mcp_client(served.url, "key-a", None) as client:
        result = await client.call_tool("bank", {"prompt": "pay", "resourceId": "a1"})
    paused = result.structured_content
    assert paused["toolCallId"] == chosen, "the id itself is kept exactly, for the routes that take it"
    cli = shlex.split(paused["decide"]["cli"])
    assert cli == ["troupe", "approve", paused["runId"], chosen], "one argument, whatever it holds"
    text = result.content[0].text
    assert "tool call 'p1; touch pwned \u27e6U+202E\u27e7'" in text and "\u202e" not in text
    assert calls.count("pay") == 0

async def test_an_answer_to_a_call_decided_meanwhile_decides_nothing_and_says_so(server, calls):
    """A question names only which call it is about; the pause is read again from the store when the
    answer comes. So an answer to a call that someone decided meanwhile (here over HTTP, while the person
    was being asked) is refused with why, and the tool runs once, for the decision that came first."""

    def decide_over_http_then_answer(message: str, schema: dict) -> types.ElicitResult:
        with httpx.Client(headers=A) as http:
            listed = http.get(f"{server.url}/api/agents/ops/suspended-runs", params={"resourceId": "a1"})
            run = listed.json()["runs"][0]
            body = {"runId": run["runId"], "toolCallId": run["toolCalls"][0]["toolCallId"]}
            http.post(f"{server.url}/api/agents/ops/approve-tool-call-generate", json=body).raise_for_status()
        return types.ElicitResult(action="accept", content={"approved": True})

    async with mcp_client(server.url, "key-a", decide_over_http_then_answer) as client:
        result = await client.call_tool("ops", {"prompt": "delete abc-123", "resourceId": "a1"})
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("AGENT_DECISION_CONFLICT"), text
    assert "no longer waits as it was asked about" in text, text
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
    async with httpx.AsyncClient(base_url=server.url) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers={**A, **STREAMABLE})
        assert opened.status_code == 200, opened.text
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        mine = await http.post("/mcp", json=PING, headers={**A, **STREAMABLE, **session})
        theirs = await http.post("/mcp", json=PING, headers={**B, **STREAMABLE, **session})
    assert mine.status_code == 200
    assert theirs.status_code == 404  # as if the session did not exist


async def test_the_paused_result_hands_the_requester_no_decision_link(http_server, tmp_path, calls):
    """Issue 40: with a ``LinkSigner`` set, the paused result carried working approve links, so the
    requester (or its model) could approve its own call with no credential. Links go to approvers
    through notifications; the result only says where to decide."""
    import base64
    import json

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
    decide = result.structured_content["decide"]
    assert set(decide) == {"inbox", "http", "body", "cli"}, decide
    shown = json.dumps(result.model_dump(mode="json"))
    assert "/decide/" not in shown and "troupe.test" not in shown
    assert decide["inbox"] == f"{server.url}/inbox" and "waits for approval" in result.content[0].text
    assert calls.count("delete_record") == 0


async def test_one_key_cannot_open_sessions_for_everyone(http_server, tmp_path, calls):
    """Issue 40, MEDIUM 1: one tenant key opened 10,000 sessions and every key's next initialize got 503.
    Now each principal holds at most ``sessions_per_principal`` (3 here): its next one is a 429 naming
    the limit, even when asked for all at once; another key still opens sessions and works; a session
    the key ends makes room again."""
    from troupe.api.mcp_http import MCPLimits

    limits = MCPLimits(sessions_per_principal=3)
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS, mcp_limits=limits)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        opened = await asyncio.gather(
            *(http.post("/mcp", json=INITIALIZE, headers={**A, **STREAMABLE}) for _ in range(6))
        )
        assert sorted(r.status_code for r in opened) == [200, 200, 200, 429, 429, 429]
        refused = next(r for r in opened if r.status_code == 429).json()
        assert refused["code"] == "TOO_MANY_SESSIONS" and "3 MCP sessions open already" in refused["error"]
        again = await http.post("/mcp", json=INITIALIZE, headers={**A, **STREAMABLE})
        assert again.status_code == 429

        async with mcp_client(server.url, "key-b", None) as client:  # another principal: unaffected
            assert {t.name for t in (await client.list_tools()).tools} == {"ops", "planner"}

        mine = next(r for r in opened if r.status_code == 200).headers["mcp-session-id"]
        session = {"Mcp-Session-Id": mine, "Mcp-Protocol-Version": "2025-11-25"}
        assert (await http.delete("/mcp", headers={**A, **STREAMABLE, **session})).status_code == 200
        room = await http.post("/mcp", json=INITIALIZE, headers={**A, **STREAMABLE})
        assert room.status_code == 200, room.text


async def test_an_idle_session_is_closed_and_sessions_idle_out_in_minutes(http_server, tmp_path, calls):
    from troupe.api.mcp_http import MCPLimits

    assert MCPLimits().idle_s <= 600, "minutes, not the SDK's 30"
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS, mcp_limits=MCPLimits(idle_s=0.5))
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers={**A, **STREAMABLE})
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        # A look is a request (which keeps a session alive), so each waits longer than idle_s first.
        async with asyncio.timeout(20):
            while True:
                await asyncio.sleep(1.0)
                looked = await http.post("/mcp", json=PING, headers={**A, **STREAMABLE, **session})
                if looked.status_code == 404:
                    break
                assert looked.status_code == 200
