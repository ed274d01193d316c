"""A delegated decision is durable before it is acknowledged: once the top claims it, a subagent whose
actor died (and was re-placed) applies it without a second human action, and it is audited once."""

from __future__ import annotations

import os
from pathlib import Path

from blocking import wait_for
from trees import three_levels, two_levels
from troupe.core.run.delegation import child_run_id

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog


async def _kill_for_good(actor) -> None:
    """SIGKILL an agent's actor with no restart left: only re-placing it brings the agent back."""
    import ray

    pid = int((await actor.call("stats"))["pid"])
    ray.kill(actor.handle, no_restart=True)
    await wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what=f"actor process {pid} to exit")


async def test_a_paused_subagent_whose_actor_is_gone_applies_one_approval_from_the_top(
    tmp_path: Path, ray_session
):
    calls = CallLog(tmp_path / "calls.jsonl")
    sup = two_levels(calls)
    runtime = Runtime([sup], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        paused = await sup.generate("please delete u1")
        assert paused.suspend_payload is not None
        await _kill_for_good(runtime.handle("data").actor)

        done = await sup.approve_tool_call_generate(
            run_id=paused.run_id, tool_call_id="d1", fingerprint=paused.suspend_payload["fingerprint"]
        )

        assert done.finish_reason == "stop", "the decided call's outcome, not the same pause again"
        assert done.text == 'sup: d1=leaf-1={"deleted": "u1"}'
        assert calls.count("delete_record") == 1
        store = runtime.store()
        top_audit = await store.list_audit(paused.run_id)
        assert [(e.tool_call_id, e.kind) for e in top_audit] == [("d1", "approved")]
        child_audit = await store.list_audit(child_run_id(paused.run_id, "d1"))
        assert [(e.tool_call_id, e.kind) for e in child_audit] == [("leaf-1", "approved")]
    finally:
        await runtime.shutdown()


async def test_a_middle_agent_gone_for_good_still_hands_a_decline_down_two_levels(
    tmp_path: Path, ray_session
):
    calls = CallLog(tmp_path / "calls.jsonl")
    top = three_levels(calls)
    runtime = Runtime([top], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        paused = await top.generate("tidy up")
        await _kill_for_good(runtime.handle("mid").actor)
        await _kill_for_good(runtime.handle("data").actor)

        done = await top.decline_tool_call_generate(run_id=paused.run_id, tool_call_id="t1", reason="no")

        assert done.text == "top: t1=mid: m1=leaf-1=no"
        assert calls.count() == 0
        mid_run = child_run_id(paused.run_id, "t1")
        store = runtime.store()
        assert [e.kind for e in await store.list_audit(paused.run_id)] == ["declined"]
        assert [e.kind for e in await store.list_audit(child_run_id(mid_run, "m1"))] == ["declined"]
    finally:
        await runtime.shutdown()
