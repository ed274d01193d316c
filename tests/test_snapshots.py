"""Run state in the store: durable before any pause is announced, gone when the run ends, audited."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from helpers import delete_tool, echo_model, one_call, weather_tool

from troupe import Agent, MemoryStore, Runtime, SqliteStore
from troupe.errors import SnapshotVersionError
from troupe.testing import tool_call


async def test_a_pause_is_announced_only_after_its_checkpoint_is_durable(make_runtime, calls):
    model = echo_model(tool_call("delete_record", {"id": "a"}, id="c1"), tool_call("weather", {}, id="c2"))
    agent = Agent("ops", model=model, tools=[delete_tool(calls), weather_tool(calls)])
    runtime = make_runtime([agent])
    store = runtime.store()

    stream = await agent.stream("go")
    seen = 0
    async for chunk in stream.full_stream:
        if chunk.type in ("tool-call-approval", "tool-call-suspended"):
            stored = await store.load_run(stream.run_id)
            assert stored is not None and stored.state.status == "suspended"
            call = stored.state.call(chunk.payload["tool_call_id"])
            assert call is not None and call.pauses[0].fingerprint == chunk.payload["fingerprint"]
            seen += 1
    assert seen == 2


async def test_the_snapshot_is_deleted_when_the_run_finishes_and_the_decision_is_audited(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = make_runtime([agent])
    store = runtime.store()

    paused = await agent.generate("delete a")
    assert (await store.load_run(paused.run_id)) is not None
    await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")

    assert await store.load_run(paused.run_id) is None
    [entry] = await store.list_audit(paused.run_id)
    assert entry.kind == "approved"
    assert entry.decided_by == "alice"
    assert entry.tool_call_id == "call-1"
    assert entry.tool_name == "delete_record" and entry.args == {"id": "a"}
    assert entry.fingerprint == paused.suspend_payload["fingerprint"]


async def test_a_suspended_run_holds_no_host_memory(executor, tmp_path, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor=executor)
    try:
        for _ in range(3):
            assert (await agent.generate("delete a")).finish_reason == "suspended"
        handle = runtime.handle("ops")
        if executor == "local":
            operations, locks = handle.host.active_operations(), len(handle.host.engine.locks)
        else:
            operations = await handle.actor.call("active_operations")
            locks = 0
        assert operations == 0 and locks == 0
        assert (await agent.list_suspended_runs()).total == 3
    finally:
        await runtime.shutdown()


async def test_a_new_runtime_on_the_same_file_decides_a_run_paused_by_another(executor, tmp_path, calls):
    path = tmp_path / "shared.db"

    def build() -> Agent:
        return Agent("ops", model=one_call("delete_record", {"id": "keep"}), tools=[delete_tool(calls)])

    first_agent = build()
    first = Runtime([first_agent], storage=SqliteStore(path), executor=executor)
    paused = await first_agent.generate("delete keep")
    await first.shutdown()

    second_agent = build()
    second = Runtime([second_agent], storage=SqliteStore(path), executor=executor)
    try:
        listed = await second_agent.list_suspended_runs()
        assert [r.run_id for r in listed.runs] == [paused.run_id]
        done = await second_agent.approve_tool_call_generate(run_id=paused.run_id)
        assert done.text == 'call-1={"deleted": "keep"}'
        assert calls.count("delete_record") == 1
    finally:
        await second.shutdown()


async def test_snapshots_are_versioned_json_and_unknown_versions_are_refused(tmp_path, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    store = SqliteStore(tmp_path / "v.db")
    runtime = Runtime([agent], storage=store, executor="local")
    paused = await agent.generate("delete a")

    import sqlite3

    with sqlite3.connect(tmp_path / "v.db") as conn:
        body = json.loads(
            conn.execute("SELECT body FROM runs WHERE run_id = ?", (paused.run_id,)).fetchone()[0]
        )
        assert body["schema_version"] == 1
        assert body["calls"][0]["status"] == "awaiting-approval"
        body["schema_version"] = 99
        # As a newer Troupe writing the run would: a new version (the host's kept copy is then stale).
        conn.execute(
            "UPDATE runs SET body = ?, version = version + 1 WHERE run_id = ?",
            (json.dumps(body), paused.run_id),
        )

    with pytest.raises(SnapshotVersionError, match="99"):
        await agent.approve_tool_call(run_id=paused.run_id)
    await runtime.shutdown()


async def test_memory_store_is_shared_by_every_actor_of_a_ray_runtime(executor, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=MemoryStore(), executor=executor)
    try:
        paused = await agent.generate("delete a")
        listed = await agent.list_suspended_runs()
        assert [r.run_id for r in listed.runs] == [paused.run_id]
        assert (await agent.approve_tool_call_generate(run_id=paused.run_id)).finish_reason == "stop"
    finally:
        await runtime.shutdown()


async def test_a_memory_store_on_ray_is_a_private_sqlite_file_every_actor_opens_gone_at_shutdown(
    ray_session, calls
):
    """No store actor in between: the actor's checkpoint is read straight from the file by the driver."""
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=MemoryStore(), executor="ray")
    try:
        paused = await agent.generate("delete a")
        store = runtime.store()
        assert isinstance(store, SqliteStore), "no proxy: the hosts open the file themselves"
        database = Path(store.path)
        assert stat.S_IMODE(database.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(database.stat().st_mode) == 0o600
        reader = SqliteStore(database)
        stored = await reader.load_run(paused.run_id)
        await reader.close()
        assert stored is not None and stored.state.status == "suspended"
    finally:
        await runtime.shutdown()
    assert not database.parent.exists(), "it lives as long as the memory store it stands in for"
