"""Remote A2A agents as subagents (``A2AAgent``), on both executors: a second Troupe process served over
A2A whose subagent pauses (three levels in all), and an agent written here with the a2a-sdk's own server
side. Either way the remote task's ``input-required`` is a pause of the supervisor that reaches its inbox
and ``list_suspended_runs``, and the answer reaches the remote agent; a supervisor process SIGKILLed while
the remote pause waits is replaced by a new one that answers it. Failures are tool errors naming the
remote agent; an answer that cannot be delivered leaves the call paused."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.helpers.proto_helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import TaskState
from a2a_agents import AskingAgent, BrokenEndpoint, DropsFirstAnswer, FailsAfterActing, SdkServer, sdk_card
from a2a_trees import desk
from conftest import TESTS
from google.protobuf.json_format import MessageToDict
from helpers import chunks_of
from store_hooks import HookedStore
from troupe.actors.a2a import proxy_run
from troupe.actors.a2a.errors import RemoteCardError
from troupe.actors.a2a.handle import A2AHandle
from troupe.actors.a2a.pending import PENDING_KIND, pending_data, read_pending
from troupe.core.run.delegation import child_run_id
from troupe.core.vocabulary.requests import DecideRequest, Resume
from troupe.core.vocabulary.suspended import PendingToolCall

from troupe import A2AAgent, ApproverPolicy, Memory, Runtime, SqliteStore
from troupe.errors import ApprovalPolicyError, DecisionConflictError
from troupe.testing import CallLog

ADMIN = {"Authorization": "Bearer key-admin"}
TOP_KEYS = {"key-admin": {"name": "ops", "admin": True}}


# ---- the remote agents -------------------------------------------------------------------------------


class TroupeRemote:
    """``tests/a2a_remote_server.py`` in a process of its own."""

    def __init__(self, tmp_path: Path) -> None:
        self.calls = CallLog(tmp_path / "remote-calls.jsonl")
        self.db = tmp_path / "remote.db"
        portfile = tmp_path / "remote.port"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(TESTS / "a2a_remote_server.py"),
                str(self.db),
                str(self.calls.path),
                str(portfile),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(600):
            if portfile.exists() and portfile.read_text():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("the remote Troupe process exited")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{portfile.read_text()}"

    def agent(self, agent_id: str = "mid") -> A2AAgent:
        return A2AAgent("vendor", card_url=f"{self.url}/a2a/{agent_id}", bearer_token="key-sup")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def troupe_remote(tmp_path):
    remote = TroupeRemote(tmp_path)
    yield remote
    remote.stop()


@pytest.fixture
def sdk_servers():
    started: list[SdkServer] = []

    def start(executor: Any, handler: Any = None) -> SdkServer:
        """Serve ``executor``; ``handler``: a request handler of ``a2a_agents`` taking the agent's log."""
        made = functools.partial(handler, executor.log) if handler is not None else DefaultRequestHandler
        server = SdkServer(executor, handler=made).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- the supervisor, served ----------------------------------------------------------------------------


@pytest.fixture
async def top(http_server, tmp_path, executor):
    """Serve ``desk`` over ``remote`` on this test's executor; returns an httpx client to the server."""
    opened: list[httpx.AsyncClient] = []

    async def serve(remote: A2AAgent) -> httpx.AsyncClient:
        def build() -> Runtime:
            return Runtime([desk(remote)], storage=SqliteStore(tmp_path / "top.db"), executor=executor)  # type: ignore[arg-type]

        server = http_server(build, keys=TOP_KEYS)
        client = httpx.AsyncClient(base_url=server.url, headers=ADMIN, timeout=120)
        opened.append(client)
        return client

    yield serve
    for client in opened:
        await client.aclose()


async def paused_at_the_top(http: httpx.AsyncClient) -> dict[str, Any]:
    """Start ``desk``; check the remote pause is in the inbox and the suspended-runs listing."""
    started = await http.post("/api/agents/desk/generate", json={"messages": "go", "resourceId": "r1"})
    assert started.status_code == 200, started.text
    result = started.json()
    assert result["finishReason"] == "suspended", result
    inbox = (await http.get("/api/inbox")).json()
    listed = (await http.get("/api/agents/desk/suspended-runs")).json()
    for listing in (inbox, listed):
        (run,) = listing["runs"]
        assert run["runId"] == result["runId"]
        assert [c["toolCallId"] for c in run["toolCalls"]] == ["d1"]
    return {"result": result, "call": inbox["runs"][0]["toolCalls"][0]}


# ---- a second Troupe process ---------------------------------------------------------------------------


