"""Commands the README tells people to run, run as written: the operator CLI against a Redis store,
``TROUPE_ACTOR_CHANNEL=0`` and ``bash scripts/demo.sh`` through a pseudo-terminal. (The OTLP exporter
is tested in test_tracing.py, against a collector endpoint on 127.0.0.1.)"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, TESTS
from http_server import ops_agents
from test_demo import Terminal, approve_and_answer, final_answer, records

from troupe import RedisStore, Runtime
from troupe.cli import main
from troupe.testing import CallLog


def test_runs_list_and_show_read_a_redis_store(redis_url, redis_prefix, tmp_path, capsys):
    async def pause() -> str:
        store = RedisStore.from_url(redis_url, prefix=redis_prefix)
        runtime = Runtime(ops_agents(CallLog(tmp_path / "calls.jsonl")), storage=store, executor="local")
        run_id = (await runtime.get_agent("ops").generate("delete", resource_id="a1")).run_id
        await runtime.shutdown()
        return run_id

    run_id = asyncio.run(pause())
    where = ["--store", redis_url, "--prefix", redis_prefix]

    assert main(["runs", "list", *where]) == 0
    listed = capsys.readouterr().out
    assert run_id in listed and "delete_record" in listed and "1 call(s) waiting in 1 run(s)." in listed

    assert main(["runs", "show", run_id, *where]) == 0
    shown = capsys.readouterr().out
    assert f"run       {run_id}" in shown and "status    suspended" in shown
    assert "delete_record" in shown and "a1" in shown

    assert main(["runs", "show", "no-such-run", *where]) == 1
    assert "not found" in capsys.readouterr().err


_CYCLE = textwrap.dedent("""
    import asyncio, json, sys
    from helpers import delete_tool, one_call
    from troupe import Agent, Runtime, SqliteStore
    from troupe.testing import CallLog

    async def main(address, db, log):
        agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(CallLog(log))])
        runtime = Runtime([agent], storage=SqliteStore(db), executor="ray", ray_address=address)
        paused = await agent.generate("delete a")
        done = await agent.approve_tool_call_generate(run_id=paused.run_id)
        line = await runtime.handle("ops").actor._line()
        print(json.dumps({"text": done.text, "channel": line is not None}))
        await runtime.shutdown()

    asyncio.run(main(*sys.argv[1:]))
""")


def _python(script: str, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.parametrize(("setting", "channel"), [("0", False), ("1", True)])
def test_troupe_actor_channel_0_sends_every_call_through_ray(ray_session, tmp_path, setting, channel):
    address = ray_session.get_runtime_context().gcs_address
    log = tmp_path / "calls.jsonl"

    done = _python(
        _CYCLE, address, str(tmp_path / "t.db"), str(log), cwd=tmp_path, TROUPE_ACTOR_CHANNEL=setting
    )

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"text": 'call-1={"deleted": "a"}', "channel": channel}
    assert CallLog(log).count("delete_record") == 1


def test_bash_scripts_demo_sh_runs_the_demo_in_a_terminal(tmp_path):
    """As the README says, from the checkout; the ``.venv`` there already holds Troupe (set up by
    scripts/test.sh), so the script goes straight to the demo without installing anything."""
    assert (ROOT / ".venv" / "bin" / "python").exists(), "run scripts/setup.sh first: the demo uses .venv"
    store = tmp_path / "demo.db"
    term = Terminal(["bash", "scripts/demo.sh", "--store", str(store), "--executor", "local"], ROOT, 60)
    try:
        term.expect(r"Records: abc-123, def-456, ghi-789")
        approve_and_answer(term, "4")
        assert "4" in final_answer(term)
        assert term.wait() == 0
    finally:
        term.close()
    assert records(tmp_path) == ["def-456", "ghi-789"]


def test_the_demos_resume_hint_runs_as_printed_from_the_shell_that_ran_the_script(tmp_path):
    """Left paused, the demo says how to resume it; run as printed, from the same shell (nothing
    activated, so `troupe` itself is on no PATH), it resumes the run."""
    store = tmp_path / "demo.db"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "OPENAI_API_KEY")}
    env.update(TERM="dumb", PATH="/usr/local/bin:/usr/bin:/bin")
    first = Terminal(["bash", "scripts/demo.sh", "--store", str(store), "--executor", "local"], ROOT, 60, env)
    try:
        first.expect(r"Approve\? \[y/n\] ")
        first.press(b"\x04")  # Ctrl-D: end of input, the run stays paused
        hint = first.expect(r"run `([^`]+)` to resume it")
        first.wait()
    finally:
        first.close()
    command = hint.group(1)
    assert command.startswith(".venv/bin/troupe demo --store "), command
    second = Terminal(["bash", "-c", command + " --executor local"], ROOT, 60, env)
    try:
        second.expect(r"Resuming run ")
        second.expect(r"Approval needed: delete_record")
    finally:
        second.close()
