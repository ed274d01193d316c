"""The front door as a Ray Serve deployment with two replicas (``troupe.front_door``, what ``troupe serve
--replicas 2`` runs), over a real Redis, with real HTTP through Serve's proxy.

Serve needs a Ray of its own, so the scenarios run in a driver process (``serve_driver.py``) with its own
RAY_TMPDIR, once for the whole module; each test asserts on what one scenario observed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import scenario_results
from listeners import is_loopback
from ray.serve import Application
from troupe.api.keys import digested

from troupe import Agent, Runtime, SqliteStore
from troupe.cli import main
from troupe.front_door import app, replica_runtime
from troupe.testing import FunctionModel, text


@pytest.fixture(scope="module")
def observed(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    work = tmp_path_factory.mktemp("serve")
    # Short (Ray's unix socket paths) and private to this driver: Ray makes its temp dir world-writable,
    # so it goes inside a 0700 one. Ray leaves its session logs there.
    ray_tmp = tempfile.mkdtemp(prefix="rsv")
    try:
        yield scenario_results(
            "serve_driver.py", redis_url, str(work), timeout=240, RAY_TMPDIR=f"{ray_tmp}/r"
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_auth_stays_on_through_serves_proxy(observed):
    auth = observed["auth"]
    assert (auth["anonymous"], auth["wrong"], auth["admin"]) == (401, 401, 200)
    assert auth["replica_named"], "every response names the replica that answered"
    assert auth["listening"] == ["127.0.0.1"], "Serve's proxy listens on loopback only"


def test_no_listener_of_the_ray_and_serve_troupe_starts_is_reachable_from_another_host(observed):
    """Serve's replicas each run a gRPC server (calls between deployments, no token) that Serve binds to
    every interface; with Ray's own listeners, the proxy's and the agents', all stay on loopback."""
    listeners = [(address, command) for address, command in observed["auth"]["listeners"]]
    assert sum("ServeReplica" in command for _, command in listeners) >= 2, listeners
    assert [(a, c[:80]) for a, c in listeners if not is_loopback(a)] == []


def test_a_run_streamed_through_one_replica_is_decided_through_the_other(observed):
    split = observed["split"]
    streamed_on, decided_on = split["tries"][-1]
    assert streamed_on != decided_on, f"no decision landed on the other replica in {split['tries']}"
    assert split["paused_types"][-1] == "tool-call-approval"
    assert split["decided_types"][-2:] == ["finish", "[DONE]"]
    assert split["text"] == f'c1={{"deleted": "split-{len(split["tries"]) - 1}"}}'
    assert split["deletes"] == 1
    assert split["audit"] == ["approved"]


def test_a_replica_killed_mid_stream_leaves_the_run_to_be_decided_once(observed):
    killed = observed["killed-starting"]
    assert not killed["killed"]["done"], "the reader's stream was cut when its replica died"
    assert killed["paused_tool"] == "delete_record", "another replica took the run over up to its pause"
    assert killed["decided_types"][-2:] == ["finish", "[DONE]"]
    assert killed["deletes"] == 1
    assert killed["audit"] == ["approved"]


def test_a_replica_killed_mid_decision_loses_no_decision(observed):
    killed = observed["killed-deciding"]
    assert not killed["killed"]["done"], "the decision's stream was cut when its replica died"
    assert killed["deletes"] == 1, "the approved tool ran once"
    assert killed["audit"] == ["approved"], "one decision on record, taken once"
    assert killed["again_status"] in (404, 409), "the run finished: deciding again is refused"


