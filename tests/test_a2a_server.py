"""Troupe's agents as A2A agents, driven by the official Python ``a2a-sdk`` client over real HTTP, on both
executors: the card at the well-known path, a pause as ``input-required`` listing every pending call,
answers on the same task (approve, decline with a reason, resume data; several calls in any order; a
refused answer leaves the task waiting), keys and tenancy as on ``/api``, and a task that outlives a
restart of the server. Cancelling a task: tests/test_a2a_cancel.py."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a_agents import (
    artifact_text,
    data_message,
    events_of,
    last_task,
    pending_of,
    sdk_client,
    status_text,
    text_message,
)
from fastapi import FastAPI, Request
from google.protobuf.json_format import MessageToDict
from helpers import delete_tool, echo_model, pay_tool
from http_server import KEYS, ops_agents
from troupe.api.a2a_tasks import paused_task
from troupe.api.app import troupe_router
from troupe.core.vocabulary.errors import DecisionInterruptedError, DecisionRejectedError
from troupe.core.vocabulary.state import CallStatus, Pause, RunState, ToolCallState

from troupe import Agent, ApproverPolicy, Principal, Runtime, SqliteStore
from troupe.testing import tool_call

A1 = {"resourceId": "a1"}
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"


def agents(calls):
    """``ops`` (approval), ``planner`` (``suspend()``), and ``batch``: two gated calls in one step."""
    batch = Agent(
        "batch",
        model=echo_model(
            tool_call("delete_record", {"id": "r-1"}, id="c1"),
            tool_call("delete_record", {"id": "r-2"}, id="c2"),
        ),
        tools=[delete_tool(calls)],
    )
    return [*ops_agents(calls), batch]


def build(tmp_path, calls, executor, **options):
    def make() -> Runtime:
        store = SqliteStore(tmp_path / "a2a.db")
        return Runtime(agents(calls), storage=store, executor=executor, **options)  # type: ignore[arg-type]

    return make


@pytest.fixture
def server(http_server, tmp_path, calls, executor):
    return http_server(build(tmp_path, calls, executor), keys=KEYS)


async def client_for(server, agent_id="ops", key="key-a", **config):
    client, http = await sdk_client(f"{server.url}/a2a/{agent_id}", key)
    if config:
        card = await A2ACardResolver(http, f"{server.url}/a2a/{agent_id}").get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, **config)).create(card)
    return client


async def paused(client, prompt="delete abc-123"):
    task = last_task(await events_of(client.send_message(text_message(prompt, metadata=A1))))
    assert task["status"]["state"] == INPUT_REQUIRED, task
    return task


async def answer(client, task_id, *decisions):
    return last_task(
        await events_of(client.send_message(data_message({"decisions": list(decisions)}, task_id)))
    )


async def test_each_agent_has_a_card_at_the_well_known_path(server):
    async with httpx.AsyncClient(headers={"Authorization": "Bearer key-a"}) as http:
        card = await A2ACardResolver(http, f"{server.url}/a2a/ops").get_agent_card()
    assert card.name == "Operations" and card.description == "Deletes records"
    assert card.capabilities.streaming is True and card.capabilities.push_notifications is False
    assert [(s.id, list(s.tags)) for s in card.skills] == [("delete_record", ["tool", "needs-approval"])]
    (interface,) = card.supported_interfaces
    assert interface.url == f"{server.url}/a2a/ops"
    assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
    scheme = card.security_schemes["apiKey"].http_auth_security_scheme
    assert scheme.scheme == "Bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["apiKey"]]


async def test_a_wrong_key_is_refused(server):
    async with httpx.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer nope"}):
            card = await http.get(f"{server.url}/a2a/ops/.well-known/agent-card.json", headers=headers)
            rpc = await http.post(f"{server.url}/a2a/ops", json={"jsonrpc": "2.0", "id": 1}, headers=headers)
            assert (card.status_code, rpc.status_code) == (401, 401)
            assert rpc.json()["code"] == "UNAUTHENTICATED"
    with pytest.raises(Exception, match="401"):
        await sdk_client(f"{server.url}/a2a/ops", "nope")


async def test_an_approval_pause_is_input_required_and_approving_runs_the_tool_once(server, calls):
    client = await client_for(server)
    task = await paused(client)
    (call,) = pending_of(task)["pendingToolCalls"]
    assert call["toolCallId"] == "call-1" and call["kind"] == "approval"
    assert (call["toolName"], call["args"], call["agentPath"]) == (
        "delete_record",
        {"id": "abc-123"},
        ["ops"],
    )
    assert call["fingerprint"] and call["resumeSchema"]["required"] == ["approved"]
    assert "links" not in call  # a decision link goes to approvers, never back to whoever asked
    assert "delete_record" in status_text(task) and calls.count("delete_record") == 0

    done = await answer(client, task["id"], {"toolCallId": "call-1", "approved": True})
    assert done["status"]["state"] == COMPLETED
    assert artifact_text(done) == 'call-1={"deleted": "abc-123"}'
    assert calls.count("delete_record") == 1
    later = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
    assert later["status"]["state"] == COMPLETED and "keeps no finished run" in status_text(later)


async def test_declining_with_a_reason_finishes_the_task_and_never_runs_the_tool(server, calls, tmp_path):
    client = await client_for(server)
    task = await paused(client)
    done = await answer(
        client, task["id"], {"toolCallId": "call-1", "approved": False, "reason": "not today"}
    )
    assert done["status"]["state"] == COMPLETED
    assert artifact_text(done) == "call-1=not today"
    assert calls.count("delete_record") == 0
    audit = await SqliteStore(tmp_path / "a2a.db").list_audit(task["id"])
    assert [(e.kind, e.decided_by, e.surface) for e in audit] == [("declined", "tenant-a", "a2a")]


async def test_a_suspend_pause_is_answered_with_resume_data(server, calls):
    client = await client_for(server, "planner")
    task = await paused(client, "weather?")
    (call,) = pending_of(task)["pendingToolCalls"]
    assert call["kind"] == "suspend" and call["suspendPayload"] == {"message": "Which city?"}
    assert call["resumeSchema"]["properties"]["city"]["type"] == "string"
    done = await answer(client, task["id"], {"toolCallId": "w1", "resumeData": {"city": "Lyon"}})
    assert done["status"]["state"] == COMPLETED and "Lyon" in artifact_text(done)
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend", "resume"]


async def test_a_refused_answer_leaves_the_task_input_required_and_loses_nothing(server, calls):
    client = await client_for(server, "planner")
    task = await paused(client, "weather?")
    refused = [
        (text_message("Lyon", task_id=task["id"]), "exactly one data part"),
        (
            data_message({"decisions": [{"toolCallId": "nope", "resumeData": {"city": "Lyon"}}]}, task["id"]),
            "nope",
        ),
        (data_message({"decisions": [{"toolCallId": "w1", "resumeData": {"city": 5}}]}, task["id"]), "city"),
        (data_message({"decisions": [{"toolCallId": "w1"}]}, task["id"]), "approved"),
    ]
    for message, why in refused:
        after = last_task(await events_of(client.send_message(message)))
        assert after["status"]["state"] == INPUT_REQUIRED
        assert "not taken" in status_text(after) and why in status_text(after)
        assert (
            pending_of(after)["error"]["code"]
            and pending_of(after)["pendingToolCalls"][0]["toolCallId"] == "w1"
        )
    again = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
    assert again["status"]["state"] == INPUT_REQUIRED
    done = await answer(client, task["id"], {"toolCallId": "w1", "resumeData": {"city": "Oslo"}})
    assert done["status"]["state"] == COMPLETED
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend", "resume"]


@pytest.mark.parametrize(
    ("second", "why"),
    [
        ({"toolCallId": "no-such-call", "approved": True}, "AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED"),
        ({"toolCallId": "c2", "fingerprint": "0" * 16, "approved": True}, "AGENT_DECISION_CONFLICT"),
        ({"toolCallId": "c2", "resumeData": {"approved": "yes"}}, "AGENT_RESUME_DATA_INVALID"),
        ({"toolCallId": "c1", "approved": False}, "twice"),
    ],
    ids=["unknown-call", "wrong-fingerprint", "resume-data-that-does-not-fit", "same-call-twice"],
)
async def test_an_answer_with_one_refused_decision_decides_none_of_them(server, calls, second, why):
    """Every decision of an answer is checked before any is applied: one that cannot be taken leaves
    every call waiting, the first one's tool included (it used to run, under "not taken")."""
    client = await client_for(server, "batch")
    task = await paused(client, "clean up")
    after = await answer(client, task["id"], {"toolCallId": "c1", "approved": True}, second)
    assert after["status"]["state"] == INPUT_REQUIRED
    assert "Your answer was not taken" in status_text(after) and why in status_text(after)
    assert [c["toolCallId"] for c in pending_of(after)["pendingToolCalls"]] == ["c1", "c2"]
    assert calls.count("delete_record") == 0
    done = await answer(
        client, task["id"], {"toolCallId": "c1", "approved": True}, {"toolCallId": "c2", "approved": True}
    )
    assert done["status"]["state"] == COMPLETED
    assert calls.count("delete_record") == 2


