"""Decisions are checked strictly, over the real HTTP server: resume data is not coerced, an approval
that declines cannot carry resume data, and every decision route refuses a run that is not its agent's
(admins too) before anything is claimed."""

from __future__ import annotations

import time

import httpx
import pytest
from http_server import ADMIN, KEYS
from inbox_agents import inbox_runtime


@pytest.fixture
def api(http_server, tmp_path, calls):
    server = http_server(inbox_runtime(tmp_path, calls), keys=KEYS)
    with httpx.Client(base_url=server.url + "/api", headers=ADMIN, timeout=30) as client:
        yield client


def paused(api: httpx.Client, agent: str, message: str, thread: str | None = None) -> str:
    body = {"messages": message, **({"threadId": thread} if thread else {})}
    response = api.post(f"/agents/{agent}/generate", json=body)
    assert response.json()["finishReason"] == "suspended", response.text
    return str(response.json()["runId"])


def code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["code"]


def waiting(api: httpx.Client, run_id: str) -> list[str]:
    runs = api.get("/inbox").json()["runs"]
    return [c["toolCallId"] for r in runs if r["runId"] == run_id for c in r["toolCalls"]]


def test_resume_data_is_not_coerced(api, calls):
    run = paused(api, "planner", "dinner")
    for loose in ({"people": "5"}, {"people": True}, {"people": 4.0, "seating": "indoor"}):
        refused = api.post("/agents/planner/resume-generate", json={"runId": run, "resumeData": loose})
        assert code(refused) == (422, "AGENT_RESUME_DATA_INVALID"), loose
    assert waiting(api, run) == ["b1"], "still paused, nothing lost"
    assert [e["phase"] for e in calls.entries("book_table")] == ["suspend"]

    exact = api.post("/agents/planner/resume-generate", json={"runId": run, "resumeData": {"people": 5}})
    assert exact.status_code == 200, exact.text
    assert calls.entries("book_table")[-1]["people"] == 5


def test_an_approval_that_declines_cannot_carry_resume_data(api, calls):
    run = paused(api, "planner", "lunch", thread="t-lunch")
    body = {"threadId": "t-lunch", "approved": False, "resumeData": {"people": 2}}
    refused = api.post("/agents/planner/send-tool-approval", json=body)
    assert code(refused) == (422, "INVALID_REQUEST") and "cannot come with approved: false" in refused.text
    assert waiting(api, run) == ["b1"]
    assert [e["phase"] for e in calls.entries("book_table")] == ["suspend"]


def test_an_approval_whose_resume_data_declines_is_refused_as_contradictory(api, calls):
    run = paused(api, "ops", "rec-1", thread="t-rec")
    body = {"threadId": "t-rec", "approved": True, "resumeData": {"approved": False}}
    refused = api.post("/agents/ops/send-tool-approval", json=body)
    assert code(refused) == (422, "AGENT_RESUME_DATA_INVALID")
    assert "the resume data says approved: false" in refused.json()["error"]
    assert waiting(api, run) == ["call-1"] and calls.count("delete_record") == 0, "still paused"
    agreed = {"threadId": "t-rec", "approved": True, "resumeData": {"approved": True}}
    taken = api.post("/agents/ops/send-tool-approval", json=agreed)
    assert taken.status_code == 200 and taken.json()["runId"] == run, "nothing was decided before"
    deadline = time.monotonic() + 20
    while calls.count("delete_record") == 0:
        assert time.monotonic() < deadline, "the approved tool never ran"
        api.get("/inbox")  # a round trip, not a sleep: the run goes on in the server meanwhile


def test_a_decision_through_another_agents_route_is_refused_before_anything_is_claimed(api, calls):
    run = paused(api, "planner", "supper")
    ops_run = paused(api, "ops", "rec-1")
    attempts = [
        ("ops", "resume-generate", {"runId": run, "resumeData": {"people": "lots"}}),
        ("ops", "decline-tool-call-generate", {"runId": run, "toolCallId": "b1"}),
        ("sup", "approve-tool-call", {"runId": ops_run, "toolCallId": "call-1", "editedArgs": {"id": "x"}}),
        ("planner", "approve-tool-call-generate", {"runId": ops_run, "toolCallId": "call-1"}),
    ]
    for agent, route, body in attempts:
        # The admin key may act on any run, but only through the run's own agent.
        refused = api.post(f"/agents/{agent}/{route}", json=body)
        assert code(refused) == (404, "AGENT_RESUME_NO_SNAPSHOT_FOUND"), (agent, route)
    assert waiting(api, run) == ["b1"] and waiting(api, ops_run) == ["call-1"]
    assert calls.count("delete_record") == 0 and len(calls.entries("book_table")) == 1
