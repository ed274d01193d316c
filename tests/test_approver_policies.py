"""Approver policies: who may decide, separation of duties, and a quorum of distinct approvers, through
the Python API (real SQLite; two runtimes over one file for true races) and over HTTP (real uvicorn)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import delete_tool, echo_model, pay_tool
from http_server import sse_frames
from troupe.core.deciding.approvers import ApproverPolicy
from troupe.core.vocabulary.identity import Principal

from troupe import Agent, DelegatedBy, RedisStore, Runtime, SqliteStore
from troupe.client import TroupeClient
from troupe.errors import (
    ApprovalPolicyError,
    DecisionConflictError,
    DecisionRejectedError,
    ToolCallNotSuspendedError,
)
from troupe.testing import CallLog, tool_call

DBA_ONLY = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
FOUR_EYES = ApproverPolicy(agent="ops", separation_of_duties=True)
QUORUM_2 = ApproverPolicy(agent="ops", tool="delete_record", quorum=2)


def ops(calls: CallLog) -> Agent:
    return Agent(
        "ops",
        model=echo_model(tool_call("delete_record", {"id": "abc-123"}, id="call-1")),
        tools=[delete_tool(calls)],
    )


def runtime(tmp_path: Path, calls: CallLog, *policies: ApproverPolicy) -> Runtime:
    return Runtime(
        [ops(calls)], storage=SqliteStore(tmp_path / "p.db"), executor="local", approver_policies=policies
    )


async def still_paused(rt: Runtime, run_id: str) -> bool:
    listed = await rt.get_agent("ops").list_suspended_runs()
    return [r.run_id for r in listed.runs] == [run_id]


async def test_a_role_not_allowed_is_refused_and_nothing_changes(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, DBA_ONLY)
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it")

    with pytest.raises(ApprovalPolicyError) as refused:
        await agent.approve_tool_call_generate(
            run_id=paused.run_id, decided_by="eve", roles=frozenset({"dev"})
        )
    assert refused.value.http_status == 403 and "needs one of the roles ['dba']" in str(refused.value)
    with pytest.raises(ApprovalPolicyError):
        await agent.decline_tool_call_generate(run_id=paused.run_id, decided_by="eve")
    assert await still_paused(rt, paused.run_id) and calls.count() == 0
    assert await rt.store().list_audit(paused.run_id) == []

    done = await agent.approve_tool_call_generate(
        run_id=paused.run_id, decided_by="dana", roles=frozenset({"dba"})
    )
    assert done.finish_reason == "stop" and calls.count() == 1
    (entry,) = await rt.store().list_audit(paused.run_id)
    assert (entry.kind, entry.decided_by) == ("approved", "dana")
    await rt.shutdown()


async def test_the_requester_cannot_approve_its_own_call_under_separation(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, FOUR_EYES)
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it", started_by="alice")

    with pytest.raises(ApprovalPolicyError, match="separation of duties"):
        await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")
    assert await still_paused(rt, paused.run_id) and calls.count() == 0

    done = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="bob")
    assert done.finish_reason == "stop" and calls.count() == 1
    await rt.shutdown()


async def test_a_quorum_of_two_runs_the_tool_after_two_distinct_approvers(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, QUORUM_2)
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it")

    first = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")
    assert first.finish_reason == "suspended" and calls.count() == 0, "one approval of two runs nothing"
    (waiting,) = (await agent.list_suspended_runs()).runs
    with pytest.raises(ApprovalPolicyError, match="already approved"):
        await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")

    done = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="bob")
    assert done.finish_reason == "stop" and calls.count() == 1
    audit = await rt.store().list_audit(paused.run_id)
    assert [(e.kind, e.decided_by) for e in audit] == [("approval-recorded", "alice"), ("approved", "bob")]
    assert audit[-1].approvals == ["alice", "bob"] and audit[-1].quorum == 2
    assert waiting.pending[0].tool_call_id == "call-1"
    await rt.shutdown()


async def test_one_decline_declines_a_quorum_call(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, QUORUM_2)
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it")
    await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")

    done = await agent.decline_tool_call_generate(run_id=paused.run_id, decided_by="bob", reason="no")

    assert done.finish_reason == "stop" and calls.count() == 0
    assert "call-1=no" in done.text
    await rt.shutdown()


class Race:
    """The first ``parties`` run loads wait for each other, so every decider reads the same version
    before any of them writes: the race is certain, not left to timing. Later loads (retries) pass."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.all_read = asyncio.Event()

    async def join(self) -> None:
        self.arrived += 1
        if self.arrived > self.parties:
            return
        if self.arrived == self.parties:
            self.all_read.set()
        await self.all_read.wait()