async def test_a_troupe_remotes_pause_bubbles_up_three_levels_and_the_answer_runs_the_tool_once(
    top, troupe_remote
):
    http = await top(troupe_remote.agent())
    paused = await paused_at_the_top(http)
    call = paused["call"]
    assert call["toolName"] == "delete_record" and call["args"] == {"id": "abc-123"}
    assert call["agentPath"] == ["desk", "vendor", "mid", "leaf"]
    assert call["toolOrigin"]["a2a"]["agent"] == "vendor"
    assert call["toolOrigin"]["a2a"]["url"] == f"{troupe_remote.url}/a2a/mid"
    assert troupe_remote.calls.count("delete_record") == 0

    body = {"runId": paused["result"]["runId"], "toolCallId": "d1", "fingerprint": call["fingerprint"]}
    done = await http.post("/api/agents/desk/approve-tool-call-generate", json=body)
    assert done.status_code == 200, done.text
    assert done.json()["text"] == 'd1=c-mid=c-leaf={"deleted": "abc-123"}'
    assert troupe_remote.calls.count("delete_record") == 1
    again = await http.post("/api/agents/desk/approve-tool-call-generate", json=body)
    assert again.status_code in (404, 409) and troupe_remote.calls.count("delete_record") == 1


async def test_a_troupe_remotes_decline_reaches_its_tool_call(top, troupe_remote):
    http = await top(troupe_remote.agent())
    paused = await paused_at_the_top(http)
    body = {"runId": paused["result"]["runId"], "toolCallId": "d1", "reason": "not this one"}
    done = await http.post("/api/agents/desk/decline-tool-call-generate", json=body)
    assert done.json()["text"] == "d1=c-mid=c-leaf=not this one"
    assert troupe_remote.calls.count("delete_record") == 0


async def test_resume_data_that_fails_the_remote_schema_is_refused_and_the_call_stays_paused(
    top, troupe_remote
):
    http = await top(troupe_remote.agent("planner"))
    paused = await paused_at_the_top(http)
    assert paused["call"]["suspendPayload"] == {"message": "Which city?"}
    body = {"runId": paused["result"]["runId"], "toolCallId": "d1"}
    refused = await http.post("/api/agents/desk/resume-generate", json={**body, "resumeData": {"city": 5}})
    assert refused.status_code == 422 and refused.json()["code"] == "AGENT_RESUME_DATA_INVALID"
    assert "city" in refused.json()["error"]
    assert [r["runId"] for r in (await http.get("/api/inbox")).json()["runs"]] == [body["runId"]]
    done = await http.post("/api/agents/desk/resume-generate", json={**body, "resumeData": {"city": "Lyon"}})
    assert done.status_code == 200 and "Lyon" in done.json()["text"]
    assert [e["phase"] for e in troupe_remote.calls.entries("weather")] == ["suspend", "resume"]


async def test_a_troupe_remotes_two_pending_calls_are_decided_one_at_a_time_in_any_order(
    make_runtime, troupe_remote
):
    runtime = make_runtime([desk(troupe_remote.agent("batch"))])
    agent = runtime.get_agent("desk")
    paused = await agent.generate("go", resource_id="r1")
    assert paused.finish_reason == "suspended", paused
    (run,) = (await agent.list_suspended_runs()).runs
    pending = {p.args["id"]: p for p in run.pending}
    assert sorted(pending) == ["r-1", "r-2"] and {p.tool_call_id for p in run.pending} == {"d1"}
    second = pending["r-2"]
    still = await agent.approve_tool_call_generate(
        run_id=paused.run_id, tool_call_id="d1", fingerprint=second.fingerprint
    )
    assert still.finish_reason == "suspended"
    assert [e["id"] for e in troupe_remote.calls.entries("delete_record")] == ["r-2"]
    (left,) = (await agent.list_suspended_runs()).runs[0].pending
    assert left.args == {"id": "r-1"}
    done = await agent.decline_tool_call_generate(
        run_id=paused.run_id, tool_call_id="d1", fingerprint=left.fingerprint, reason="keep it"
    )
    assert done.text == 'd1=c1=keep it | c2={"deleted": "r-2"}'
    assert troupe_remote.calls.count("delete_record") == 1


async def test_the_top_supervisors_approver_policy_governs_a_remote_pause(make_runtime, troupe_remote):
    policy = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
    runtime = make_runtime([desk(troupe_remote.agent())], approver_policies=[policy])
    agent = runtime.get_agent("desk")
    paused = await agent.generate("go", resource_id="r1")
    with pytest.raises(ApprovalPolicyError):
        await agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1", decided_by="eve")
    assert troupe_remote.calls.count("delete_record") == 0
    done = await agent.approve_tool_call_generate(
        run_id=paused.run_id, tool_call_id="d1", decided_by="dana", roles=frozenset({"dba"})
    )
    assert done.finish_reason == "stop" and troupe_remote.calls.count("delete_record") == 1


# ---- an agent of the a2a-sdk's own ----------------------------------------------------------------------


