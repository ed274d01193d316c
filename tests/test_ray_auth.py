"""The Ray that Troupe starts is private: every one of its listeners is on loopback, and Ray's token
authentication stays on, so a process that knows the cluster's address but not its token can neither
join nor reach Troupe's actors, and is told so within seconds; a Troupe process given the token joins and
decides a pause."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import delete_tool, one_call
from listeners import is_loopback, listeners_of, process_tree, sockets_of

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog

TESTS = Path(__file__).resolve().parent
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")

pytestmark = pytest.mark.ray


def _env_without_token(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment less every way to find the cluster's token (another HOME: no
    ~/.ray/auth_token either)."""
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS}
    return {**env, "HOME": str(home), "PYTHONPATH": str(TESTS), **extra}


def _run(
    code: str, env: dict[str, str], timeout: float = 60
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``code`` in a new Python process; return what it did and how long it took."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done, time.monotonic() - started


JOIN = """
    from troupe.actors.remote import ensure_ray
    from troupe.errors import RayAuthError
    try:
        ensure_ray({address!r})
    except RayAuthError as error:
        print("REFUSED", error)
    else:
        print("JOINED")
"""


@pytest.fixture
def gcs_address(ray_session: Any) -> str:
    return str(ray_session.get_runtime_context().gcs_address)


def test_the_embedded_ray_keeps_token_auth_on_with_a_private_token(ray_session):
    from ray._raylet import AuthenticationMode, get_authentication_mode

    assert os.environ["RAY_AUTH_MODE"] == "token"
    assert get_authentication_mode() == AuthenticationMode.TOKEN
    token_file = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token_file.read_text().strip()) >= 32
    # Ray makes its temp dir 0777; the folder around it is this user's alone.
    private = Path(os.environ["RAY_TMPDIR"]).parent
    assert private.stat().st_uid == os.getuid() and stat.S_IMODE(private.stat().st_mode) == 0o700


def test_every_listener_of_the_embedded_ray_is_on_loopback(ray_session):
    """DESIGN: an embedded Ray is private, every listener on loopback. Ray turns the loopback address it
    is given into the machine's reachable one, and then its agents listen there and its gRPC and
    Prometheus servers on every interface (the metrics ones without a token)."""
    listeners = listeners_of(process_tree(os.getpid()))
    assert any("gcs_server" in command for _, command in listeners), listeners  # Ray's own are in it
    assert [(a, c[:80]) for a, c in listeners if not is_loopback(a)] == []
    assert ray_session.util.get_node_ip_address() == "127.0.0.1"


def test_the_embedded_ray_leaves_rays_fixed_ports_to_a_cluster_on_the_same_machine(ray_session):
    """`ray start` on the same machine (a cluster next to Troupe's own Ray, as in examples/README.md)
    needs Ray's default ports: its dashboard agent's 52365 above all, or its agent dies and it takes no
    jobs. The embedded Ray listens only on ports the OS chose."""
    fixed = {52365, 8265, 6379, 10001}  # dashboard agent, dashboard, GCS, Ray client: `ray start`'s own
    ports = {listener.port for listener, _ in sockets_of(process_tree(os.getpid()))}
    assert ports and not ports & fixed, sorted(ports & fixed)


def test_a_process_without_the_token_is_refused_within_seconds(gcs_address, tmp_path):
    # The way in that used to work: switch auth off on the client side and join. Ray retries ~20 s
    # and gives up; run it alongside the Troupe checks below.
    attacker = subprocess.Popen(
        [sys.executable, "-c", f"import ray; ray.init(address={gcs_address!r}); print('JOINED')"],
        env=_env_without_token(tmp_path, RAY_AUTH_MODE="disabled"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        missing, took = _run(JOIN.format(address=gcs_address), _env_without_token(tmp_path))
        assert "REFUSED" in missing.stdout, missing.stdout + missing.stderr
        assert "needs the cluster's auth token" in missing.stdout and "RAY_AUTH_TOKEN" in missing.stdout
        assert took < 15, f"a missing token took {took:.1f} s to report"

        wrong, took = _run(
            JOIN.format(address=gcs_address), _env_without_token(tmp_path, RAY_AUTH_TOKEN="0" * 64)
        )
        assert "REFUSED" in wrong.stdout and "refused this process's auth token" in wrong.stdout, wrong.stdout
        assert "0" * 64 not in wrong.stdout + wrong.stderr, "the token itself is never printed"
        assert took < 15, f"a wrong token took {took:.1f} s to report"
    finally:
        out, err = attacker.communicate(timeout=120)
    assert attacker.returncode != 0 and "JOINED" not in out, "a tokenless process joined the cluster"
    assert "Authentication" in err or "auth" in err.lower(), err[-2000:]


DECIDE = """
    import asyncio, sys
    from helpers import delete_tool, one_call
    from troupe import Agent, Runtime, SqliteStore
    from troupe.testing import CallLog

    async def main(address, db, log, run_id):
        model = one_call("delete_record", {"id": "abc"})
        agent = Agent("ops", model=model, tools=[delete_tool(CallLog(log))])
        runtime = Runtime([agent], storage=SqliteStore(db), executor="ray", ray_address=address)
        try:
            result = await agent.approve_tool_call_generate(run_id=run_id, tool_call_id="call-1")
            print("DONE", result.finish_reason, result.text)
        finally:
            await runtime.shutdown()

    asyncio.run(main(*sys.argv[1:]))
"""


async def test_a_troupe_process_given_the_token_joins_and_decides_a_pause(gcs_address, tmp_path):
    calls = CallLog(tmp_path / "calls.jsonl")
    db = tmp_path / "troupe.db"
    agent = Agent("ops", model=one_call("delete_record", {"id": "abc"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(db), executor="ray")
    try:
        paused = await agent.generate("delete abc")
    finally:
        await runtime.shutdown()
    assert paused.finish_reason == "suspended"

    # The token reaches the second process the way Troupe hands it to its own: RAY_AUTH_TOKEN_PATH.
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    assert env.get("RAY_AUTH_TOKEN_PATH")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DECIDE), gcs_address, str(db), calls.path, paused.run_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DONE stop" in done.stdout, done.stdout
    assert [c["name"] for c in calls.entries()] == ["delete_record"]


def test_a_token_file_others_could_read_is_made_private(tmp_path, monkeypatch, caplog):
    from troupe.actors import ray_auth

    token = tmp_path / "auth_token"
    token.write_text("t" * 64)
    token.chmod(0o644)
    for name in AUTH_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    ray_auth.prepare_embedded()
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert token.read_text() == "t" * 64, "an existing token is kept"
    assert "readable by other users" in caplog.text and "t" * 64 not in caplog.text


def test_auth_switched_off_by_the_user_is_respected_with_a_warning(tmp_path, monkeypatch, caplog):
    from troupe.actors import ray_auth

    for name in AUTH_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray_auth.prepare_embedded()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
    assert "RAY_AUTH_TOKEN_PATH" not in os.environ and not (tmp_path / ".ray").exists()
    assert "accepts any process that reaches its ports" in caplog.text
