"""Cancelling over HTTP, with the Python clients and the CLI (issue 41): who may cancel (the run's own
principal, an admin, an approver its approver policies name; anyone else 403, another tenant 404), what
a cancel does to the pause's other ways in (decision links answer 409, notification targets get a
``tool-call.withdrawn`` event), and how the run reads afterwards. Real uvicorn, real SQLite, a real
webhook receiver."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_decision_links import local, serve
from troupe.api.client import AsyncTroupeClient
from troupe.api.sync_client import TroupeClient
from troupe.core.deciding.approvers import ApproverPolicy
from webhook_receiver import Receiver

from troupe import Runtime, SqliteStore
from troupe.cli import main
from troupe.errors import CancelForbiddenError, RunCancelledError
from troupe.testing import CallLog


@pytest.fixture
def receiver() -> Any:
    hook = Receiver().start()
    yield hook
    hook.stop()


ALICE = {"Authorization": "Bearer key-alice"}
BOB = {"Authorization": "Bearer key-bob"}
DANA = {"Authorization": "Bearer key-dba"}
OLGA = {"Authorization": "Bearer key-other"}
ADMIN = {"Authorization": "Bearer key-admin"}
DBA_POLICY = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))


async def paused_with_links(
    client: httpx.AsyncClient,
    receiver: Any,
    starter: dict[str, str],
) -> tuple[str, dict[str, str]]:
    """A run paused by ``starter``, and the decision links its pause event carried."""
    seen = len(receiver.received)
    body = {"messages": "delete abc-123", "resourceId": "acme"}
    started = await client.post("/api/agents/ops/generate", json=body, headers=starter)
    assert started.status_code == 200, started.text
    event = (await receiver.arrived(seen + 1))[seen].json
    links = event["data"]["links"]
    return started.json()["runId"], {"approve": local(links["approve"]), "decline": local(links["decline"])}


async def _cancel(
    client: httpx.AsyncClient, run_id: str, headers: dict[str, str], **body: Any
) -> httpx.Response:
    return await client.post("/api/agents/ops/cancel-run", json={"runId": run_id, **body}, headers=headers)


async def test_who_may_cancel_a_run_over_http(http_server, tmp_path: Path, calls: CallLog, receiver):
    server = serve(http_server, tmp_path, calls, receiver, DBA_POLICY)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        runs = [(await paused_with_links(client, receiver, ALICE))[0] for _ in range(3)]

        stranger = await _cancel(client, runs[0], BOB)  # same resource, neither starter nor approver
        assert stranger.status_code == 403, stranger.text
        assert (
            stranger.json()["code"] == "AGENT_CANCEL_FORBIDDEN"
            and "'bob' may not cancel" in stranger.json()["error"]
        )
        other_tenant = await _cancel(client, runs[0], OLGA)
        assert other_tenant.status_code == 404  # another tenant's run is answered as an unknown one

        by_starter = await _cancel(client, runs[0], ALICE, reason="wrong record")
        by_approver = await _cancel(client, runs[1], DANA)
        by_admin = await _cancel(client, runs[2], ADMIN)
        for response, who in ((by_starter, "alice"), (by_approver, "dana"), (by_admin, "ops")):
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "cancelled" and response.json()["cancelledBy"] == who
            assert response.json()["was"] == "suspended"

        again = await _cancel(client, runs[0], ADMIN, reason="again")
        assert again.status_code == 409 and again.json()["code"] == "AGENT_RUN_CANCELLED"
        assert "cancelled by alice: wrong record" in again.json()["error"]
        status = (await client.get(f"/api/agents/ops/runs/{runs[0]}", headers=ALICE)).json()
        assert status["status"] == "cancelled"
        assert (status["cancelled"]["cancelledBy"], status["cancelled"]["reason"]) == (
            "alice",
            "wrong record",
        )
    store = SqliteStore(tmp_path / "l.db")
    audit = await store.list_audit(runs[0])
    await store.close()
    run_entry = next(e for e in audit if not e.tool_call_id)
    assert (run_entry.kind, run_entry.subject, run_entry.surface, run_entry.reason) == (
        "cancelled",
        "alice",
        "http",
        "wrong record",
    )
    assert calls.count() == 0


async def test_a_cancelled_pause_is_withdrawn_everywhere(
    http_server, tmp_path: Path, calls: CallLog, receiver
):
    server = serve(http_server, tmp_path, calls, receiver)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver, ALICE)
        cancelled = await _cancel(client, run_id, ALICE, reason="not needed")
        assert cancelled.status_code == 200, cancelled.text

        events = await receiver.arrived(2)
        withdrawn = events[1].json
        assert withdrawn["type"] == "tool-call.withdrawn"
        assert (withdrawn["data"]["toolCallId"], withdrawn["data"]["reason"]) == ("call-1", "not needed")
        assert withdrawn["data"]["decidedBy"] == "alice"
        for action in ("approve", "decline"):
            used = await client.post(links[action])
            assert used.status_code == 409, used.text
        approve = await client.post(
            "/api/agents/ops/approve-tool-call-generate",
            json={"runId": run_id, "toolCallId": "call-1"},
            headers=ALICE,
        )
        assert approve.status_code == 409 and approve.json()["code"] == "AGENT_RUN_CANCELLED"
        listed = (await client.get("/api/inbox", headers=ALICE)).json()
        assert listed["runs"] == []
    assert calls.count() == 0


async def test_the_python_clients_cancel_and_hear_why_not(
    http_server, tmp_path: Path, calls: CallLog, receiver
):
    server = serve(http_server, tmp_path, calls, receiver)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        first, _ = await paused_with_links(client, receiver, ALICE)
        second, _ = await paused_with_links(client, receiver, ALICE)

    async with AsyncTroupeClient(server.url, api_key="key-bob") as bob:
        with pytest.raises(CancelForbiddenError):
            await bob.get_agent("ops").cancel_run(first)
    async with AsyncTroupeClient(server.url, api_key="key-alice") as alice:
        done = await alice.get_agent("ops").cancel_run(first, reason="async client")
        assert (done.run_id, done.cancelled_by, done.reason) == (first, "alice", "async client")
        with pytest.raises(RunCancelledError):
            await alice.get_agent("ops").cancel_run(first, reason="twice")

    def blocking() -> Any:
        with TroupeClient(server.url, api_key="key-alice") as client:
            return client.get_agent("ops").cancel_run(second, reason="sync client")

    done = await asyncio.to_thread(blocking)
    assert (done.run_id, done.cancelled_by, done.reason) == (second, "alice", "sync client")


def test_troupe_runs_cancel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    """In-process (``--app``) as an operator who says who they are, then over a server with a key."""
    from http_server import runtime_factory

    db, calls = tmp_path / "http.db", tmp_path / "calls.jsonl"
    monkeypatch.setenv("TROUPE_TEST_STORE", str(db))
    monkeypatch.setenv("TROUPE_TEST_CALLS", str(calls))

    async def pause() -> list[str]:
        runtime = runtime_factory(tmp_path, CallLog(calls))()
        ops = runtime.get_agent("ops")
        ids = [(await ops.generate("delete", resource_id="a1", started_by="carol")).run_id for _ in range(2)]
        await runtime.shutdown()
        return ids

    first, second = asyncio.run(pause())
    app = ["--app", "operator_app:runtime"]

    # Nobody named is no more than somebody named: neither the starter, an admin nor an approver.
    assert main(["runs", "cancel", first, *app, "--reason", "by hand"]) == 1
    assert "'anonymous' may not cancel" in capsys.readouterr().err
    assert main(["runs", "cancel", second, *app, "--as", "mallory"]) == 1
    assert "'mallory' may not cancel" in capsys.readouterr().err
    assert main(["runs", "cancel", first, *app, "--as", "carol", "--reason", "by hand"]) == 0
    assert f"run {first} (ops, suspended) cancelled by carol: by hand" in capsys.readouterr().out
    assert main(["runs", "cancel", second, *app, "--as", "carol", "--reason", "mine"]) == 0
    assert "cancelled by carol: mine" in capsys.readouterr().out
    assert main(["runs", "cancel", first, *app, "--as", "carol", "--reason", "again"]) == 1
    assert "AGENT_RUN_CANCELLED" in capsys.readouterr().err

    async def gone() -> list[Any]:
        store = SqliteStore(db)
        try:
            return [await store.load_run(run_id) for run_id in (first, second)]
        finally:
            await store.close()

    assert asyncio.run(gone()) == [None, None], "the runs were not ended"
    assert CallLog(calls).count() == 0


def test_troupe_runs_cancel_of_a_governed_run_needs_someone_the_policy_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Without ``--as`` a cancel is an anonymous operator's, as a decision is: a run an approver policy
    governs stays paused, and the refusal says to name yourself; a principal with the role cancels it."""
    import subprocess
    import sys

    from http_server import ops_agents

    db, calls = tmp_path / "http.db", tmp_path / "calls.jsonl"
    env = {"TROUPE_TEST_STORE": str(db), "TROUPE_TEST_CALLS": str(calls)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    async def pause() -> str:
        runtime = Runtime(ops_agents(CallLog(calls)), storage=SqliteStore(db), executor="local")
        run = await runtime.get_agent("ops").generate("delete", resource_id="a1", started_by="carol")
        await runtime.shutdown()
        return run.run_id

    async def status() -> str | None:
        store = SqliteStore(db)
        try:
            stored = await store.load_run(run_id)
            return None if stored is None else stored.state.status
        finally:
            await store.close()

    def troupe(*args: str) -> subprocess.CompletedProcess[str]:
        tests = str(Path(__file__).resolve().parent)
        return subprocess.run(
            [sys.executable, "-m", "troupe.cli", *args, "--app", "operator_app:governed"],
            env={**os.environ, **env, "PYTHONPATH": tests, "XDG_STATE_HOME": str(tmp_path)},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    run_id = asyncio.run(pause())
    for refused in (troupe("runs", "cancel", run_id), troupe("approve", run_id)):
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1 and "--as SUBJECT" in refused.stderr, refused.stderr
    cancel = troupe("runs", "cancel", run_id)
    assert "'anonymous' may not cancel" in cancel.stderr and "AGENT_CANCEL_FORBIDDEN" in cancel.stderr
    assert asyncio.run(status()) == "suspended", "the pause was withdrawn"

    done = troupe("runs", "cancel", run_id, "--as", "dana", "--role", "dba", "--reason", "not needed")
    assert done.returncode == 0, done.stderr
    assert f"run {run_id} (ops, suspended) cancelled by dana: not needed" in done.stdout
    assert asyncio.run(status()) is None
    assert CallLog(calls).count() == 0


def test_troupe_runs_cancel_over_a_server(http_server, tmp_path: Path, calls: CallLog, capsys):
    from http_server import runtime_factory

    server = http_server(runtime_factory(tmp_path, calls), keys={"k": {"name": "ann", "resources": ["a1"]}})
    with httpx.Client(base_url=server.url, timeout=30) as client:
        started = client.post(
            "/api/agents/ops/generate",
            json={"messages": "x", "resourceId": "a1"},
            headers={"Authorization": "Bearer k"},
        )
    run_id = started.json()["runId"]

    assert main(["runs", "cancel", run_id, "--server", server.url, "--key", "k", "--reason", "remote"]) == 0
    assert "cancelled by ann: remote" in capsys.readouterr().out