async def test_an_sdk_agents_question_bubbles_up_and_the_answer_reaches_it(top, sdk_servers, tmp_path):
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(AskingAgent(log))
    http = await top(A2AAgent("vendor", card_url=server.url))
    paused = await paused_at_the_top(http)
    call = paused["call"]
    assert call["agentPath"] == ["desk", "vendor"] and call["suspendPayload"] == {"message": "Which city?"}
    assert call["args"] == {"prompt": "delete abc-123, please"}
    assert [e["prompt"] for e in log.entries("asked")] == ["delete abc-123, please"]

    body = {"runId": paused["result"]["runId"], "toolCallId": "d1", "resumeData": "Lyon"}
    done = await http.post("/api/agents/desk/resume-generate", json=body)
    assert done.status_code == 200, done.text
    assert done.json()["text"] == "d1=Sunny in Lyon"
    assert [e["answer"] for e in log.entries("answered")] == ["Lyon"]


def in_doubt_listing(deadline: datetime) -> dict[str, Any]:
    """What a Troupe remote lists for a gated call it took over from a host that may still run it."""
    doubt = {"owner": "host-7", "lastSeen": "2026-01-01T00:00:00Z", "deadline": deadline.isoformat()}
    call = {
        "toolCallId": "c-leaf",
        "kind": "approval",
        "toolName": "delete_record",
        "args": {"id": "abc-123"},
    }
    call |= {"agentPath": ["leaf"], "fingerprint": "f" * 32, "interrupted": True, "inDoubt": doubt}
    return {"kind": PENDING_KIND, "runId": "their-run", "pendingToolCalls": [call]}


async def test_a_remote_call_in_doubt_is_shown_so_and_not_decided_before_its_deadline(
    top, sdk_servers, tmp_path
):
    # The remote's call may still be running on one of its hosts: the people at the top are told so,
    # and a decision before its deadline is refused here, without being sent (the remote would refuse it).
    deadline = datetime.now(UTC) + timedelta(hours=1)
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(AskingAgent(log, question=[new_data_part(in_doubt_listing(deadline))]))
    http = await top(A2AAgent("vendor", card_url=server.url))
    paused = await paused_at_the_top(http)
    call = paused["call"]
    assert call["toolName"] == "delete_record" and call["interrupted"] is True
    assert call["inDoubt"]["owner"].startswith("host-7 at A2A agent 'vendor' (http://127.0.0.1:")
    assert datetime.fromisoformat(call["inDoubt"]["deadline"]) == deadline

    body = {"runId": paused["result"]["runId"], "toolCallId": "d1"}
    for route in ("approve-tool-call-generate", "decline-tool-call-generate"):
        refused = await http.post(f"/api/agents/desk/{route}", json=body)
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "AGENT_TOOL_CALL_IN_DOUBT"
    assert log.count("answered") == 0


def test_a_call_in_doubt_is_listed_with_its_marks_and_a_plain_one_without_them():
    at = datetime(2026, 1, 1, tzinfo=UTC)
    doubt = {"owner": "host-7", "last_seen": at, "deadline": at + timedelta(minutes=5)}
    shown = {"tool_name": "t", "args": {}, "requires_approval": True, "suspend_payload": None}
    shown |= {"agent_path": ["a"], "fingerprint": "f" * 32, "resume_schema": None, "paused_at": at}
    doubted = PendingToolCall(tool_call_id="c1", interrupted=True, in_doubt=doubt, **shown)
    plain = PendingToolCall(tool_call_id="c2", **shown)
    listed = pending_data("r1", [doubted, plain])["pendingToolCalls"]
    assert listed[0]["interrupted"] is True
    assert listed[0]["inDoubt"] == {
        "owner": "host-7",
        "lastSeen": "2026-01-01T00:00:00Z",
        "deadline": "2026-01-01T00:05:00Z",
    }
    assert "interrupted" not in listed[1] and "inDoubt" not in listed[1], "a reader from before them reads it"
    assert read_pending(in_doubt_listing(at)).pending_tool_calls[0].in_doubt is not None


async def test_an_answer_that_cannot_be_delivered_leaves_the_call_paused(top, sdk_servers, tmp_path):
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(AskingAgent(log))
    http = await top(A2AAgent("vendor", card_url=server.url))
    paused = await paused_at_the_top(http)
    server.stop()
    body = {"runId": paused["result"]["runId"], "toolCallId": "d1", "resumeData": "Lyon"}
    refused = await http.post("/api/agents/desk/resume-generate", json=body)
    assert refused.status_code == 503 and refused.json()["code"] == "A2A_DECISION_NOT_DELIVERED"
    assert "vendor" in refused.json()["error"] and "not sent" in refused.json()["error"]
    listed = (await http.get("/api/agents/desk/suspended-runs")).json()["runs"]
    assert [c["toolCallId"] for c in listed[0]["toolCalls"]] == ["d1"]
    assert log.count("answered") == 0
    proxy = await SqliteStore(tmp_path / "top.db").load_run(child_run_id(body["runId"], "d1"))
    assert proxy is not None and proxy.state.status == "suspended", "the remote's question still waits too"
    assert proxy.state.calls[0].decision is None


