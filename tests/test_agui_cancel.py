"""Cancelled runs over AG-UI, with the official AG-UI client (``@ag-ui/client``'s ``HttpAgent``, pinned in
tests/agui_js) against a real server (uvicorn, SQLite), on both executors. AG-UI has no request that
cancels a run: the page cancels through Troupe's route (``POST /api/agents/{id}/cancel-run``), and the
AG-UI stream of a cancelled run ends with everything open closed (a subagent still working in
``SUBAGENT_ERROR`` ``AGENT_RUN_CANCELLED``), a ``STATE_SNAPSHOT`` whose status is ``cancelled`` (who, why)
and ``RUN_FINISHED`` with the ``cancelled`` outcome: while it streams, and when the page comes back to
it. A resume of an interrupt whose run was cancelled is a ``RUN_ERROR`` ``AGENT_RUN_CANCELLED`` that
decides nothing; a ``cancelled`` resume entry still only declines its call."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agui_agents import KEYS, agui_runtime
from cancel_agents import phases, work_tool
from helpers import echo_model, sqlite_audit
from test_agui import APPROVE, event, interrupts, page, run_error, steps, succeeded

from troupe import Agent
from troupe.testing import CallLog, tool_call


def slow_agents(calls: CallLog, never: str) -> list[Agent]:
    """``slow`` calls ``work``, which never finishes by itself; ``chief`` delegates to ``crew``, which
    does the same."""
    crew = Agent(
        "crew",
        model=echo_model(tool_call("work", {"name": "job-1"}, id="w1")),
        tools=[work_tool(calls, never)],
    )
    return [
        Agent(
            "slow",
            model=echo_model(tool_call("work", {"name": "job-1"}, id="w1")),
            tools=[work_tool(calls, never)],
        ),
        Agent(
            "chief",
            model=echo_model(tool_call("agent-crew", {"prompt": "work"}, id="d1")),
            agents={"crew": crew},
        ),
    ]


@pytest.fixture
def server(http_server, tmp_path, calls, executor):
    never = str(tmp_path / "never-opened")
    build = agui_runtime(tmp_path / "agui.db", calls, executor, more=lambda: slow_agents(calls, never))
    return http_server(build, keys=KEYS)


def cancelled_end(report: dict[str, Any]) -> dict[str, Any]:
    """The run ended cancelled, as the client took it; the Troupe part of its last state."""
    assert "thrown" not in report, report.get("thrown")
    assert report["types"][-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"], report["types"]
    assert event(report, "RUN_FINISHED")["outcome"] == {"type": "cancelled"}
    assert report["pending"] == []
    troupe: dict[str, Any] = report["state"]["troupe"]
    assert troupe["status"] == "cancelled" and troupe["interrupts"] == []
    return troupe


def test_a_run_cancelled_while_it_streams_ends_cancelled_and_stays_so_on_reconnect(server, calls):
    [streamed] = steps(
        server.url,
        page("slow", "t1", user="do the work", cancelOn="TOOL_CALL_START:work", reason="not needed"),
    )
    assert streamed["cancel"]["status"] == 200, streamed["cancel"]
    troupe = cancelled_end(streamed)
    assert troupe["runId"] == streamed["troupeRun"]
    assert (troupe["cancelled"]["cancelledBy"], troupe["cancelled"]["reason"]) == ("tenant-a", "not needed")
    result = event(streamed, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "w1"
    assert result["metadata"] == {"troupe": {"error": True, "cancelled": True}}
    assert phases(calls, "work") == ["started"], "the tool was cancelled, never finished"

    # A page that lost its stream and kept only its state (no messages) comes back to the thread: told
    # the run was cancelled (a page that kept the conversation starts a new run of it, as AG-UI has it).
    [kept] = steps(server.url, page("slow", "t1", client="K", state=streamed["state"]))
    assert cancelled_end(kept)["runId"] == streamed["troupeRun"]
    stranger = page("slow", "t1", client="B", key="key-b", resource="b1", state=kept["state"])
    [other] = steps(server.url, stranger)
    assert event(other, "RUN_FINISHED")["outcome"] == {"type": "success"}, "not another tenant's to know"


def test_a_subagent_still_working_when_its_run_is_cancelled_is_closed(server, calls):
    [streamed] = steps(
        server.url,
        page("chief", "t1", user="get it done", cancelOn="TOOL_CALL_START:work", reason="stop all"),
    )
    troupe = cancelled_end(streamed)
    started = event(streamed, "SUBAGENT_STARTED")
    ended = event(streamed, "SUBAGENT_ERROR")
    assert ended["subagentRunId"] == started["subagentRunId"] and ended["code"] == "AGENT_RUN_CANCELLED"
    assert "SUBAGENT_FINISHED" not in streamed["types"]
    assert [s["status"] for s in troupe["subagents"]] == ["cancelled"]
    assert troupe["cancelled"]["reason"] == "stop all"
    assert phases(calls, "work") == ["started"]


def test_a_subagent_run_cancelled_while_streamed_ends_in_subagent_error_and_its_parent_goes_on(server, calls):
    [streamed] = steps(
        server.url,
        page("chief", "t1", user="get it done", cancelOn="TOOL_CALL_START:work", cancelSubagent="crew"),
    )
    assert streamed["cancel"]["status"] == 200, streamed["cancel"]
    started, ended = event(streamed, "SUBAGENT_STARTED"), event(streamed, "SUBAGENT_ERROR")
    assert ended["subagentRunId"] == started["subagentRunId"] and ended["code"] == "AGENT_RUN_CANCELLED"
    assert f"the subagent's run {started['subagentRunId']} was cancelled by tenant-a" in ended["message"]
    told = succeeded(streamed)
    assert told.startswith("d1=") and "was cancelled by tenant-a" in told, "the parent's model heard it"
    assert streamed["state"]["troupe"]["status"] == "finished"
    assert [s["status"] for s in streamed["state"]["troupe"]["subagents"]] == ["cancelled"]


def test_a_resume_of_an_interrupt_whose_run_was_cancelled_decides_nothing(server, tmp_path, calls):
    [asked] = steps(server.url, page("ops", "t1", user="delete abc-123"))
    [interrupt] = interrupts(asked)
    run_id = asked["state"]["troupe"]["runId"]
    cancelled = httpx.post(
        f"{server.url}/api/agents/ops/cancel-run",
        json={"runId": run_id, "reason": "wrong record"},
        headers={"Authorization": "Bearer key-a"},
        timeout=60,
    )
    assert cancelled.status_code == 200, cancelled.text

    # The page still holds the interrupt, so it must answer it: the answer is refused, whatever it says.
    answered, declined = steps(
        server.url,
        page("ops", "t1", state=asked["state"], rawResume=[{"interruptId": interrupt["id"], **APPROVE}]),
        page(
            "ops",
            "t1",
            client="B",
            state=asked["state"],
            rawResume=[{"interruptId": interrupt["id"], "status": "cancelled"}],
        ),
    )
    for report in (answered, declined):
        refused = run_error(report)
        assert refused["code"] == "AGENT_RUN_CANCELLED"
        assert "cancelled by tenant-a: wrong record" in refused["message"]
    assert calls.count("delete_record") == 0
    assert [e.kind for e in sqlite_audit(tmp_path / "agui.db", run_id)] == ["cancelled", "cancelled"]


def test_a_cancelled_resume_entry_declines_its_call_and_cancels_no_run(server, tmp_path, calls):
    asked, both = steps(
        server.url,
        page("pair", "t1", user="delete a and b"),
        page("pair", "t1", resume={"call-a": APPROVE, "call-b": {"status": "cancelled"}}),
    )
    assert succeeded(both) == 'call-a={"deleted": "a"} | call-b=Tool call was not approved by the user'
    assert both["state"]["troupe"]["status"] == "finished"
    audit = sqlite_audit(tmp_path / "agui.db", asked["state"]["troupe"]["runId"])
    assert sorted((e.tool_call_id, e.kind) for e in audit) == [("call-a", "approved"), ("call-b", "declined")]