def test_serve_replicas_option_keeps_the_remote_open_rule(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--demo", "--open", "--host", "0.0.0.0", "--replicas", "2"])
    assert "--allow-remote-open" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--demo", "--open", "--replicas", "0"])
    assert "--replicas must be at least 1" in capsys.readouterr().err


async def test_a_replica_refuses_a_store_the_replicas_cannot_share(tmp_path):
    def memory() -> Runtime:
        return Runtime([Agent("a", model=FunctionModel(lambda m, t: text("hi")))], executor="local")

    with pytest.raises(ValueError, match=r"needs a store every replica shares.*not MemoryStore"):
        await replica_runtime(memory)
    shared = await replica_runtime(lambda: Runtime(storage=SqliteStore(tmp_path / "t.db"), executor="local"))
    assert isinstance(shared.storage, SqliteStore)


def test_the_serve_run_builder_names_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match="needs app=MODULE:ATTR"):
        app({"keys": "k.json"})
    with pytest.raises(ValueError, match="needs keys=FILE and/or oidc=FILE, or open=true"):
        app({"app": "serve_app:runtime"})
    with pytest.raises(ValueError, match=r"unknown troupe\.front_door argument"):
        app({"app": "serve_app:runtime", "open": "true", "host": "0.0.0.0"})
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(digested({"k": {"admin": True}})))
    assert isinstance(app({"app": "serve_app:runtime", "keys": str(keys), "replicas": "2"}), Application)
    oidc = tmp_path / "oidc.json"
    oidc.write_text(json.dumps({"oidc": {"issuer": "https://i", "audience": "a", "jwks_file": "j.json"}}))
    assert isinstance(app({"app": "serve_app:runtime", "oidc": str(oidc)}), Application)


def test_troupe_serve_replicas_stops_cleanly_on_sigterm(tmp_path):
    """`troupe serve --replicas 2`, as an operator runs it: up, SIGTERM, down with exit code 0, without
    a traceback or Ray's failed-task warnings on its terminal."""
    from redis_server import free_port

    with troupe_serve(tmp_path, "--demo", "--open", "--replicas", "2", "--port", str(free_port())):
        pass
    said = (tmp_path / "serve.log").read_text(errors="replace")
    assert "Traceback" not in said and "failed" not in said.lower(), said


def test_troupe_serve_replicas_listens_beyond_loopback_only_where_host_says(tmp_path):
    """Issue 40: every TCP socket that `troupe serve --replicas 2 --host 0.0.0.0` and its processes
    (Ray's daemons and workers, Serve's controller, proxy and replicas with their gRPC servers) listen on,
    from the kernel's tables: the proxy's port on every interface, as --host asked, and every other
    listener on loopback. (Without --host everything is on loopback: test_no_listener_of_the_ray_...)"""
    from listeners import process_tree, sockets_of
    from redis_server import free_port

    port = free_port()
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(digested({"key-admin": {"admin": True}})))
    flags = ["--demo", "--keys", str(keys), "--replicas", "2", "--host", "0.0.0.0", "--port", str(port)]
    with troupe_serve(tmp_path, *flags) as server:
        found = sockets_of(process_tree(server.pid))
    assert sum("ServeReplica" in command for _, command in found) >= 2, found
    beyond = sorted({(s.address, s.port, c[:60]) for s, c in found if not is_loopback(s.address)})
    assert beyond and all(port_ == port for _, port_, _ in beyond), beyond
    assert {address for address, _, _ in beyond} <= {"0.0.0.0", "::"}, beyond


@contextlib.contextmanager
def troupe_serve(tmp_path, *flags: str) -> Iterator[subprocess.Popen[bytes]]:
    """`troupe serve FLAGS` as an operator runs it (with a RAY_TMPDIR of its own, its output in
    ``serve.log``), once it says it serves; on leaving, SIGTERM, which must end it with exit code 0."""
    troupe = Path(sys.executable).with_name("troupe")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "OPENAI_API_KEY")}
    env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="rsg")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        command = [str(troupe), "serve", *flags, "--store", str(tmp_path / "d.db")]
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while "approval inbox at" not in log.read_text(errors="replace"):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        yield server
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=90) == 0
    finally:
        if server.poll() is None:
            server.kill()
        shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