class ActsThenBreaks(AskingAgent):
    """Acts on the answer (records it), then raises: the a2a-sdk's server answers the request with an
    internal error and fails the task."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        if context.current_task is None:
            return await super().execute(context, event_queue)
        self.log.record("answered", task_id=context.task_id)
        raise RuntimeError("the booking went through, then the agent broke")


class ActsThenMisreports(AskingAgent):
    """Acts on the answer, then reports on another task: the a2a-sdk's server answers the request with
    "invalid params" (a code that reads as a refusal) and fails the task."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        if context.current_task is None:
            return await super().execute(context, event_queue)
        self.log.record("answered", task_id=context.task_id)
        await TaskUpdater(event_queue, "another-task", context.context_id or "").start_work()


@pytest.mark.parametrize("agent", [ActsThenBreaks, ActsThenMisreports])
async def test_an_answer_the_remote_agent_failed_on_is_followed_to_its_task_not_reported_not_taken(
    make_runtime, sdk_servers, tmp_path, agent
):
    """The request that carried the answer got an error, whatever its code, but the task moved on (the
    SDK's server failed it): the answer was taken, so the run goes on with the task's failure, a tool
    error the model sees. It is not put back as "not taken" for a second answer."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(agent(log))
    runtime = make_runtime([desk(A2AAgent("vendor", card_url=server.url))])
    agent = runtime.get_agent("desk")
    paused = await agent.generate("go", resource_id="r1")
    done = await agent.resume_generate("Lyon", run_id=paused.run_id, tool_call_id="d1")
    assert done.finish_reason == "stop" and done.text.startswith("d1=")
    assert "A2A agent 'vendor'" in done.text and "failed" in done.text
    with pytest.raises(DecisionConflictError):
        await agent.resume_generate("Paris", run_id=paused.run_id, tool_call_id="d1")
    assert log.count("answered") == 1


async def test_an_answer_the_remote_agent_may_have_acted_on_waits_again_marked_interrupted(
    top, sdk_servers, tmp_path
):
    """The remote agent acted on the answer, then failed with an internal error, and its task still asks:
    the answer is not sent again, nor called not taken. The call waits again at the top, marked
    interrupted, and the decider hears why (502); deciding again is theirs to choose."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(AskingAgent(log), FailsAfterActing)
    http = await top(A2AAgent("vendor", card_url=server.url))
    paused = await paused_at_the_top(http)
    assert paused["call"]["interrupted"] is False
    body = {"runId": paused["result"]["runId"], "toolCallId": "d1", "resumeData": "Lyon"}
    failed = await http.post("/api/agents/desk/resume-generate", json=body)
    assert failed.status_code == 502, failed.text
    assert failed.json()["code"] == "AGENT_DECISION_INTERRUPTED"
    assert "may have acted" in failed.json()["error"] and "vendor" in failed.json()["error"]
    assert log.count("acted") == 1 and log.count("answered") == 0, "sent once, and not again by itself"
    inbox = (await http.get("/api/inbox")).json()["runs"]
    listed = (await http.get("/api/agents/desk/suspended-runs")).json()["runs"]
    for runs in (inbox, listed):
        (call,) = runs[0]["toolCalls"]
        assert call["toolCallId"] == "d1" and call["interrupted"] is True
    proxy = await SqliteStore(tmp_path / "top.db").load_run(child_run_id(body["runId"], "d1"))
    assert proxy is not None and proxy.state.status == "suspended"
    assert proxy.state.calls[0].decision is None and proxy.state.calls[0].pauses[-1].interrupted
    # Deciding again is the decider's informed choice, and it goes through.
    done = await http.post("/api/agents/desk/resume-generate", json=body)
    assert done.status_code == 200, done.text
    assert done.json()["text"] == "d1=Sunny in Lyon"
    assert log.count("acted") == 1 and log.count("answered") == 1