class RacingStore:
    """A real store whose ``load_run`` meets the race (once it is armed) after reading."""

    def __init__(self, inner: RedisStore, race: Race) -> None:
        self.inner = inner
        self.race = race
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load_run(self, run_id: str) -> Any:
        stored = await self.inner.load_run(run_id)
        if self.armed:
            await self.race.join()
        return stored


@pytest.mark.redis
@pytest.mark.parametrize("approvers", [["alice", "bob"], ["alice", "bob", "carol"]])
async def test_concurrent_approvals_from_separate_hosts_run_the_tool_exactly_once(
    redis_url: str, redis_prefix: str, calls: CallLog, approvers: list[str]
):
    """Each approver decides through its own runtime (own host, engine and Redis connection), all
    reading the paused run before any writes; compare-and-set decides who counts and who runs."""
    race = Race(len(approvers))
    stores = [RacingStore(RedisStore(redis_url, prefix=redis_prefix), race) for _ in approvers]
    runtimes = [
        Runtime([ops(calls)], storage=store, executor="local", approver_policies=[QUORUM_2])  # type: ignore[arg-type]
        for store in stores
    ]
    # Paused by a host that is not one of the deciders: the host that pauses a run keeps the state it
    # wrote and decides from it without a read (troupe.core.run.paused), which the race's reads would miss.
    pauser = Runtime([ops(calls)], storage=RedisStore(redis_url, prefix=redis_prefix), executor="local")
    paused = await pauser.get_agent("ops").generate("delete it")
    await pauser.shutdown()
    for store in stores:
        store.armed = True

    async def approve(rt: Runtime, who: str) -> Any:
        try:
            return await rt.get_agent("ops").approve_tool_call_generate(
                run_id=paused.run_id, tool_call_id="call-1", decided_by=who
            )
        except (DecisionConflictError, ToolCallNotSuspendedError) as exc:
            return exc  # a loser that read the run after the winner had moved it on

    outcomes = await asyncio.gather(*(approve(rt, who) for rt, who in zip(runtimes, approvers, strict=True)))

    assert calls.count() == 1, "the tool ran exactly once"
    reasons = sorted(o.finish_reason if not isinstance(o, Exception) else "refused" for o in outcomes)
    assert reasons == sorted(["stop", "suspended", *["refused"] * (len(approvers) - 2)])
    audit = await runtimes[0].store().list_audit(paused.run_id)
    assert [e.kind for e in audit] == ["approval-recorded", "approved"]
    assert len(set(audit[-1].approvals or [])) == 2
    for rt in runtimes:
        await rt.shutdown()


# ---- over HTTP ---------------------------------------------------------------------------------------------

KEYS = {
    "key-alice": {"name": "alice", "resources": ["acme"], "roles": ["dba"]},
    "key-bob": {"name": "bob", "resources": ["acme"], "roles": ["dba"]},
    "key-dev": {"name": "dev", "resources": ["acme"]},  # an old-style key: no roles
}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def api(http_server, tmp_path: Path, calls: CallLog):
    policies = [ApproverPolicy(agent="ops", roles=frozenset({"dba"}), separation_of_duties=True, quorum=2)]
    server = http_server(lambda: runtime(tmp_path, calls, *policies), keys=KEYS)
    with httpx.Client(base_url=server.url + "/api/agents/ops", timeout=30) as client:
        yield client


def test_policies_over_http_roles_separation_and_quorum(api: httpx.Client, calls: CallLog):
    started = api.post(
        "/generate", json={"messages": "go", "resourceId": "acme"}, headers=bearer("key-alice")
    )
    assert started.status_code == 200, started.text
    run_id = started.json()["runId"]
    decide = {"runId": run_id, "toolCallId": "call-1"}

    def approve(key: str) -> httpx.Response:
        return api.post("/approve-tool-call-generate", json=decide, headers=bearer(key))

    for key, reason in (("key-dev", "needs one of the roles"), ("key-alice", "separation of duties")):
        refused = approve(key)
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "AGENT_DECISION_FORBIDDEN"
        assert reason in refused.json()["error"]
    assert calls.count() == 0

    counted = approve("key-bob")
    assert counted.status_code == 200 and counted.json()["finishReason"] == "suspended"
    again = api.post("/approve-tool-call", json=decide, headers=bearer("key-bob"))
    assert again.status_code == 403 and "already approved" in again.json()["error"]
    assert calls.count() == 0
    listed = api.get("/suspended-runs", headers=bearer("key-bob")).json()
    assert [r["runId"] for r in listed["runs"]] == [run_id], "refusals left the run paused"