async def test_several_pending_calls_are_answered_in_any_order(server, calls):
    client = await client_for(server, "batch")
    task = await paused(client, "clean up")
    assert [c["toolCallId"] for c in pending_of(task)["pendingToolCalls"]] == ["c1", "c2"]
    after = await answer(client, task["id"], {"toolCallId": "c2", "approved": True})
    assert after["status"]["state"] == INPUT_REQUIRED
    assert [c["toolCallId"] for c in pending_of(after)["pendingToolCalls"]] == ["c1"]
    assert [e["id"] for e in calls.entries("delete_record")] == ["r-2"]
    done = await answer(client, task["id"], {"toolCallId": "c1", "approved": False, "reason": "keep it"})
    assert done["status"]["state"] == COMPLETED
    assert artifact_text(done) == 'c1=keep it | c2={"deleted": "r-2"}'
    assert calls.count("delete_record") == 1


async def test_one_answer_may_decide_several_calls(server, calls):
    client = await client_for(server, "batch")
    task = await paused(client, "clean up")
    both = [{"toolCallId": "c1", "approved": True}, {"toolCallId": "c2", "approved": True}]
    done = await answer(client, task["id"], *both)
    assert done["status"]["state"] == COMPLETED
    assert sorted(e["id"] for e in calls.entries("delete_record")) == ["r-1", "r-2"]