async def test_an_answer_that_may_have_acted_two_hops_down_waits_marked_interrupted_at_the_top(
    top, http_server, sdk_servers, tmp_path
):
    """Top -> a Troupe agent served over A2A -> an a2a-sdk agent that acts on the answer, then fails
    with an internal error. The Troupe agent in the middle says so on its task; the top reads it as
    such, not as a refusal: its call waits again marked interrupted, and the decider hears why."""
    log = CallLog(tmp_path / "sdk.jsonl")
    sdk = sdk_servers(AskingAgent(log), FailsAfterActing)
    vendor = A2AAgent("vendor", card_url=sdk.url)
    keys = {"key-sup": {"name": "supervisor", "resources": ["r1"]}}
    middle = http_server(
        lambda: Runtime([desk(vendor)], storage=SqliteStore(tmp_path / "mid.db"), executor="local"),
        keys=keys,
    )
    http = await top(A2AAgent("middle", card_url=f"{middle.url}/a2a/desk", bearer_token="key-sup"))
    paused = await paused_at_the_top(http)
    body = {"runId": paused["result"]["runId"], "toolCallId": "d1", "resumeData": "Lyon"}
    failed = await http.post("/api/agents/desk/resume-generate", json=body)
    assert failed.status_code == 502, failed.text
    assert failed.json()["code"] == "AGENT_DECISION_INTERRUPTED"
    assert "'middle'" in failed.json()["error"] and "may have acted" in failed.json()["error"]
    assert log.count("acted") == 1 and log.count("answered") == 0
    (run,) = (await http.get("/api/agents/desk/suspended-runs")).json()["runs"]
    (call,) = run["toolCalls"]
    assert call["toolCallId"] == "d1" and call["interrupted"] is True
    done = await http.post("/api/agents/desk/resume-generate", json=body)
    assert done.status_code == 200, done.text
    assert done.json()["text"] == "d1=d1=Sunny in Lyon"


async def test_an_answer_whose_reply_is_lost_is_looked_up_never_sent_again(
    make_runtime, sdk_servers, tmp_path
):
    """The remote agent takes the answer but replies after the client gave up waiting: the task is asked
    where it stands (completed, in the end) and the answer is not sent a second time."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(AskingAgent(log, answer_delay_s=3.0))
    runtime = make_runtime([desk(A2AAgent("vendor", card_url=server.url, timeout_s=1.0))])
    agent = runtime.get_agent("desk")
    paused = await agent.generate("go", resource_id="r1")
    done = await agent.resume_generate("Lyon", run_id=paused.run_id, tool_call_id="d1")
    assert done.text == "d1=Sunny in Lyon"
    assert [e["answer"] for e in log.entries("answered")] == ["Lyon"]


async def test_an_answer_whose_reply_is_lost_and_whose_task_still_asks_is_asked_again_marked_interrupted(
    sdk_servers, tmp_path, monkeypatch
):
    """The request carrying the answer broke off (the client's timeout), and the task still asks after
    the grace, with no sign the answer arrived: the question is asked again, marked interrupted, rather
    than the delegation failed or the answer sent a second time. The next answer goes through."""
    monkeypatch.setattr(proxy_run, "_UNSURE_GRACE_S", 0.3)
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(AskingAgent(log), DropsFirstAnswer)
    vendor = A2AAgent("vendor", card_url=server.url, timeout_s=1.0)
    runtime = Runtime([desk(vendor)], storage=SqliteStore(tmp_path / "top.db"), executor="local")
    try:
        agent = runtime.get_agent("desk")
        paused = await agent.generate("go", resource_id="r1")
        again = await agent.resume_generate("Lyon", run_id=paused.run_id, tool_call_id="d1")
        assert again.finish_reason == "suspended", again.text
        assert log.count("dropped") == 1 and log.count("answered") == 0, "sent once"
        (run,) = (await agent.list_suspended_runs()).runs
        (call,) = run.pending
        assert call.tool_call_id == "d1" and call.interrupted
        done = await agent.resume_generate("Lyon", run_id=paused.run_id, tool_call_id="d1")
        assert done.text == "d1=Sunny in Lyon"
        assert log.count("dropped") == 1 and log.count("answered") == 1
    finally:
        await runtime.shutdown()


class QuietWorker(AskingAgent):
    """Names its task and says it works, then works silently for ``quiet_s`` before answering."""

    def __init__(self, log: CallLog, quiet_s: float) -> None:
        super().__init__(log)
        self.quiet_s = quiet_s

    async def execute(self, context: Any, event_queue: Any) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        task = new_task_from_user_message(context.message)
        task.id, task.context_id = updater.task_id, updater.context_id
        await event_queue.enqueue_event(task)
        await updater.start_work()
        self.log.record("working", task_id=context.task_id)
        await asyncio.sleep(self.quiet_s)
        await updater.add_artifact([new_text_part("Done after a quiet while")], name="result")
        await updater.complete()


async def test_a_stream_that_breaks_off_once_the_task_is_named_is_followed_by_asking(
    make_runtime, sdk_servers, tmp_path
):
    """The remote agent works silently for longer than a read may wait (``timeout_s``): its stream
    breaks off, but the task goes on over there, so it is asked for until it ends. It used to fail the
    delegation with the read's timeout."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_servers(QuietWorker(log, quiet_s=2.5))
    runtime = make_runtime([desk(A2AAgent("vendor", card_url=server.url, timeout_s=0.5))])
    done = await runtime.get_agent("desk").generate("go", resource_id="r1")
    assert done.text == "d1=Done after a quiet while", done.text
    assert log.count("working") == 1, "the task was sent once"


# ---- failures are tool errors naming the remote agent ------------------------------------------------------


async def failed_with(make_runtime: Any, remote: A2AAgent) -> str:
    runtime = make_runtime([desk(remote)])
    result = await runtime.get_agent("desk").generate("go", resource_id="r1")
    assert result.finish_reason == "stop", result
    return result.text


async def test_an_unreachable_remote_agent_is_a_tool_error_naming_it(make_runtime):
    text = await failed_with(make_runtime, A2AAgent("vendor", card_url=f"http://127.0.0.1:{closed_port()}/a"))
    assert text.startswith("d1=") and "A2A agent 'vendor'" in text and "could not" in text


async def test_a_card_that_does_not_parse_is_refused(make_runtime, sdk_servers, tmp_path):
    with pytest.raises(RemoteCardError, match="'vendor' does not parse"):
        A2AAgent("vendor", card={"name": "x", "capabilities": {"streaming": "maybe"}})
    server = sdk_servers(AskingAgent(CallLog(tmp_path / "sdk.jsonl")))
    text = await failed_with(make_runtime, A2AAgent("vendor", card_url=f"{server.url}/rpc"))  # not a card
    assert "A2A agent 'vendor'" in text and "card" in text


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        (dict(first_state=TaskState.TASK_STATE_AUTH_REQUIRED), "auth-required"),
        (dict(first_state=TaskState.TASK_STATE_FAILED), "ended failed"),
        (
            dict(
                question=[
                    new_data_part(
                        {
                            "kind": "troupe.pendingToolCalls",
                            "runId": "r",
                            "pendingToolCalls": [{"toolCallId": 5}],
                        }
                    )
                ]
            ),
            "cannot be read",
        ),
        # Over the bytes a response may hold: cut off as it arrives.
        (
            dict(first_state=TaskState.TASK_STATE_COMPLETED, question=[new_text_part("x" * 20_000_000)]),
            "bytes",
        ),
        # Within them, but more than a run keeps of a tool's result.
        (dict(first_state=TaskState.TASK_STATE_COMPLETED, question=[new_text_part("x" * 5_000_000)]), "kept"),
    ],
    ids=["auth-required", "failed", "bad-pending-list", "response-too-large", "answer-too-large"],
)
async def test_a_remote_agent_that_makes_no_sense_is_a_tool_error(
    make_runtime, sdk_servers, tmp_path, agent, said
):
    server = sdk_servers(AskingAgent(CallLog(tmp_path / "sdk.jsonl"), **agent))
    text = await failed_with(make_runtime, A2AAgent("vendor", card_url=server.url))
    assert "A2A agent 'vendor'" in text and said in text, text


