"""``troupe serve`` starting and stopping as a newcomer meets it (issue 45): a port in use fails at once
and changes nothing, a SIGTERM to the server's process group (what ``timeout`` sends) ends it in
seconds with nothing of its Ray left behind, and the Python client names the URL of a server that is
not there."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from test_http_serve import Served, free_port

from troupe.client import AsyncTroupeClient, ServerUnreachableError, TroupeClient
from troupe.errors import TroupeError
from troupe.ops.demo_agent import RecordsDB

TROUPE = [sys.executable, "-m", "troupe.cli"]
PORT_IN_USE_S = 2.0  # the bound for a port in use
SIGTERM_S = 5.0  # the bound for a process-group SIGTERM: a ceiling, not a speed test


def _env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAY_ADDRESS")
    }
    env.pop("PYTHONPATH", None)  # a Ray started in this process points it at this one's import path
    return env


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT id, title FROM demo_records ORDER BY id").fetchall()


@pytest.mark.parametrize("replicas", [[], ["--replicas", "1"]], ids=["uvicorn", "ray-serve"])
def test_a_port_in_use_fails_at_once_naming_it_and_leaves_the_demo_store_as_it_was(tmp_path, replicas):
    """With --demo the store used to be re-seeded before the port was even tried: a record the user had
    deleted came back. Now the port is taken first of all (on Ray Serve, whose proxy binds it later, it
    is tried before Ray starts)."""
    store = tmp_path / "troupe-demo.db"
    db = RecordsDB(store)
    db.setup(seed=True)
    assert db.delete("abc-123"), "the user deleted a sample record"
    before = (store.read_bytes(), store.stat().st_mtime_ns, _rows(store))
    took = []
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        command = [
            *TROUPE,
            "serve",
            "--demo",
            "--open",
            "--store",
            str(store),
            "--port",
            str(port),
            *replicas,
        ]
        # Three tries, the quickest counted: what the command itself costs, not what else the shared
        # machine runs meanwhile. Each must fail the same way and leave the store alone.
        for _ in range(3):
            started = time.monotonic()
            done = subprocess.run(
                command, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=False
            )
            took.append(time.monotonic() - started)
            assert done.returncode == 1, done.stdout + done.stderr
            assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in done.stderr, done.stderr
            assert "--port" in done.stderr, "it says what to do"
            assert "serving" not in done.stderr and "starting Ray" not in done.stderr, done.stderr
            assert (store.read_bytes(), store.stat().st_mtime_ns, _rows(store)) == before, "changed nothing"
    assert min(took) < PORT_IN_USE_S, [f"{t:.2f} s" for t in took]


def test_a_port_in_use_fails_before_the_runtime_is_made_in_the_library_too(tmp_path):
    """``troupe.api.serve.serve`` takes the port before it asks for the runtime: the function making it
    is never called."""
    from troupe.api.serve import serve

    made: list[str] = []

    def source() -> object:
        made.append("runtime")
        raise AssertionError("the runtime was asked for before the port was taken")

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(TroupeError, match=f"127.0.0.1:{port}: the port is in use") as raised:
            serve(source, port=port, open_mode=True)  # type: ignore[arg-type]
    assert raised.value.code == "LISTEN_FAILED" and raised.value.details == {
        "host": "127.0.0.1",
        "port": port,
    }
    assert made == []


def test_a_sigterm_to_the_process_group_ends_serve_on_its_own_ray_in_seconds(tmp_path):
    """``timeout``, a shell's job control and ``kill -TERM -PGID`` signal every process of the group. Ray's
    processes used to be in it: its GCS died first, and the server then waited 60 s for it ("Failed to
    connect to GCS within 60 seconds"). They lead groups of their own now, and still end with the
    server. On a pipe, the Ray start is one plain line."""
    served = Served(
        tmp_path,
        "--demo",
        "--open",
        "--store",
        str(tmp_path / "demo.db"),
        cwd=tmp_path,
        env=_env(),
        own_group=True,
    )
    try:
        served.wait_ready({}, timeout=120)
        ray_processes = psutil.Process(served.process.pid).children(recursive=True)
        assert any(p.name() == "gcs_server" for p in ray_processes), "serve started its own Ray"
        # Each leads a group of its own, so the signal below reaches serve alone, which ends them in
        # order (a Ray process in serve's group dies of the signal first, whatever shutdown then does).
        in_its_group = [p.name() for p in ray_processes if _group_of(p.pid) == served.process.pid]
        assert in_its_group == [], f"Ray processes in serve's process group: {in_its_group}"
        started = time.monotonic()
        os.killpg(served.process.pid, signal.SIGTERM)
        code = served.process.wait(SIGTERM_S * 4)  # past the ceiling it fails below, with the time it took
        took = time.monotonic() - started
    finally:
        if served.process.poll() is None:
            os.killpg(served.process.pid, signal.SIGKILL)
    output = served.output()
    served.log.close()
    assert code == 0, output
    assert took < SIGTERM_S, f"{took:.1f} s\n{output}"
    assert "Failed to connect to GCS" not in output
    _, alive = psutil.wait_procs(ray_processes, timeout=10)
    assert alive == [], f"left behind: {[(p.pid, p.name()) for p in alive]}"
    assert "troupe: starting Ray (usually 5-15 s)...\n" in output and "\r" not in output, output


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:  # a short-lived worker gone meanwhile
        return None


def _nobody_listens() -> str:
    """A URL on a port that was free a moment ago; with a password in it, which must not be shown."""
    return f"http://user:s3cret@127.0.0.1:{free_port()}"


async def test_the_async_client_names_the_url_of_a_server_that_is_not_there():
    url = _nobody_listens()
    async with AsyncTroupeClient(url, api_key="k") as client:
        with pytest.raises(ServerUnreachableError) as raised:
            await client.list_agents()
        with pytest.raises(ServerUnreachableError):
            await client.get_agent("records-assistant").stream("hello")
    shown = url.replace("s3cret", "***")
    assert f"cannot reach the server at {shown}" in raised.value.message, raised.value.message
    assert "s3cret" not in str(raised.value) and "s3cret" not in repr(raised.value.details)
    assert raised.value.details == {"url": shown}
    assert raised.value.code == "SERVER_UNREACHABLE"
    assert isinstance(raised.value.__cause__, httpx.ConnectError)


def test_the_blocking_client_names_the_url_of_a_server_that_is_not_there():
    url = _nobody_listens()
    with TroupeClient(url) as client:
        with pytest.raises(ServerUnreachableError, match="cannot reach the server at http://user:\\*\\*\\*@"):
            client.list_agents()
        with pytest.raises(ServerUnreachableError, match="is it running, and at that URL"):
            client.get_agent("records-assistant").generate("hello")


def test_a_sigterm_to_every_process_at_once_ends_serve_in_seconds(tmp_path):
    """systemd's default stop (``KillMode=control-group``) and a container runtime signal every process
    of the service at once, whatever its group: Ray's GCS too. The GCS survives the signal but stops
    answering, and the runtime's shutdown used to wait on it for a minute (in ``ray.get_actor``); the
    shutdown is bounded now, and the server exits within the issue's 5 s, having closed its store."""
    served = Served(
        tmp_path,
        "--demo",
        "--open",
        "--store",
        str(tmp_path / "demo.db"),
        cwd=tmp_path,
        env=_env(),
        own_group=True,
    )
    try:
        served.wait_ready({}, timeout=120)
        # An agent's actor exists, so the shutdown has actors to stop (what looked the GCS up).
        assert httpx.get(served.url + "/agents/records-assistant", timeout=30).status_code == 200
        tree = [psutil.Process(served.process.pid), *psutil.Process(served.process.pid).children(True)]
        assert any(p.name() == "gcs_server" for p in tree), "serve started its own Ray"
        started = time.monotonic()
        for process in tree:  # as close to "at once" as signals go
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGTERM)
        code = served.process.wait(SIGTERM_S * 12)  # past the ceiling it fails below, with the time
        took = time.monotonic() - started
    finally:
        if served.process.poll() is None:
            os.killpg(served.process.pid, signal.SIGKILL)
    output = served.output()
    served.log.close()
    assert took < SIGTERM_S, f"{took:.1f} s\n{output}"
    assert code == 0, output
    _, alive = psutil.wait_procs(tree[1:], timeout=10)
    assert alive == [], f"left behind: {[(p.pid, p.name()) for p in alive]}"