async def test_another_tenants_task_can_be_neither_seen_nor_answered(server, calls):
    mine = await client_for(server)
    task = await paused(mine)
    theirs = await client_for(server, key="key-b")
    with pytest.raises(TaskNotFoundError):
        await theirs.get_task(GetTaskRequest(id=task["id"]))
    with pytest.raises(TaskNotFoundError):
        await answer(theirs, task["id"], {"toolCallId": "call-1", "approved": True})
    assert list((await theirs.list_tasks(ListTasksRequest())).tasks) == []
    listed = await mine.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [task["id"]]
    assert calls.count("delete_record") == 0
    # A new task in another tenant's resource is refused too.
    with pytest.raises(Exception, match="may not access"):
        await events_of(theirs.send_message(text_message("delete", metadata=A1)))


async def test_a_page_token_or_context_past_every_bound_is_invalid_params_and_starts_nothing(server, calls):
    client = await client_for(server)
    for token in ("9" * 30, "1" + "0" * 10, "\u00b2"):
        with pytest.raises(InvalidParamsError, match="pageToken"):
            await client.list_tasks(ListTasksRequest(page_token=token))
    huge = text_message("delete abc-123", metadata=A1)
    huge.message.context_id = "c" * 257
    with pytest.raises(InvalidParamsError, match="contextId must be at most 256"):
        await events_of(client.send_message(huge))
    assert list((await client.list_tasks(ListTasksRequest())).tasks) == []
    assert calls.count("delete_record") == 0