SECRET = "SEKRET-abc123"


@pytest.mark.parametrize("executor", ["local"])  # caplog sees the agent host's log records in-process only
async def test_a_credential_in_the_remote_agents_url_reaches_no_tool_error_chunk_store_or_log(
    make_runtime, tmp_path, caplog
):
    """A card whose URL carries credentials (a user and password, ``?api_key=``), and an endpoint that
    answers HTTP 500: the SDK's error quotes the full URL, and the tool error made of it reaches the
    model, the chunks, the store and the logs. It says the status and where, without the URL's secrets."""
    endpoint = BrokenEndpoint(CallLog(tmp_path / "broken.jsonl")).start()
    try:
        url = f"http://user:{SECRET}-pw@127.0.0.1:{endpoint.port}/rpc?api_key={SECRET}#{SECRET}"
        remote = A2AAgent("vendor", card=MessageToDict(sdk_card(url)))
        runtime = make_runtime([desk(remote, memory=Memory())])
        with caplog.at_level(logging.DEBUG, logger="troupe"):
            stream = await runtime.get_agent("desk").stream("go", resource_id="r1", thread_id="t1")
            chunks = await chunks_of(stream)
            result = await stream.result()
    finally:
        endpoint.stop()
    assert result.finish_reason == "stop", result
    errors = [c for c in chunks if c.type == "tool-error"]
    assert errors and all(SECRET not in repr(c) for c in chunks), errors
    assert "A2A agent 'vendor'" in result.text and "500" in result.text, result.text
    assert f"127.0.0.1:{endpoint.port}/rpc" in result.text and SECRET not in result.text, result.text
    with sqlite3.connect(tmp_path / "troupe.db") as db:
        stored = "\n".join(db.iterdump())
    assert "agent-vendor" in stored and SECRET not in stored
    assert not [r for r in caplog.records if SECRET in r.getMessage()]


# ---- a decision goes to the remote task once ---------------------------------------------------------------


