"""``tasks/cancel`` on Troupe's A2A agents, driven by the official Python ``a2a-sdk`` client over real HTTP
(uvicorn, SQLite), on both executors: it cancels the run as the caller (audited with surface ``a2a``),
the task is ``canceled`` from then on (for ``get`` too, after the run's snapshot is gone and after a
restart, saying who cancelled it and why), a client following the task sees it end ``canceled``, and a
task that cannot be cancelled (finished, cancelled already, the caller may not) is A2A's
``TaskNotCancelableError``; another tenant's task stays unknown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, SubscribeToTaskRequest
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from a2a_agents import events_of, last_task, status_text, text_message
from blocking import wait_for
from cancel_agents import phases, work_tool
from google.protobuf.json_format import MessageToDict
from helpers import echo_model
from http_server import KEYS
from test_a2a_server import A1, COMPLETED, INPUT_REQUIRED, agents, answer, client_for, paused

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, tool_call

CANCELED = "TASK_STATE_CANCELED"
# key-c: the same resource as tenant A's, but another person (neither starter nor admin).
CANCEL_KEYS = {**KEYS, "key-c": {"name": "tenant-c", "resources": ["a1"]}}


def build(tmp_path: Any, calls: CallLog, executor: str) -> Any:
    """``ops``, ``planner`` and ``batch`` (tests/test_a2a_server.py), and ``slow``, whose ``work`` tool
    never finishes by itself (its gate is never opened)."""

    def make() -> Runtime:
        gate = str(tmp_path / "never-opened")
        slow = Agent(
            "slow",
            model=echo_model(tool_call("work", {"name": "job-1"}, id="w1")),
            tools=[work_tool(calls, gate)],
        )
        store = SqliteStore(tmp_path / "a2a.db")
        return Runtime([*agents(calls), slow], storage=store, executor=executor)  # type: ignore[arg-type]

    return make


@pytest.fixture
def server(http_server, tmp_path, calls, executor):
    return http_server(build(tmp_path, calls, executor), keys=CANCEL_KEYS)


def cancelled_part(task: dict[str, Any]) -> dict[str, Any]:
    parts = task["status"]["message"]["parts"]
    data: dict[str, Any] = next(p["data"] for p in parts if "data" in p)
    assert data["kind"] == "troupe.cancelled"
    return data


async def get(client: Any, task_id: str) -> dict[str, Any]:
    return MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))


async def cancel(client: Any, task_id: str, reason: str | None = None) -> dict[str, Any]:
    metadata = {"reason": reason} if reason is not None else {}
    return MessageToDict(await client.cancel_task(CancelTaskRequest(id=task_id, metadata=metadata)))


async def test_cancelling_an_input_required_task_cancels_the_run_for_good(
    server, http_server, tmp_path, calls, executor
):
    client = await client_for(server)
    task = await paused(client)
    done = await cancel(client, task["id"], "wrong record")
    assert done["id"] == task["id"] and done["status"]["state"] == CANCELED
    assert "cancelled by tenant-a: wrong record" in status_text(done)
    said = cancelled_part(done)
    assert (said["cancelledBy"], said["reason"]) == ("tenant-a", "wrong record") and said["cancelledAt"]
    assert calls.count("delete_record") == 0

    store = SqliteStore(tmp_path / "a2a.db")
    await ended(store, task["id"])
    gone = await get(client, task["id"])
    assert gone["status"]["state"] == CANCELED and "cancelled by tenant-a: wrong record" in status_text(gone)
    audit = await store.list_audit(task["id"])
    run_entry = next(e for e in audit if not e.tool_call_id)
    assert (run_entry.kind, run_entry.decided_by, run_entry.surface, run_entry.reason) == (
        "cancelled",
        "tenant-a",
        "a2a",
        "wrong record",
    )
    assert [(e.kind, e.tool_call_id) for e in audit if e.tool_call_id] == [("cancelled", "call-1")]
    await store.close()

    with pytest.raises(UnsupportedOperationError, match="was cancelled by tenant-a"):
        await answer(client, task["id"], {"toolCallId": "call-1", "approved": True})
    with pytest.raises(TaskNotCancelableError, match=r"AGENT_RUN_CANCELLED.*tenant-a"):
        await cancel(client, task["id"])  # cancelled once: a task in a terminal state, as A2A has it
    with pytest.raises(TaskNotCancelableError, match="AGENT_RUN_CANCELLED"):
        await cancel(client, task["id"], "wrong record")  # the very same cancel, asked again
    assert calls.count("delete_record") == 0

    server.stop()
    again = http_server(build(tmp_path, calls, executor), keys=CANCEL_KEYS)
    restarted = await get(await client_for(again), task["id"])
    assert restarted["status"]["state"] == CANCELED
    assert cancelled_part(restarted)["reason"] == "wrong record"


async def ended(store: SqliteStore, run_id: str) -> None:
    """Wait until the run's snapshot is gone (a cancelled run is ended in the background)."""
    async with asyncio.timeout(30):
        while await store.load_run(run_id) is not None:
            await asyncio.sleep(0.05)