def test_a_second_approver_over_http_runs_the_tool_once(http_server, tmp_path: Path, calls: CallLog):
    keys = {**KEYS, "key-carol": {"name": "carol", "resources": ["acme"], "roles": ["dba"]}}
    server = http_server(lambda: runtime(tmp_path, calls, QUORUM_2), keys=keys)
    with httpx.Client(base_url=server.url + "/api/agents/ops", timeout=30) as api:
        started = api.post(
            "/generate", json={"messages": "go", "resourceId": "acme"}, headers=bearer("key-dev")
        )
        decide = {"runId": started.json()["runId"], "toolCallId": "call-1"}
        first = api.post("/approve-tool-call", json=decide, headers=bearer("key-bob"))
        assert first.status_code == 200
        last = [f for f in sse_frames(first.text) if f != "[DONE]"][-1]
        assert last["type"] == "tool-call-approval", "counted: the call still waits for a second approver"
        second = api.post("/approve-tool-call-generate", json=decide, headers=bearer("key-carol"))
        assert second.status_code == 200 and second.json()["finishReason"] == "stop"
    assert calls.count() == 1


async def test_a_subagents_call_is_governed_at_the_top_by_its_leaf_tool(tmp_path: Path, calls: CallLog):
    sup = Agent(
        "sup",
        model=echo_model(tool_call("agent-ops", {"prompt": "delete abc-123"}, id="d1")),
        agents={"ops": ops(calls)},
    )
    policy = ApproverPolicy(agent="ops", tool="delete_record", roles=frozenset({"dba"}), quorum=2)
    rt = Runtime([sup], storage=SqliteStore(tmp_path / "p.db"), executor="local", approver_policies=[policy])
    agent = rt.get_agent("sup")
    paused = await agent.generate("clean up", started_by="alice")
    assert paused.suspend_payload["tool_name"] == "delete_record"

    with pytest.raises(ApprovalPolicyError, match="roles"):
        await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="eve")
    counted = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="bob", roles={"dba"})
    assert counted.finish_reason == "suspended" and calls.count() == 0
    done = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="carol", roles={"dba"})

    assert done.finish_reason == "stop" and calls.count() == 1
    top = await rt.store().list_audit(paused.run_id)
    assert [(e.kind, e.decided_by, e.tool_name) for e in top] == [
        ("approval-recorded", "bob", "delete_record"),
        ("approved", "carol", "delete_record"),
    ]
    await rt.shutdown()


def supervised(tmp_path: Path, calls: CallLog, *policies: ApproverPolicy) -> Runtime:
    sup = Agent(
        "sup",
        model=echo_model(tool_call("agent-ops", {"prompt": "delete abc-123"}, id="d1")),
        agents={"ops": ops(calls)},
    )
    return Runtime(
        [sup], storage=SqliteStore(tmp_path / "p.db"), executor="local", approver_policies=policies
    )


async def child_run(rt: Runtime, run_id: str) -> str:
    """The subagent's run that the top run's delegation call waits on."""
    stored = await rt.store().load_run(run_id)
    assert stored is not None and stored.state.calls[0].child is not None
    return stored.state.calls[0].child.run_id