async def paused_on_a_question(
    sdk_servers: Any, tmp_path: Path, **asking: Any
) -> tuple[CallLog, A2AAgent, SqliteStore, Runtime, DecideRequest]:
    """``desk`` paused on an a2a-sdk agent's question (its log, the remote, the store, the runtime), and
    the answer "Lyon" as the parent hands it down to the proxy run."""
    log = CallLog(tmp_path / "sdk.jsonl")
    remote = A2AAgent("vendor", card_url=sdk_servers(AskingAgent(log, **asking)).url)
    store = SqliteStore(tmp_path / "top.db")
    runtime = Runtime([desk(remote)], storage=store, executor="local")
    paused = await runtime.get_agent("desk").generate("go", resource_id="r1")
    child = child_run_id(paused.run_id, "d1")
    stored = await store.load_run(child)
    assert stored is not None and stored.state.status == "suspended"
    (call,) = stored.state.calls
    answer = DecideRequest(child, Resume("Lyon"), call.tool_call_id, call.pauses[0].fingerprint, routed=True)
    return log, remote, store, runtime, answer


def meeting_before_their_writes(store: SqliteStore, run_id: str) -> list[HookedStore]:
    """Two processes' stores over ``store`` whose next writes of ``run_id`` wait for each other: both
    have read the run and decided to write before either writes."""
    meet = asyncio.Barrier(2)
    hooked = [HookedStore(store, f"process-{i}") for i in range(2)]
    for one in hooked:
        one.meet_before_save(run_id, meet)
    return hooked


async def followed(batches: Any) -> list[Any]:
    return [c for batch in [b async for b in batches] for c in batch]


async def test_two_processes_deciding_at_once_send_one_answer(sdk_servers, tmp_path):
    log, remote, store, runtime, answer = await paused_on_a_question(sdk_servers, tmp_path)
    try:
        hooked = meeting_before_their_writes(store, answer.run_id)
        outcomes = await asyncio.gather(
            *(A2AHandle(remote, one).decide(answer) for one in hooked), return_exceptions=True
        )
        conflicts = [o for o in outcomes if isinstance(o, DecisionConflictError)]
        streams = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(conflicts) == 1 and len(streams) == 1, outcomes
        chunks = await followed(streams[0])
        assert chunks[-1].type == "finish"
        assert [e["answer"] for e in log.entries("answered")] == ["Lyon"]
    finally:
        await runtime.shutdown()


async def test_two_processes_following_one_task_both_tell_the_end_the_first_recorded(sdk_servers, tmp_path):
    # A run taken over while its first host still follows the remote task (its lease lapsed, not its
    # process): both follow the task, both see it end, and both go to record the end at once. The one
    # that loses the compare-and-set tells the end the other recorded, never a failed write.
    log, remote, store, runtime, answer = await paused_on_a_question(
        sdk_servers, tmp_path, answer_delay_s=1.0
    )
    try:
        child = answer.run_id
        answered = await A2AHandle(remote, store).decide(answer)  # sent; the remote works on it
        await answered.aclose()  # type: ignore[attr-defined]
        assert (await store.load_run(child)).state.status == "running"  # type: ignore[union-attr]

        async def follow(one: HookedStore) -> list[Any]:
            batches = await A2AHandle(remote, one).attach(child)
            assert batches is not None
            return await followed(batches)

        told = await asyncio.gather(*(follow(one) for one in meeting_before_their_writes(store, child)))
        for chunks in told:
            assert chunks[-1].type == "finish" and chunks[-1].payload["finish_reason"] == "stop", chunks[-1]
        assert [e["answer"] for e in log.entries("answered")] == ["Lyon"]
    finally:
        await runtime.shutdown()


class NotingLoads:
    """A store whose ``waiting`` is set once ``load_run`` has been called twice: a follower that found
    no task id at its attach has looked again, so it waits rather than giving up."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.loads = 0
        self.waiting = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load_run(self, run_id: str) -> Any:
        self.loads += 1
        if self.loads >= 2:
            self.waiting.set()
        return await self.inner.load_run(run_id)


async def a_start_being_sent(tmp_path: Path, remote: A2AAgent) -> tuple[Runtime, str, asyncio.Event, Any]:
    """A supervisor's delegation whose first host holds the remote task's id, not yet recorded (its
    write waits): the runtime, the proxy run's id, the write's release and the supervisor's call."""
    hooked = HookedStore(SqliteStore(tmp_path / "top.db"))
    runtime = Runtime([desk(remote)], storage=hooked, executor="local")
    child = child_run_id("top-run", "d1")
    reached, release = hooked.hold_next_save(child)
    first = asyncio.ensure_future(
        runtime.get_agent("desk").generate("go", resource_id="r1", run_id="top-run")
    )
    await reached.wait()
    return runtime, child, release, first