async def test_a_working_task_cancelled_ends_canceled_for_whoever_follows_it(server, calls):
    client = await client_for(server, "slow")
    sending = client.send_message(text_message("do the work", metadata=A1))
    first = MessageToDict(await anext(sending))
    task_id = first["task"]["id"]
    await wait_for(lambda: phases(calls, "work") == ["started"], what="the tool to start")
    follower = await client_for(server, "slow")
    following = asyncio.ensure_future(events_of(follower.subscribe(SubscribeToTaskRequest(id=task_id))))

    done = await cancel(await client_for(server, "slow"), task_id, "not needed")
    assert done["status"]["state"] == CANCELED and cancelled_part(done)["reason"] == "not needed"
    rest = await events_of(sending)
    ended = last_task(rest)
    assert ended["id"] == task_id and ended["status"]["state"] == CANCELED
    assert "cancelled by tenant-a: not needed" in status_text(ended)
    followed = last_task(await following)
    assert followed["status"]["state"] == CANCELED and cancelled_part(followed)["cancelledBy"] == "tenant-a"
    assert phases(calls, "work") == ["started"], "the tool was cancelled, never finished"
    assert (await get(client, task_id))["status"]["state"] == CANCELED


@pytest.mark.parametrize("agent", ["ops", "planner"])
async def test_a_finished_task_is_not_cancelable(server, calls, agent):
    client = await client_for(server, agent)
    task = await paused(client, "delete abc-123" if agent == "ops" else "weather?")
    decision = (
        {"toolCallId": "call-1", "approved": True}
        if agent == "ops"
        else {"toolCallId": "w1", "resumeData": {"city": "Oslo"}}
    )
    assert (await answer(client, task["id"], decision))["status"]["state"] == COMPLETED
    with pytest.raises(TaskNotCancelableError, match="AGENT_RUN_NOT_CANCELLABLE"):
        await cancel(client, task["id"])
    assert (await get(client, task["id"]))["status"]["state"] == COMPLETED


async def test_a_stranger_cannot_cancel_and_another_tenant_sees_no_task(server, calls):
    mine = await client_for(server)
    task = await paused(mine)
    stranger = await client_for(server, key="key-c")
    with pytest.raises(TaskNotCancelableError, match=r"AGENT_CANCEL_FORBIDDEN.*'tenant-c' may not cancel"):
        await cancel(stranger, task["id"])
    other_tenant = await client_for(server, key="key-b")
    with pytest.raises(TaskNotFoundError):
        await cancel(other_tenant, task["id"])
    with pytest.raises(TaskNotFoundError):
        await cancel(mine, "no-such-task")
    assert (await get(mine, task["id"]))["status"]["state"] == INPUT_REQUIRED
    admin = await client_for(server, key="key-admin")
    assert (await cancel(admin, task["id"]))["status"]["state"] == CANCELED
    assert calls.count("delete_record") == 0
