"""A cancel is durable before it is acknowledged (issue 41): a driver process is killed (SIGKILL) the
moment its cancel is acknowledged, before it could end the run; the next process recovers the run and
ends it as cancelled. Nothing resumes it: its tool is not run again, its model is not asked again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cancel_agents import phases, worker

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog

TESTS = Path(__file__).resolve().parent


def _acked(tmp_path: Path, scenario: str, executor: str, address: str | None) -> str:
    """Run the driver until it acknowledges its cancel, kill it there, and return the run id."""
    args = [sys.executable, str(TESTS / "cancel_crash_driver.py"), str(tmp_path / "t.db")]
    args += [str(tmp_path / "calls.jsonl"), str(tmp_path / "gate"), scenario, executor]
    args += [address] if address else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("ACKED "):
                proc.send_signal(signal.SIGKILL)
                return line.split()[1]
        raise AssertionError(f"the driver exited before its cancel was acknowledged (code {proc.wait()})")
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize("scenario", ["running", "paused"])
async def test_a_cancel_acknowledged_just_before_a_crash_holds_after_recovery(
    tmp_path: Path, executor: str, scenario: str
):
    address = None
    if executor == "ray":
        import ray

        address = ray.get_runtime_context().gcs_address
    run_id = _acked(tmp_path, scenario, executor, address)
    log = CallLog(tmp_path / "calls.jsonl")
    store = SqliteStore(tmp_path / "t.db")
    stored = await store.load_run(run_id)
    assert stored is not None and stored.state.cancel is not None, "the acknowledged cancel is not durable"
    owner = stored.state.owner
    async with asyncio.timeout(60):  # the dead process's lease (its actors' under Ray) runs out
        while owner in await store.live_owners():
            await asyncio.sleep(0.1)
    (tmp_path / "gate").touch()  # whatever might still run the tool could finish it now

    runtime = Runtime([worker(log, str(tmp_path / "gate"))], storage=store, executor="local")
    try:
        recovered = await runtime.recover()
        assert recovered == {"worker": [run_id]}
        async with asyncio.timeout(30):
            while await store.load_run(run_id) is not None:
                await asyncio.sleep(0.02)
        audit = await store.list_audit(run_id)
        assert ("cancelled", "", "crash right after") in [(e.kind, e.tool_call_id, e.reason) for e in audit]
        await asyncio.sleep(0.3)
        assert phases(log, "worker") == ["turn"], "the model was asked again: the run resumed"
        assert phases(log, "work") == (["started"] if scenario == "running" else [])
        assert await runtime.recover(wait_s=0) == {"worker": []}
    finally:
        await runtime.shutdown()