async def test_a_start_whose_task_is_not_named_yet_is_waited_for_not_reported_lost(sdk_servers, tmp_path):
    # The host sending the prompt lost the parent (its lease) but not its process: another host that
    # follows the delegation finds no task id yet. It waits for it, and follows the task once named,
    # instead of telling the parent's model that the task was lost (who might delegate it again).
    log = CallLog(tmp_path / "sdk.jsonl")
    remote = A2AAgent("vendor", card_url=sdk_servers(AskingAgent(log)).url)
    runtime, child, release, first = await a_start_being_sent(tmp_path, remote)
    try:
        other = NotingLoads(SqliteStore(tmp_path / "top.db"))
        batches = await A2AHandle(remote, other).attach(child)
        assert batches is not None
        following = asyncio.ensure_future(followed(batches))
        looked_again = asyncio.ensure_future(other.waiting.wait())
        await asyncio.wait({following, looked_again}, return_when=asyncio.FIRST_COMPLETED)
        looked_again.cancel()
        release.set()  # the first host records the task's id
        chunks = await following
        assert [c.type for c in chunks][-1] == "tool-call-suspended", [c.type for c in chunks]
        assert chunks[-1].payload["suspend_payload"] == {"message": "Which city?"}
        assert (await first).finish_reason == "suspended"
        assert log.count("asked") == 1
    finally:
        release.set()
        await runtime.shutdown()


async def test_a_start_whose_task_is_never_named_is_reported_lost_after_its_timeout(
    sdk_servers, tmp_path, monkeypatch
):
    monkeypatch.setattr(proxy_run, "_SENDING_MARGIN_S", 0.0)
    log = CallLog(tmp_path / "sdk.jsonl")
    remote = A2AAgent("vendor", card_url=sdk_servers(AskingAgent(log)).url, timeout_s=0.5)
    runtime, child, release, first = await a_start_being_sent(tmp_path, remote)
    try:
        batches = await A2AHandle(remote, SqliteStore(tmp_path / "top.db")).attach(child)
        assert batches is not None
        chunks = await followed(batches)
        assert [c.type for c in chunks] == ["start", "error", "finish"]
        assert chunks[-1].payload["finish_reason"] == "error"
        assert "lost while it was being started" in str(chunks[1].payload), chunks[1].payload
    finally:
        release.set()
        await first
        await runtime.shutdown()


# ---- the supervisor's process dies while the remote pause waits ---------------------------------------


def parent_driver(tmp_path: Path, card_url: str, key: str, executor: str, address: str | None) -> str:
    args = [
        sys.executable,
        str(TESTS / "a2a_parent_driver.py"),
        str(tmp_path / "top.db"),
        card_url,
        key,
        executor,
    ]
    if address:
        args.append(address)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("PAUSED"):
                _, run_id, reason = line.split()
                assert reason == "suspended"
                return run_id
        raise AssertionError(f"the supervisor's process exited before pausing (code {proc.wait()})")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.mark.parametrize("remote_kind", ["troupe", "sdk"])
async def test_a_new_process_answers_the_remote_pause_after_the_supervisors_process_is_killed(
    tmp_path, executor, ray_session, sdk_servers, remote_kind
):
    address = ray_session.get_runtime_context().gcs_address if executor == "ray" else None
    log = CallLog(tmp_path / "sdk.jsonl")
    troupe_remote = TroupeRemote(tmp_path) if remote_kind == "troupe" else None
    try:
        if troupe_remote is not None:
            remote = troupe_remote.agent()
        else:
            remote = A2AAgent("vendor", card_url=sdk_servers(AskingAgent(log)).url)
        key = "key-sup" if troupe_remote is not None else "-"
        run_id = parent_driver(tmp_path, remote.where, key, executor, address)

        runtime = Runtime([desk(remote)], storage=SqliteStore(tmp_path / "top.db"), executor=executor)  # type: ignore[arg-type]
        try:
            agent = runtime.get_agent("desk")
            (waiting,) = (await agent.list_suspended_runs()).runs
            assert waiting.run_id == run_id and waiting.pending[0].agent_path[:2] == ["desk", "vendor"]
            if troupe_remote is not None:
                done = await agent.approve_tool_call_generate(run_id=run_id, tool_call_id="d1")
                assert done.text == 'd1=c-mid=c-leaf={"deleted": "abc-123"}'
                assert troupe_remote.calls.count("delete_record") == 1
            else:
                done = await agent.resume_generate("Oslo", run_id=run_id, tool_call_id="d1")
                assert done.text == "d1=Sunny in Oslo"
                assert [e["answer"] for e in log.entries("answered")] == ["Oslo"]
            assert (await agent.list_suspended_runs()).total == 0
        finally:
            await runtime.shutdown()
    finally:
        if troupe_remote is not None:
            troupe_remote.stop()
