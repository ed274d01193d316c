"""The operator CLI: troupe runs list|show and approve|decline|resume, against a store, an app, a server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from http_server import KEYS, runtime_factory

from troupe.cli import main
from troupe.testing import CallLog


@pytest.fixture
def paused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Three paused runs in a SQLite store: two approvals (resources a1, b1) and one suspend()."""
    db, calls = tmp_path / "http.db", tmp_path / "calls.jsonl"  # the file runtime_factory uses
    monkeypatch.setenv("TROUPE_TEST_STORE", str(db))
    monkeypatch.setenv("TROUPE_TEST_CALLS", str(calls))

    async def pause() -> dict[str, str]:
        runtime = runtime_factory(tmp_path, CallLog(calls))()
        ops, planner = runtime.get_agent("ops"), runtime.get_agent("planner")
        ids = {
            "a": (await ops.generate("delete", resource_id="a1")).run_id,
            "b": (await ops.generate("delete", resource_id="b1")).run_id,
            "ask": (await planner.generate("weather?", resource_id="a1")).run_id,
        }
        await runtime.shutdown()
        return ids

    return {**asyncio.run(pause()), "db": str(db), "calls": str(calls)}


def test_runs_list_shows_every_paused_call_from_a_store(paused, capsys):
    assert main(["runs", "list", "--store", paused["db"]]) == 0
    out = capsys.readouterr().out

    assert "RUN" in out and "TOOL" in out
    for run in (paused["a"], paused["b"], paused["ask"]):
        assert run in out
    assert out.count("delete_record") == 2 and "weather" in out
    assert "3 call(s) waiting in 3 run(s)." in out

    only_b1 = ["--agent", "ops", "--resource", "b1", "--json"]
    assert main(["runs", "list", "--store", paused["db"], *only_b1]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in listed["runs"]] == [paused["b"]]
    assert listed["runs"][0]["pending"][0]["tool_name"] == "delete_record"


def test_a_store_alone_can_show_but_not_decide(paused, capsys):
    assert main(["runs", "show", paused["a"], "--store", paused["db"]]) == 0
    out = capsys.readouterr().out
    assert "status    suspended" in out and "delete_record" in out and "a1" in out

    with pytest.raises(SystemExit, match="needs the agents' code"):
        main(["approve", paused["a"], "--store", paused["db"]])
    with pytest.raises(SystemExit, match="needs the agents' code"):
        main(["approve", paused["a"], "call-1", "--store", paused["db"]])
    assert CallLog(paused["calls"]).count("delete_record") == 0
    assert not (Path(paused["db"]).parent / "state").exists(), "a read-only look remembers nothing"


def test_approve_decline_and_resume_with_the_app_follow_the_run(paused, capsys):
    app = ["--app", "operator_app:runtime"]
    assert main(["approve", paused["a"], "call-1", *app]) == 0
    out = capsys.readouterr().out
    assert "delete_record [call-1] done" in out and "finished: stop" in out
    assert CallLog(paused["calls"]).count("delete_record") == 1

    assert main(["decline", paused["b"], *app, "--reason", "not today"]) == 0
    assert 'declined: "not today"' in capsys.readouterr().out

    assert main(["resume", paused["ask"], *app, "--data", '{"city": "Porto"}']) == 0
    assert "Porto" in capsys.readouterr().out

    assert main(["runs", "show", paused["a"], "--store", paused["db"]]) == 0
    shown = capsys.readouterr().out
    assert "finished (its snapshot is gone)" in shown and "approved" in shown
    assert main(["runs", "list", "--store", paused["db"]]) == 0
    assert "Nothing is waiting" in capsys.readouterr().out


def test_bad_input_is_refused_clearly_and_nothing_changes(paused, capsys):
    app = ["--app", "operator_app:runtime"]
    with pytest.raises(SystemExit, match="--data must be JSON"):
        main(["resume", paused["ask"], *app, "--data", "{city: Porto}"])
    assert main(["resume", paused["ask"], *app, "--data", '{"town": "Porto"}']) == 1
    assert "AGENT_RESUME_DATA_INVALID" in capsys.readouterr().err
    assert main(["approve", "no-such-run", *app]) == 1
    assert main(["runs", "list", "--store", paused["db"]]) == 0
    assert "3 call(s) waiting" in capsys.readouterr().out


def test_against_a_server_a_key_sees_and_decides_only_its_runs(paused, http_server, tmp_path, capsys):
    server = http_server(runtime_factory(tmp_path, CallLog(paused["calls"])), keys=KEYS)
    tenant = ["--server", server.url, "--key", "key-a"]

    assert main(["runs", "list", *tenant]) == 0
    out = capsys.readouterr().out
    assert paused["a"] in out and paused["ask"] in out and paused["b"] not in out

    # Without CALL the latest paused call of the run is decided (the HTTP API itself needs its id).
    assert main(["approve", paused["a"], *tenant]) == 0
    assert "finished: stop" in capsys.readouterr().out
    assert main(["approve", paused["b"], "call-1", "--agent", "ops", *tenant]) == 1
    assert "AGENT_RESUME_NO_SNAPSHOT_FOUND" in capsys.readouterr().err, "as if the run did not exist"
    assert CallLog(paused["calls"]).count("delete_record") == 1