async def test_a_task_started_without_a_context_is_listed_under_the_context_it_was_told(server):
    client = await client_for(server)
    task = await paused(client)
    assert task["contextId"]
    listed = await client.list_tasks(ListTasksRequest(context_id=task["contextId"]))
    assert [t.id for t in listed.tasks] == [task["id"]] and listed.tasks[0].context_id == task["contextId"]
    again = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
    assert again["contextId"] == task["contextId"]


async def test_resubscribing_to_a_paused_task_answers_where_it_stands(server):
    client = await client_for(server)
    task = await paused(client)
    events = await events_of(client.subscribe(SubscribeToTaskRequest(id=task["id"])))
    assert last_task(events)["status"]["state"] == INPUT_REQUIRED
    assert pending_of(last_task(events))["pendingToolCalls"][0]["toolCallId"] == "call-1"


async def test_a_blocking_send_answers_the_same(server, calls):
    client = await client_for(server, streaming=False)
    task = await paused(client)
    done = await answer(client, task["id"], {"toolCallId": "call-1", "approved": True})
    assert done["status"]["state"] == COMPLETED and calls.count("delete_record") == 1


async def test_the_task_is_answered_after_the_server_restarts(http_server, tmp_path, calls, executor):
    first = http_server(build(tmp_path, calls, executor), keys=KEYS)
    task = await paused(await client_for(first))
    first.stop()

    second = http_server(build(tmp_path, calls, executor), keys=KEYS)
    client = await client_for(second)
    again = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
    assert again["status"]["state"] == INPUT_REQUIRED
    assert pending_of(again)["pendingToolCalls"] == pending_of(task)["pendingToolCalls"]
    done = await answer(client, task["id"], {"toolCallId": "call-1", "approved": True})
    assert done["status"]["state"] == COMPLETED
    assert calls.count("delete_record") == 1


async def test_approver_policies_hold_over_a2a(http_server, tmp_path, calls, executor):
    keys = {**KEYS, "key-dba": {"name": "dba", "resources": ["a1"], "roles": ["dba"]}}
    policy = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
    server = http_server(build(tmp_path, calls, executor, approver_policies=[policy]), keys=keys)
    client = await client_for(server)
    task = await paused(client)
    refused = await answer(client, task["id"], {"toolCallId": "call-1", "approved": True})
    assert refused["status"]["state"] == INPUT_REQUIRED
    assert pending_of(refused)["error"]["code"] == "AGENT_DECISION_FORBIDDEN"
    assert calls.count("delete_record") == 0
    done = await answer(
        await client_for(server, key="key-dba"), task["id"], {"toolCallId": "call-1", "approved": True}
    )
    assert done["status"]["state"] == COMPLETED and calls.count("delete_record") == 1


async def test_an_answer_refused_part_way_names_the_decisions_it_took(http_server, tmp_path, calls, executor):
    """A refusal that only deciding finds (an approver policy, checked as the decision is claimed) comes
    after the decisions before it in the answer were taken: the task says which were, and which wait."""
    mixed = Agent(
        "mixed",
        model=echo_model(
            tool_call("pay", {"to": "bob", "amount": 5}, id="c1"),
            tool_call("delete_record", {"id": "r-2"}, id="c2"),
        ),
        tools=[pay_tool(calls, require_approval=True), delete_tool(calls)],
    )

    def make() -> Runtime:
        policy = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
        store = SqliteStore(tmp_path / "a2a.db")
        return Runtime([mixed], storage=store, executor=executor, approver_policies=[policy])  # type: ignore[arg-type]

    server = http_server(make, keys=KEYS)
    client = await client_for(server, "mixed")
    task = await paused(client, "pay and clean up")
    after = await answer(
        client, task["id"], {"toolCallId": "c1", "approved": True}, {"toolCallId": "c2", "approved": True}
    )
    assert after["status"]["state"] == INPUT_REQUIRED
    said = status_text(after)
    assert "Your decisions for c1 were taken; the rest of your answer was not" in said, said
    assert pending_of(after)["error"]["taken"] == ["c1"]
    assert pending_of(after)["error"]["code"] == "AGENT_DECISION_FORBIDDEN"
    assert [c["toolCallId"] for c in pending_of(after)["pendingToolCalls"]] == ["c2"]
    assert [e["amount"] for e in calls.entries("pay")] == [5] and calls.count("delete_record") == 0


