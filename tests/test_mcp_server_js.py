"""Troupe's ``/mcp`` driven by the official TypeScript SDK's client (``@modelcontextprotocol/sdk``,
pinned in tests/mcp_js): the approval comes as an ``elicitation/create`` request on the handshake-era
protocol the SDK speaks; approve and decline decide the call; a client without elicitation gets the
paused result; a wrong key is refused."""

from __future__ import annotations

from typing import Any

from helpers import node_report
from http_server import KEYS, runtime_factory
from mcp_servers import MCP_JS, NODE, need_node_packages


def run_client(url: str, key: str, answer: str) -> dict[str, Any]:
    need_node_packages()
    report: dict[str, Any] = node_report(NODE, MCP_JS, "troupe_mcp_client.mjs", url, key, "a1", answer)
    return report


def test_typescript_client_approves_and_declines_through_elicitation(http_server, tmp_path, calls):
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS)
    approved = run_client(server.url, "key-a", "approve")
    assert approved["tools"] == ["ops", "planner"]
    assert approved["asked"][0]["schema"]["required"] == ["approved"]
    assert approved["result"]["structuredContent"]["status"] == "stop"
    assert calls.count("delete_record") == 1

    declined = run_client(server.url, "key-a", "decline")
    assert "not from node" in declined["result"]["structuredContent"]["text"]
    assert calls.count("delete_record") == 1


def test_typescript_client_without_elicitation_gets_the_paused_result(http_server, tmp_path, calls):
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS)
    paused = run_client(server.url, "key-a", "none")
    assert paused["asked"] == []
    assert paused["result"]["structuredContent"]["status"] == "paused"
    assert calls.count("delete_record") == 0


def test_typescript_client_with_a_wrong_key_is_refused(http_server, tmp_path, calls):
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS)
    refused = run_client(server.url, "wrong", "approve")
    assert "unknown API key" in refused["error"]


def test_typescript_client_accepting_with_content_that_does_not_fit_decides_nothing(
    http_server, tmp_path, calls
):
    """The elicitation/create path: an accepted answer that does not fit {approved: boolean} is refused
    with why and the run stays paused (it used to be taken as a decline)."""
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS)
    unfit = run_client(server.url, "key-a", "unfit")
    assert len(unfit["asked"]) == 1, unfit
    result = unfit["result"]
    assert result["structuredContent"]["status"] == "paused", result
    assert "The answer was not taken (AGENT_RESUME_DATA_INVALID)" in result["content"][0]["text"]
    assert calls.count("delete_record") == 0
