"""The HTTP front door, route by route, over real HTTP: Mastra's shapes, SSE frames, and every caller
mistake answered with a 4xx JSON error (never a 500, never a 200 stream that fails later)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from http_server import ADMIN, KEYS, approval_of, runtime_factory, sse_frames, stream_frames


@pytest.fixture
def api(http_server, tmp_path, calls):
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS)
    with httpx.Client(base_url=server.url + "/api", headers=ADMIN, timeout=30) as client:
        yield client


JSON = {"content-type": "application/json"}


def error_of(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()
    assert error["code"] == code, error
    assert isinstance(error["error"], str) and error["error"]  # Mastra's clients read it as the message
    return error


def test_agents_are_listed_and_described_in_mastras_shape(api):
    agents = api.get("/agents").json()
    assert set(agents) == {"ops", "planner"}
    ops = api.get("/agents/ops").json()
    assert ops["name"] == "Operations" and ops["description"] == "Deletes records"
    tool = ops["tools"]["delete_record"]
    assert tool["requireApproval"] is True
    assert '"json"' in tool["inputSchema"] and '"id"' in tool["inputSchema"]
    assert ops["agents"] == {} and ops["workflows"] == {}
    assert api.get("/agents?partial=true").json()["ops"]["tools"]["delete_record"]["inputSchema"] is None
    error_of(api.get("/agents/nobody"), 404, "AGENT_NOT_FOUND")


def test_stream_pauses_with_camelcase_frames_then_approve_streams_the_rest(api, calls):
    response = api.post("/agents/ops/stream", json={"messages": "delete abc-123", "threadId": "t1"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = sse_frames(response.text)
    assert frames[-1] == "[DONE]"
    assert [f["type"] for f in frames[:-1]] == [
        "start",
        "step-start",
        "tool-call",
        "tool-call-approval",
    ]
    run_id = response.headers["x-troupe-run-id"]
    assert all(f["runId"] == run_id and f["from"] == "AGENT" for f in frames[:-1])
    approval = approval_of(frames)["payload"]
    assert approval["toolCallId"] == "call-1" and approval["toolName"] == "delete_record"
    assert approval["args"] == {"id": "abc-123"} and approval["agentPath"] == ["ops"]
    assert json.loads(approval["resumeSchema"])["required"] == ["approved"], "a JSON string, as Mastra's"
    assert calls.count() == 0

    done = stream_frames(
        api, "/agents/ops/approve-tool-call", {"runId": run_id, "toolCallId": "call-1"}, ADMIN
    )
    assert done[0]["type"] == "tool-result", "a decision stream goes straight on (no start)"
    result = done[0]["payload"]
    assert result["toolCallId"] == "call-1" and result["result"] == {"deleted": "abc-123"}
    assert "".join(f["payload"]["text"] for f in done if f["type"] == "text-delta") == (
        'call-1={"deleted": "abc-123"}'
    )
    assert calls.count("delete_record") == 1
    # A call is decided once: a second approval is a conflict (an HTTP error, not a stream).
    again = api.post("/agents/ops/approve-tool-call", json={"runId": run_id, "toolCallId": "call-1"})
    assert "already approved by ops" in error_of(again, 409, "AGENT_DECISION_CONFLICT")["error"]


def test_generate_then_decline_generate_and_decline_stream(api, calls):
    paused = api.post("/agents/ops/generate", json={"messages": [{"role": "user", "content": "delete it"}]})
    assert paused.status_code == 200, paused.text
    body = paused.json()
    assert body["finishReason"] == "suspended"
    assert body["suspendPayload"]["toolCallId"] == "call-1"
    assert body["pendingToolCalls"][0]["fingerprint"] == body["suspendPayload"]["fingerprint"]
    declined = api.post(
        "/agents/ops/decline-tool-call-generate",
        json={"runId": body["runId"], "toolCallId": "call-1", "reason": "keep it"},
    )
    assert declined.status_code == 200, declined.text
    assert declined.json()["text"] == "call-1=keep it" and declined.json()["finishReason"] == "stop"

    second = api.post("/agents/ops/generate", json={"messages": "delete it"}).json()
    frames = stream_frames(
        api, "/agents/ops/decline-tool-call", {"runId": second["runId"], "toolCallId": "call-1"}, ADMIN
    )
    assert frames[-1]["type"] == "finish"
    assert "Tool call was not approved by the user" in "".join(
        f["payload"]["text"] for f in frames if f["type"] == "text-delta"
    )
    third = api.post("/agents/ops/generate", json={"messages": "delete it"}).json()
    approved = api.post(
        "/agents/ops/approve-tool-call-generate", json={"runId": third["runId"], "toolCallId": "call-1"}
    ).json()
    assert approved["text"] == 'call-1={"deleted": "abc-123"}'
    # Mastra lists tool calls and results as the chunks that carried them.
    assert approved["toolResults"][0]["type"] == "tool-result"
    assert approved["toolResults"][0]["payload"]["result"] == {"deleted": "abc-123"}
    assert approved["totalUsage"] == approved["usage"]
    assert [m["role"] for m in approved["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in approved["response"]["messages"]] == ["assistant", "tool", "assistant"]
    assert calls.count("delete_record") == 1


def test_resume_stream_validates_the_answer_and_resume_generate_finishes(api, calls):
    first = api.post("/agents/planner/generate", json={"messages": "weather?"}).json()
    assert first["suspendPayload"]["suspendPayload"] == {"message": "Which city?"}
    assert json.loads(first["suspendPayload"]["resumeSchema"])["required"] == ["city"]
    assert first["resumeSchema"] == first["suspendPayload"]["resumeSchema"]

    wrong = api.post(
        "/agents/planner/resume-stream", json={"runId": first["runId"], "resumeData": {"town": 1}}
    )
    error_of(wrong, 422, "AGENT_RESUME_DATA_INVALID")
    assert api.get("/agents/planner/suspended-runs").json()["total"] == 1, "still paused, nothing lost"

    frames = stream_frames(
        api, "/agents/planner/resume-stream", {"runId": first["runId"], "resumeData": {"city": "Rome"}}, ADMIN
    )
    assert frames[-1]["payload"]["finishReason"] == "stop"

    second = api.post("/agents/planner/generate", json={"messages": "weather?"}).json()
    done = api.post(
        "/agents/planner/resume-generate",
        json={"runId": second["runId"], "toolCallId": "w1", "resumeData": {"city": "Oslo"}},
    ).json()
    assert done["text"] == 'w1={"city": "Oslo", "forecast": "sunny"}'


def test_suspended_runs_are_listed_with_mastras_fields_filters_and_pages(api):
    runs = []
    for i, (thread, resource) in enumerate([("t1", "a1"), ("t1", "a2"), ("t2", "a1")]):
        body = {"messages": f"delete {i}", "memory": {"thread": {"id": thread}, "resource": resource}}
        runs.append(api.post("/agents/ops/generate", json=body).json()["runId"])

    listed = api.get("/agents/ops/suspended-runs").json()
    assert listed["total"] == 3
    assert [r["runId"] for r in listed["runs"]] == runs[::-1], "newest pause first"
    run = listed["runs"][0]
    assert run["status"] == "suspended" and run["threadId"] == "t2" and run["resourceId"] == "a1"
    datetime.fromisoformat(run["suspendedAt"])
    [call] = run["toolCalls"]
    assert call["toolCallId"] == "call-1" and call["toolName"] == "delete_record"
    assert call["requiresApproval"] is True and call["args"] == {"id": "abc-123"}

    def ids(**query):
        return [r["runId"] for r in api.get("/agents/ops/suspended-runs", params=query).json()["runs"]]

    # As Mastra: an agent without memory has no threads whose ownership it could check.
    denied = error_of(api.get("/agents/ops/suspended-runs", params={"threadId": "t1"}), 403, "FORBIDDEN")
    assert "no memory configured to validate thread ownership" in denied["error"]
    assert ids(resourceId="a1") == [runs[2], runs[0]]
    assert ids(perPage=2, page=1) == [runs[0]]
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    assert ids(fromDate=later) == []
    assert len(ids(toDate=later.replace("+00:00", "Z"))) == 3
    assert len(ids(fromDate="2000-01-01T00:00:00")) == 3, "a naive date is taken as UTC"
    assert ids(page=1) == [], "a page without perPage has 100 runs"
    error_of(api.get("/agents/ops/suspended-runs", params={"page": -1}), 422, "INVALID_REQUEST")
    error_of(api.get("/agents/ops/suspended-runs", params={"perPage": 0}), 422, "INVALID_REQUEST")
    error_of(api.get("/agents/ops/suspended-runs", params={"fromDate": "soon"}), 422, "INVALID_REQUEST")


def test_send_tool_approval_answers_like_mastra_or_streams_on_request(api, calls):
    first = api.post(
        "/agents/ops/generate", json={"messages": "x", "threadId": "th", "resourceId": "a1"}
    ).json()
    accepted = api.post(
        "/agents/ops/send-tool-approval",
        json={"threadId": "th", "resourceId": "a1", "toolCallId": "call-1", "approved": True},
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json() == {"accepted": True, "runId": first["runId"], "toolCallId": "call-1"}
    assert _eventually(lambda: calls.count("delete_record") == 1)

    api.post("/agents/ops/generate", json={"messages": "x", "threadId": "th", "resourceId": "a1"})
    api.post("/agents/ops/generate", json={"messages": "x", "threadId": "th", "resourceId": "a1"})
    error_of(
        api.post("/agents/ops/send-tool-approval", json={"threadId": "th", "approved": False}),
        409,
        "AGENT_SUSPENDED_RUNS_AMBIGUOUS",
    )
    error_of(
        api.post("/agents/ops/send-tool-approval", json={"threadId": "nowhere", "approved": True}),
        404,
        "AGENT_NO_SUSPENDED_RUN",
    )
    one = api.post("/agents/ops/generate", json={"messages": "x", "threadId": "solo"}).json()
    streamed = api.post(
        "/agents/ops/send-tool-approval",
        json={"threadId": "solo", "approved": False, "reason": "no"},
        headers={"Accept": "text/event-stream"},
    )
    frames = sse_frames(streamed.text)
    assert frames[-1] == "[DONE]" and frames[0]["runId"] == one["runId"]
    assert "call-1=no" in "".join(f["payload"]["text"] for f in frames[:-1] if f["type"] == "text-delta")


def test_caller_mistakes_are_4xx_json_errors_before_any_stream(api):
    run_id = api.post("/agents/ops/generate", json={"messages": "x"}).json()["runId"]
    approve = "/agents/ops/approve-tool-call"
    error_of(
        api.post(approve, json={"runId": run_id, "toolCallId": "other"}),
        409,
        "AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED",
    )
    error_of(
        api.post(approve, json={"runId": "nope", "toolCallId": "call-1"}),
        404,
        "AGENT_RESUME_NO_SNAPSHOT_FOUND",
    )
    missing = error_of(api.post(approve, json={"toolCallId": "call-1"}), 422, "INVALID_REQUEST")
    assert missing["details"]["errors"][0]["loc"] == ["body", "runId"]
    refused = api.post(approve, json={"runId": run_id, "toolCallId": "call-1", "editedArgs": {"id": "z"}})
    error_of(refused, 422, "AGENT_DECISION_REJECTED")
    error_of(api.post(approve, content=b"{not json", headers=JSON), 422, "INVALID_REQUEST")
    error_of(api.post(approve, content=b"\xff\xfe", headers=JSON), 422, "INVALID_REQUEST")
    error_of(api.post(approve, json=["runId"]), 422, "INVALID_REQUEST")
    error_of(api.post("/agents/ops/stream", json={"messages": []}), 422, "INVALID_REQUEST")
    error_of(api.post("/agents/ops/stream", json={"messages": "x", "maxSteps": 0}), 422, "INVALID_REQUEST")
    error_of(
        api.post("/agents/ops/stream", json={"messages": [{"role": "robot", "content": "x"}]}),
        422,
        "INVALID_REQUEST",
    )
    surrogate = b'{"messages": "\\ud800"}'  # valid JSON, but not text that can be stored
    error_of(api.post("/agents/ops/stream", content=surrogate, headers=JSON), 422, "INVALID_REQUEST")
    both = {"messages": "x", "threadId": "t1", "memory": {"thread": "t2"}}
    error_of(api.post("/agents/ops/stream", json=both), 422, "INVALID_REQUEST")
    error_of(api.post("/agents/ops/stream", json={"messages": "x", "runId": run_id}), 409, "AGENT_RUN_EXISTS")
    error_of(api.post("/agents/nobody/stream", json={"messages": "x"}), 404, "AGENT_NOT_FOUND")
    error_of(api.get("/nowhere"), 404, "HTTP_ERROR")
    error_of(api.get("/agents/ops/stream"), 405, "HTTP_ERROR")
    # The paused call is untouched by all of the above.
    assert api.post(approve, json={"runId": run_id, "toolCallId": "call-1"}).status_code == 200


def _eventually(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()