async def test_troupe_router_in_a_host_app_serves_a2a_as_the_hosts_principal(
    http_server, tmp_path, calls, executor
):
    """Mounted under a prefix, the card names the prefixed endpoint, and the host app's identity
    dependency says who decides (audited under that principal)."""

    async def who(request: Request) -> Principal | None:
        user = request.headers.get("x-user")
        return (
            Principal(user, "https://login.example.com", user, resources=frozenset({"a1"})) if user else None
        )

    def make_app(runtime: Runtime) -> FastAPI:
        app = FastAPI()
        app.include_router(troupe_router(runtime, identity=who), prefix="/troupe")
        return app

    server = http_server(build(tmp_path, calls, executor), make_app=make_app)
    async with httpx.AsyncClient(headers={"x-user": "carol"}, timeout=60) as http:
        card = await A2ACardResolver(http, f"{server.url}/troupe/a2a/ops").get_agent_card()
        assert card.supported_interfaces[0].url == f"{server.url}/troupe/a2a/ops"
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        task = await paused(client)
        done = await answer(client, task["id"], {"toolCallId": "call-1", "approved": True})
    assert done["status"]["state"] == COMPLETED and calls.count("delete_record") == 1
    audit = await SqliteStore(tmp_path / "a2a.db").list_audit(task["id"])
    assert [(e.decided_by, e.issuer, e.surface) for e in audit] == [
        ("carol", "https://login.example.com", "a2a")
    ]
    async with httpx.AsyncClient() as http:
        nobody = await http.get(f"{server.url}/troupe/a2a/ops/.well-known/agent-card.json")
    assert nobody.status_code == 401


def test_an_answer_that_may_have_taken_effect_below_is_not_called_not_taken():
    """The task's text tells a refused answer (not taken) from one that failed below after it went out."""
    pause = Pause(kind="approval", tool_name="book", args={}, agent_path=["ops"], fingerprint="f" * 32)
    call = ToolCallState(
        tool_call_id="c1", tool_name="book", args={}, status=CallStatus.AWAITING_APPROVAL, pauses=[pause]
    )
    state = RunState(run_id="r1", agent_id="ops", status="suspended", calls=[call])
    refused = status_text(MessageToDict(paused_task(state, note=DecisionRejectedError("no"))))
    failed = status_text(MessageToDict(paused_task(state, note=DecisionInterruptedError("it broke"))))
    assert refused.startswith("Your answer was not taken (AGENT_DECISION_REJECTED): no")
    code = "AGENT_DECISION_INTERRUPTED"
    assert failed.startswith(f"Your answer may have taken effect before it failed ({code}): it broke")
    assert "not taken" not in failed


def test_the_status_text_shows_every_argument_however_one_is_padded():
    """The task's text is what a person reads in an A2A client: a model that pads an early argument must
    not push the one that matters out of it, and its call id and arguments show hidden characters as
    marks (the data part keeps them whole, for programs)."""
    memo = "Routine monthly payroll, approved as every month. " * 20
    args = {"memo": memo, "to_account": "ATTACKER-IBAN-666", "note": "x\u202egnp.exe"}
    pause = Pause(kind="approval", tool_name="pay", args=args, agent_path=["ops"], fingerprint="f" * 32)
    waits = CallStatus.AWAITING_APPROVAL
    call = ToolCallState(tool_call_id="c\x1b[2J", tool_name="pay", args=args, status=waits, pauses=[pause])
    state = RunState(run_id="r1", agent_id="ops", status="suspended", calls=[call])
    shown = status_text(MessageToDict(paused_task(state)))
    assert f"\u27e6\u2026 {len(memo) - 200:,} more characters\u27e7" in shown
    assert '"to_account": "ATTACKER-IBAN-666"' in shown
    assert '"note": "x\u27e6U+202E\u27e7gnp.exe"' in shown and "- c\u27e6U+001B\u27e7[2J: pay" in shown
    assert not {"\x1b", "\u202e"} & set(shown)