async def test_a_subagents_run_is_decided_only_through_the_top(tmp_path: Path, calls: CallLog):
    # The subagent's run is an agent's run like any other (its agent answers for it), but its pause is
    # the top run's to decide: there the approver policy is checked, and the decision is handed down.
    rt = supervised(tmp_path, calls, DBA_ONLY)
    paused = await rt.get_agent("sup").generate("clean up", started_by="alice")
    below = await child_run(rt, paused.run_id)
    sub = rt.get_agent("ops")
    # Listed under its own agent, it says where it is decided; the top run says it is the top.
    [listed] = (await sub.list_suspended_runs()).runs
    assert listed.run_id == below and listed.delegated_by == DelegatedBy(paused.run_id, "sup", "d1")
    assert "decided above: delegated by run " + paused.run_id in listed._repr_html_()
    [top] = (await rt.get_agent("sup").list_suspended_runs()).runs
    assert top.delegated_by is None and "decided above" not in top._repr_html_()

    for decide in (
        sub.approve_tool_call_generate(run_id=below, tool_call_id="call-1", decided_by="eve"),
        sub.approve_tool_call_generate(run_id=below, tool_call_id="call-1", decided_by="bob", roles={"dba"}),
        sub.decline_tool_call_generate(run_id=below, tool_call_id="call-1", decided_by="eve"),
    ):
        with pytest.raises(DecisionRejectedError, match=f"delegated by run {paused.run_id} of agent 'sup'"):
            await decide
    assert calls.count() == 0
    assert [r.run_id for r in (await rt.get_agent("sup").list_suspended_runs()).runs] == [paused.run_id]

    with pytest.raises(ApprovalPolicyError):
        await rt.get_agent("sup").approve_tool_call_generate(run_id=paused.run_id, decided_by="eve")
    done = await rt.get_agent("sup").approve_tool_call_generate(
        run_id=paused.run_id, decided_by="bob", roles={"dba"}
    )
    assert done.finish_reason == "stop" and calls.count() == 1
    await rt.shutdown()


def test_an_http_caller_cannot_decide_a_subagents_run_around_the_top(
    http_server, tmp_path: Path, calls: CallLog
):
    server = http_server(lambda: supervised(tmp_path, calls, DBA_ONLY), keys=KEYS)
    with httpx.Client(base_url=server.url + "/api/agents", timeout=30) as api:
        started = api.post(
            "/sup/generate", json={"messages": "go", "resourceId": "acme"}, headers=bearer("key-alice")
        )
        assert started.status_code == 200 and started.json()["finishReason"] == "suspended", started.text
        top = started.json()["runId"]
        # The subagent's run is in its agent's listing, so its id is no secret to the resource's callers.
        listed = api.get("/ops/suspended-runs", headers=bearer("key-dev")).json()["runs"]
        assert [r["agentId"] for r in listed] == ["ops"]
        below = listed[0]["runId"]
        assert listed[0]["delegatedBy"] == {"runId": top, "agentId": "sup", "toolCallId": "d1"}
        on_top = api.get("/sup/suspended-runs", headers=bearer("key-dev")).json()["runs"]
        assert [r["delegatedBy"] for r in on_top] == [None]
        with TroupeClient(server.url, api_key="key-dev") as client:  # the Python client reads it back
            [read] = client.get_agent("ops").list_suspended_runs().runs
            assert read.delegated_by == DelegatedBy(top, "sup", "d1")

        for key in ("key-dev", "key-bob"):  # without the role, and with it: only through the top
            for path in (
                "/ops/approve-tool-call-generate",
                "/ops/approve-tool-call",
                "/ops/decline-tool-call",
            ):
                refused = api.post(path, json={"runId": below, "toolCallId": "call-1"}, headers=bearer(key))
                assert refused.status_code == 422, (path, refused.text)
                assert refused.json()["code"] == "AGENT_DECISION_REJECTED"
                assert "decided on the top-level run" in refused.json()["error"]
        assert calls.count() == 0

        forbidden = api.post(
            "/sup/approve-tool-call-generate",
            json={"runId": top, "toolCallId": "d1"},
            headers=bearer("key-dev"),
        )
        assert forbidden.status_code == 403 and calls.count() == 0
        approved = api.post(
            "/sup/approve-tool-call-generate",
            json={"runId": top, "toolCallId": "d1"},
            headers=bearer("key-bob"),
        )
        assert approved.status_code == 200 and approved.json()["finishReason"] == "stop", approved.text
    assert calls.count() == 1


async def test_resume_data_answering_an_approval_is_held_to_the_same_policy(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, QUORUM_2, DBA_ONLY)  # the more specific (agent and tool) one governs
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it")

    counted = await agent.resume_generate({"approved": True}, run_id=paused.run_id, decided_by="alice")
    assert counted.finish_reason == "suspended" and calls.count() == 0, "one approval of two, as data"
    with pytest.raises(ApprovalPolicyError, match="already approved"):
        await agent.resume_generate({"approved": True}, run_id=paused.run_id, decided_by="alice")
    done = await agent.resume_generate({"approved": True}, run_id=paused.run_id, decided_by="bob")
    assert done.finish_reason == "stop" and calls.count() == 1
    await rt.shutdown()


# ---- a governed call always pauses (HIGH: "requireToolApproval": false turned gating off) ---------------


