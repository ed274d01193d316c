"""What a newcomer mistypes or misreads gets one line that names what is wrong and what to do, and
changes nothing (issue 33's list, each as a user would meet it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import delete_tool, one_call
from http_server import runtime_factory

from troupe import Agent, RedisStore, Runtime, SqliteStore
from troupe.cli import main
from troupe.errors import StorageUnavailableError
from troupe.testing import CallLog


@pytest.mark.parametrize("url", ["postgres://x/y", "127.0.0.1:6379", "redis://", "unix://"])
def test_what_is_no_redis_url_is_refused_at_once_naming_the_forms_that_are(url: str):
    with pytest.raises(ValueError, match="not a Redis URL") as refused:
        RedisStore.from_url(url)
    for form in ("redis://", "rediss://", "unix://", "redis+cluster://", "redis+sentinel://"):
        assert form in str(refused.value)


def test_a_refused_url_keeps_its_password_to_itself():
    with pytest.raises(ValueError, match="not a Redis URL") as refused:
        RedisStore.from_url("postgres://admin:hunter2@db/x")
    assert "hunter2" not in str(refused.value)


async def test_an_unreachable_redis_says_so_without_naming_an_internal_operation():
    store = RedisStore.from_url("redis://127.0.0.1:9/0?socket_connect_timeout=1")
    with pytest.raises(StorageUnavailableError) as down:
        await store.touch_owner("host", 10)
    assert "is unavailable (is redis-server running there" in str(down.value)
    assert "touch_owner" not in str(down.value)
    await store.close()


async def test_a_sqlite_store_whose_folder_cannot_be_made_is_unavailable_and_named(tmp_path: Path):
    """A file where the store's folder should be (or a folder it may not make): the store is out of
    reach, said as such (STORAGE_UNAVAILABLE, 503 over HTTP), not an OSError from inside the store."""
    (tmp_path / "taken").write_text("not a folder")
    path = tmp_path / "taken" / "troupe.db"
    calls = CallLog(tmp_path / "calls.jsonl")
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(path), executor="local")
    try:
        for attempt in (agent.list_suspended_runs(), agent.generate("delete a")):
            with pytest.raises(StorageUnavailableError) as down:
                await attempt
            assert str(path) in str(down.value)
            assert down.value.code == "STORAGE_UNAVAILABLE"
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize("command", [["demo"], ["serve", "--demo", "--open"]])
def test_a_demo_store_in_a_missing_folder_is_one_line_and_creates_nothing(command, tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "folder"
    with pytest.raises(SystemExit) as exited:
        main([*command, "--store", str(missing / "x.db")])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        error
        == f"troupe: error: --store {missing / 'x.db'}: the folder {missing} does not exist (create it first)"
    )
    assert not (tmp_path / "no").exists()


@pytest.fixture
def app_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An app (tests/operator_app.py) over a SQLite store with one run paused by suspend()."""
    db, calls = tmp_path / "http.db", tmp_path / "calls.jsonl"
    monkeypatch.setenv("TROUPE_TEST_STORE", str(db))
    monkeypatch.setenv("TROUPE_TEST_CALLS", str(calls))
    return {"db": str(db), "calls": str(calls), "tmp": str(tmp_path)}


def _paused_planner(app_runtime: dict[str, str]) -> str:
    async def pause() -> str:
        runtime = runtime_factory(Path(app_runtime["tmp"]), CallLog(app_runtime["calls"]))()
        run_id = (await runtime.get_agent("planner").generate("weather?", resource_id="a1")).run_id
        await runtime.shutdown()
        return run_id

    return asyncio.run(pause())


def test_approving_an_unknown_run_says_it_is_unknown_or_finished(app_runtime, capsys):
    assert main(["approve", "no-such-run", "--app", "operator_app:runtime"]) == 1
    error = capsys.readouterr().err
    assert "run no-such-run is not waiting for a decision: it is unknown here, or it has finished" in error
    assert "troupe runs show no-such-run" in error


def test_approving_a_suspend_pause_names_troupe_resume(app_runtime, capsys):
    run_id = _paused_planner(app_runtime)
    assert main(["approve", run_id, "--app", "operator_app:runtime"]) == 1
    error = capsys.readouterr().err
    assert "waits for an answer (resume data), not an approval" in error and "troupe resume RUN CALL" in error


def test_the_demo_script_names_python3_venv_where_python_cannot_make_a_virtualenv(tmp_path: Path):
    """Stock Debian's Python has no ensurepip until python3-venv is installed: the demo says so in one
    line instead of failing in `python3 -m venv`. (A module named ensurepip that cannot be imported,
    first on PYTHONPATH, is that Python as far as the script can tell.)"""
    import shutil
    import subprocess

    from conftest import ROOT

    (tmp_path / "scripts").mkdir()
    for script in ("demo.sh", "venv.sh"):
        shutil.copy(ROOT / "scripts" / script, tmp_path / "scripts" / script)
    shadow = tmp_path / "no-ensurepip" / "ensurepip"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('ensurepip is not available')\n")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(shadow.parent), "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "install python3-venv first (sudo apt-get install python3-venv)" in done.stderr
    assert not (tmp_path / ".venv").exists()
