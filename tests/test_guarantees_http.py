"""A decision is bound to the call's fingerprint on every remote surface: the HTTP routes, the async and
the blocking client, the operator CLI (the inbox page: test_inbox_browser.py). A decision naming a
fingerprint the call no longer has is refused (409), the tool never runs, and the call stays paused,
still decidable with the right one."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from http_server import ADMIN, KEYS, runtime_factory

from troupe.cli import main
from troupe.client import AsyncTroupeClient, TroupeClient
from troupe.errors import DecisionConflictError

STALE = "0" * 32


@pytest.fixture
def server(http_server, tmp_path, calls):
    return http_server(runtime_factory(tmp_path, calls), keys=KEYS)


def _paused(api: httpx.Client, agent: str) -> tuple[str, str, str]:
    response = api.post(f"/agents/{agent}/generate", json={"messages": "go", "resourceId": "a1"})
    assert response.status_code == 200, response.text
    body = response.json()
    payload = body["suspendPayload"]
    return body["runId"], payload["toolCallId"], payload["fingerprint"]


def _still_paused(api: httpx.Client, agent: str, run_id: str) -> None:
    listed = api.get(f"/agents/{agent}/suspended-runs").json()
    assert run_id in [r["runId"] for r in listed["runs"]], "a refused decision left the call paused"


@pytest.mark.parametrize(
    ("agent", "route", "extra"),
    [
        ("ops", "approve-tool-call-generate", {}),
        ("ops", "approve-tool-call", {}),
        ("ops", "decline-tool-call-generate", {"reason": "no"}),
        ("ops", "decline-tool-call", {"reason": "no"}),
        ("planner", "resume-generate", {"resumeData": {"city": "Oslo"}}),
        ("planner", "resume-stream", {"resumeData": {"city": "Oslo"}}),
    ],
)
def test_every_decision_route_refuses_a_stale_fingerprint(server, calls, agent, route, extra):
    with httpx.Client(base_url=server.url + "/api", headers=ADMIN, timeout=30) as api:
        run_id, call_id, fingerprint = _paused(api, agent)
        before = calls.count()
        body: dict[str, Any] = {"runId": run_id, "toolCallId": call_id, **extra}

        refused = api.post(f"/agents/{agent}/{route}", json={**body, "fingerprint": STALE})
        assert refused.status_code == 409, refused.text
        assert "fingerprint" in refused.text
        assert calls.count() == before, "the refused decision ran the tool"
        _still_paused(api, agent, run_id)

        accepted = api.post(f"/agents/{agent}/{route}", json={**body, "fingerprint": fingerprint})
        assert accepted.status_code == 200, accepted.text
        assert "[DONE]" in accepted.text or accepted.json()["finishReason"] == "stop"
    if route.startswith("approve"):
        assert calls.count("delete_record") == 1


async def test_the_async_client_sends_the_fingerprint(server, calls):
    async with AsyncTroupeClient(server.url, api_key="key-a") as client:
        agent = client.get_agent("ops")
        for decide, runs in (
            (agent.approve_tool_call, 1),
            (agent.approve_tool_call_generate, 1),
            (agent.decline_tool_call, 0),
        ):
            paused = await agent.generate("delete it", resource_id="a1")
            before = calls.count()
            with pytest.raises(DecisionConflictError, match="fingerprint"):
                await _finished(decide(run_id=paused.run_id, tool_call_id="call-1", fingerprint=STALE))
            assert calls.count() == before, f"{decide.__name__} ran the tool on a stale fingerprint"
            right = paused.suspend_payload["fingerprint"]
            result = await _finished(decide(run_id=paused.run_id, tool_call_id="call-1", fingerprint=right))
            assert result.finish_reason == "stop"
            assert calls.count() == before + runs


async def _finished(opened: Any) -> Any:
    """The RunResult of a decision, whether it returned a stream or a result."""
    done = await opened
    return await done.result() if hasattr(done, "full_stream") else done


def test_the_blocking_client_sends_the_fingerprint(server, calls):
    with TroupeClient(server.url, api_key="key-a") as client:
        agent = client.get_agent("ops")
        paused = agent.generate("delete it", resource_id="a1")
        with pytest.raises(DecisionConflictError, match="fingerprint"):
            agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1", fingerprint=STALE)
        with pytest.raises(DecisionConflictError, match="fingerprint"):
            agent.decline_tool_call(run_id=paused.run_id, tool_call_id="call-1", fingerprint=STALE).result()
        assert calls.count() == 0
        right = paused.suspend_payload["fingerprint"]
        done = agent.approve_tool_call_generate(
            run_id=paused.run_id, tool_call_id="call-1", fingerprint=right
        )
        assert done.text == 'call-1={"deleted": "abc-123"}'
    assert calls.count("delete_record") == 1


@pytest.mark.parametrize(
    ("agent", "command"),
    [
        ("ops", ["approve"]),
        ("ops", ["decline", "--reason", "no"]),
        ("planner", ["resume", "--data", '{"city": "Oslo"}']),
    ],
)
def test_the_cli_decides_only_the_fingerprint_it_was_given(server, calls, capsys, agent, command):
    with httpx.Client(base_url=server.url + "/api", headers=ADMIN, timeout=30) as api:
        run_id, call_id, _ = _paused(api, agent)
        where = ["--server", server.url, "--key", "key-admin"]
        verb, *options = command

        assert main([verb, run_id, call_id, *where, *options, "--fingerprint", STALE]) == 1
        assert "fingerprint" in capsys.readouterr().err
        assert calls.count() == (1 if agent == "planner" else 0), "only the suspend() itself ran"
        _still_paused(api, agent, run_id)

        # Without CALL the latest paused call is decided, bound to the fingerprint it was listed with.
        assert main([verb, run_id, *where, *options]) == 0
        assert "finished: stop" in capsys.readouterr().out
    assert calls.count("delete_record") == (1 if verb == "approve" else 0)