def gated_agents(calls: CallLog) -> list[Agent]:
    """``ops``: its tool is gated by the agent's default_options only; ``pay``: its tool is gated by
    nothing but an approver policy."""
    return [
        Agent(
            "ops",
            model=echo_model(tool_call("delete_record", {"id": "abc-123"}, id="call-1")),
            tools=[delete_tool(calls, require_approval=False)],
            default_options={"require_tool_approval": True},
        ),
        Agent(
            "payer",
            model=echo_model(tool_call("pay", {"to": "vendor", "amount": 10}, id="p1")),
            tools=[pay_tool(calls)],
        ),
    ]


def test_an_http_caller_cannot_switch_gating_off(http_server, tmp_path: Path, calls: CallLog):
    policy = ApproverPolicy(agent="payer", tool="pay", quorum=2)
    server = http_server(
        lambda: Runtime(
            gated_agents(calls),
            storage=SqliteStore(tmp_path / "g.db"),
            executor="local",
            approver_policies=[policy],
        ),
        keys=KEYS,
    )
    with httpx.Client(base_url=server.url + "/api/agents", timeout=30) as api:
        for agent in ("ops", "payer"):
            body = {"messages": "go", "resourceId": "acme", "requireToolApproval": False}
            done = api.post(f"/{agent}/generate", json=body, headers=bearer("key-dev"))
            assert done.status_code == 200 and done.json()["finishReason"] == "suspended", agent
            streamed = api.post(f"/{agent}/stream", json=body, headers=bearer("key-dev"))
            frames = [f for f in sse_frames(streamed.text) if f != "[DONE]"]
            assert frames[-1]["type"] == "tool-call-approval", agent
    assert calls.count() == 0, "no tool ran without its approval"


async def test_a_governed_call_pauses_whatever_the_run_options_say(tmp_path: Path, calls: CallLog):
    policy = ApproverPolicy(agent="payer", tool="pay")
    rt = Runtime(
        gated_agents(calls),
        storage=SqliteStore(tmp_path / "g.db"),
        executor="local",
        approver_policies=[policy],
    )
    paused = await rt.get_agent("payer").generate("pay", require_tool_approval=False)
    assert paused.finish_reason == "suspended" and calls.count() == 0
    # The trusted Python caller may still switch off what only the agent's defaults ask for.
    ran = await rt.get_agent("ops").generate("go", require_tool_approval=False)
    assert ran.finish_reason == "stop" and calls.count("delete_record") == 1
    await rt.shutdown()


async def test_a_subagents_call_governed_from_the_top_pauses_in_the_subagent(tmp_path: Path, calls: CallLog):
    payer = gated_agents(calls)[1]
    sup = Agent(
        "sup", model=echo_model(tool_call("agent-payer", {"prompt": "pay"}, id="d1")), agents={"payer": payer}
    )
    policy = ApproverPolicy(agent="sup", tool="pay")  # names the top agent, not the one that owns the tool
    rt = Runtime([sup], storage=SqliteStore(tmp_path / "g.db"), executor="local", approver_policies=[policy])
    paused = await rt.get_agent("sup").generate("go", started_by="alice")
    assert paused.finish_reason == "suspended" and paused.suspend_payload["tool_name"] == "pay"
    assert calls.count() == 0
    await rt.shutdown()


# ---- every approval of a quorum is for the same args (HIGH: an edit rode on another's approval) ----------


def editable_payer(tmp_path: Path, calls: CallLog) -> Runtime:
    payer = Agent(
        "payer",
        model=echo_model(tool_call("pay", {"to": "vendor", "amount": 10}, id="p1")),
        tools=[pay_tool(calls, require_approval=True, allow_edited_args=True)],
    )
    policy = ApproverPolicy(tool="pay", quorum=2)
    return Runtime(
        [payer], storage=SqliteStore(tmp_path / "q.db"), executor="local", approver_policies=[policy]
    )


MALLORY = {"to": "mallory", "amount": 999999}


async def test_an_edit_starts_its_own_count_towards_the_quorum(tmp_path: Path, calls: CallLog):
    rt = editable_payer(tmp_path, calls)
    agent = rt.get_agent("payer")
    paused = await agent.generate("pay the vendor")

    alice = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")
    bob = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="bob", edited_args=MALLORY)
    assert alice.finish_reason == bob.finish_reason == "suspended"
    assert calls.count() == 0, "two approvals of different args are no quorum"

    carol = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="carol")
    assert carol.finish_reason == "stop"
    assert calls.entries("pay") == [{"name": "pay", "to": "vendor", "amount": 10}], (
        "run with the args two approved"
    )
    audit = await rt.store().list_audit(paused.run_id)
    assert [(e.kind, e.decided_by, e.edited_args) for e in audit] == [
        ("approval-recorded", "alice", None),
        ("approval-recorded", "bob", MALLORY),
        ("approved", "carol", None),
    ]
    assert audit[-1].approvals == ["alice", "carol"]
    await rt.shutdown()


async def test_an_edit_first_is_never_dropped_nor_carried_by_a_plain_approval(tmp_path: Path, calls: CallLog):
    rt = editable_payer(tmp_path, calls)
    agent = rt.get_agent("payer")
    paused = await agent.generate("pay the vendor")

    await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="bob", edited_args=MALLORY)
    plain = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")
    assert plain.finish_reason == "suspended" and calls.count() == 0
    done = await agent.approve_tool_call_generate(
        run_id=paused.run_id, decided_by="carol", edited_args={"amount": 999999, "to": "mallory"}
    )
    assert done.finish_reason == "stop"
    assert calls.entries("pay") == [{"name": "pay", **MALLORY}], (
        "the edit ran only once two approved exactly it"
    )
    await rt.shutdown()


async def test_an_edit_the_tool_refuses_is_refused_before_it_counts(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, QUORUM_2)  # delete_record does not allow edited args
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it")
    with pytest.raises(DecisionRejectedError, match="does not accept edited args"):
        await agent.approve_tool_call_generate(
            run_id=paused.run_id, decided_by="bob", edited_args={"id": "x"}
        )
    assert await rt.store().list_audit(paused.run_id) == []
    await rt.shutdown()


# ---- subjects, not names -------------------------------------------------------------------------------


async def test_one_subject_is_one_approver_and_issuers_tell_namesakes_apart(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, ApproverPolicy(agent="ops", separation_of_duties=True, quorum=2))
    agent = rt.get_agent("ops")
    idp = "https://login.example.com"
    alice = Principal("u-alice", idp, "Alice")
    paused = await agent.generate("delete it", started_by=alice)

    with pytest.raises(ApprovalPolicyError, match="separation of duties"):
        await agent.approve_tool_call_generate(
            run_id=paused.run_id, decided_by=Principal("u-alice", idp, "A. Other")
        )
    # Another issuer's "u-alice" is someone else; so is the local name "Alice".
    await agent.approve_tool_call_generate(
        run_id=paused.run_id, decided_by=Principal("u-alice", "https://other.example")
    )
    with pytest.raises(ApprovalPolicyError, match="already approved"):
        await agent.approve_tool_call_generate(
            run_id=paused.run_id, decided_by=Principal("u-alice", "https://other.example", "renamed")
        )
    done = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="Alice", surface="cli")
    assert done.finish_reason == "stop" and calls.count() == 1
    audit = await rt.store().list_audit(paused.run_id)
    assert [(e.subject, e.issuer, e.surface) for e in audit] == [
        ("u-alice", "https://other.example", "python"),
        ("Alice", "troupe", "cli"),
    ]
    await rt.shutdown()


async def test_a_governed_call_needs_someone_who_says_who_they_are(tmp_path: Path, calls: CallLog):
    rt = runtime(tmp_path, calls, FOUR_EYES)
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it", started_by="alice")
    for nobody in (None, Principal("x", anonymous=True)):
        with pytest.raises(ApprovalPolicyError, match="says who they are"):
            await agent.decline_tool_call_generate(run_id=paused.run_id, decided_by=nobody)
    assert await still_paused(rt, paused.run_id)
    await rt.shutdown()


async def test_a_tool_policy_outranks_an_agent_policy(tmp_path: Path, calls: CallLog):
    """The most specific policy applies: agent and tool, then tool alone, then agent alone. Here the
    agent's policy wants role 'ops-lead' and the tool's 'dba': the tool's decides this call."""
    by_agent = ApproverPolicy(agent="ops", roles=frozenset({"ops-lead"}))
    by_tool = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
    rt = runtime(tmp_path, calls, by_agent, by_tool)
    agent = rt.get_agent("ops")
    paused = await agent.generate("delete it")

    with pytest.raises(ApprovalPolicyError, match=r"needs one of the roles \['dba'\]"):
        await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="lee", roles={"ops-lead"})
    assert await still_paused(rt, paused.run_id) and calls.count() == 0
    done = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="dana", roles={"dba"})
    assert done.finish_reason == "stop" and calls.count() == 1
    await rt.shutdown()
