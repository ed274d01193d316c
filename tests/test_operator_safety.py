"""Operator-grade decisions through the real ``troupe`` command (subprocesses) and a real server
(``troupe serve`` in its own process, and uvicorn on loopback): retries, typos, paging, hostile text,
oversized bodies and foreign Host headers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from inbox_agents import inbox_runtime
from static_site import answering
from troupe.api.keys import digested

from troupe.testing import CallLog

TESTS = Path(__file__).resolve().parent
ADMIN_KEY, TENANT_KEY = "k-admin-0123456789", "k-tenant-0123456789"
AGENT = "records-assistant"


def troupe(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, as an operator types it."""
    script = Path(sys.executable).with_name("troupe")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "troupe.cli"]
    full_env = {k: v for k, v in os.environ.items() if k != "TROUPE_API_KEY"}
    full_env.update(PYTHONPATH=str(TESTS), **(env or {}))
    return subprocess.run(
        [*command, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=60, check=False
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, workdir: Path) -> None:
        self.proc, self.port, self.workdir = proc, port, workdir
        self.url = f"http://127.0.0.1:{port}"

    def start_run(self) -> str:
        body = {"messages": "Please delete record abc-123, then book a table."}
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        response = httpx.post(
            f"{self.url}/api/agents/{AGENT}/generate", json=body, headers=headers, timeout=30
        )
        assert response.status_code == 200, response.text
        assert response.json()["finishReason"] == "suspended"
        return str(response.json()["runId"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``troupe serve --demo`` with API keys, in its own process (so its memory can be measured)."""
    workdir = tmp_path_factory.mktemp("served")
    keys = workdir / "keys.json"
    keys.write_text(
        json.dumps(
            digested(
                {ADMIN_KEY: {"name": "ops", "admin": True}, TENANT_KEY: {"name": "t", "resources": ["t1"]}}
            )
        )
    )
    port = free_port()
    script = Path(sys.executable).with_name("troupe")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "troupe.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    serve = ["serve", "--demo", "--executor", "local", "--store", "demo.db", "--keys", str(keys)]
    options = ["--port", str(port), "--log-level", "warning", "--max-body-bytes", str(1024 * 1024)]
    proc = subprocess.Popen(
        [*command, *serve, *options],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/inbox", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            assert proc.poll() is None, "the server exited"
            time.sleep(0.1)
    yield Served(proc, port, workdir)
    proc.terminate()
    proc.wait(30)


# ---- a decision is about one call ----------------------------------------------------------------------


def test_a_repeated_decline_is_idempotent_and_never_reaches_the_next_pause(served, tmp_path):
    run_id = served.start_run()
    where = ["--server", served.url, "--key", ADMIN_KEY]

    first = troupe("decline", run_id, "--reason", "not this one", *where, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"call call-delete of run {run_id}" in first.stdout, "the call meant is shown"
    assert "paused: records-assistant book_table [call-book]" in first.stdout

    again = troupe("decline", run_id, "--reason", "not this one", *where, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "was already declined by ops" in again.stdout
    explicit = troupe("decline", run_id, "call-delete", *where, cwd=tmp_path)
    assert explicit.returncode == 0 and "already declined by ops" in explicit.stdout

    listed = troupe("runs", "list", *where, "--json", cwd=tmp_path)
    [run] = [r for r in json.loads(listed.stdout)["runs"] if r["run_id"] == run_id]
    assert [p["tool_name"] for p in run["pending"]] == ["book_table"], "the next pause is still open"

    # Approving the declined call is a real conflict: one line, non-zero.
    conflict = troupe("approve", run_id, "call-delete", *where, cwd=tmp_path)
    assert conflict.returncode == 1 and conflict.stderr.count("\n") == 1
    assert "already declined" in conflict.stderr and "Traceback" not in conflict.stderr

    # Once the run has finished (and left every listing), retries still know what they meant.
    last = troupe("decline", run_id, "call-book", *where, cwd=tmp_path)
    assert last.returncode == 0 and "finished: stop" in last.stdout, last.stdout
    for retry in (["decline", run_id, "call-book"], ["decline", run_id, "--reason", "not this one"]):
        again = troupe(*retry, *where, cwd=tmp_path)
        assert again.returncode == 0 and "already declined by ops" in again.stdout, (retry, again.stderr)


def test_expected_failures_are_one_clear_line(served, tmp_path):
    run_id = served.start_run()
    cases = {
        "cannot reach the server at http://127.0.0.1:1": ["runs", "list", "--server", "http://127.0.0.1:1"],
        "pass --key KEY or --token TOKEN (or set TROUPE_API_KEY)": ["runs", "list", "--server", served.url],
        "refused the credential": ["runs", "list", "--server", served.url, "--key", "wrong"],
        "--app nosuchmodule:rt: cannot import 'nosuchmodule'": ["runs", "list", "--app", "nosuchmodule:rt"],
        "run nope is not waiting for a decision: it is unknown here": [
            "approve",
            "nope",
            "--server",
            served.url,
            "--key",
            ADMIN_KEY,
        ],
        # Someone else's run reads exactly as an unknown one.
        f"snapshot not found for run {run_id}": [
            "approve", run_id, "call-delete", "--agent", AGENT, "--server", served.url, "--key", TENANT_KEY
        ],
    }  # fmt: skip
    for expected, args in cases.items():
        done = troupe(*args, cwd=tmp_path)
        assert done.returncode == 1, (args, done.stdout)
        assert expected in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)
    with_env = troupe("runs", "list", "--server", served.url, cwd=tmp_path, env={"TROUPE_API_KEY": ADMIN_KEY})
    assert with_env.returncode == 0 and run_id in with_env.stdout


# ---- read-only commands create nothing -----------------------------------------------------------------


def test_a_typod_store_exits_non_zero_and_creates_nothing(tmp_path):
    missing = tmp_path / "nonexistent" / "x.db"
    done = troupe("runs", "list", "--store", str(missing), cwd=tmp_path)
    assert done.returncode != 0 and f"--store {missing}: no such SQLite file" in done.stderr
    assert "Nothing is waiting" not in done.stdout
    shown = troupe("runs", "show", "r1", "--store", "postgres://x", cwd=tmp_path)
    assert shown.returncode != 0 and "unknown URL scheme 'postgres'" in shown.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "no folder, no database"


# ---- listing: once per top-level pause, paged, escaped -------------------------------------------------


@pytest.fixture
def store_with_pauses(tmp_path: Path) -> Path:
    """Three ``ops`` pauses and one nested (``sup`` -> ``data``) pause; one thread id is hostile."""

    async def pause() -> None:
        runtime = inbox_runtime(tmp_path, CallLog(tmp_path / "calls.jsonl"))()
        for n in range(3):
            await runtime.get_agent("ops").generate(f"rec-{n}", thread_id=f"t\x1b]0;pwned\x07{n}")
        await runtime.get_agent("sup").generate("rec-9")
        await runtime.shutdown()

    asyncio.run(pause())
    return tmp_path / "inbox.db"


def test_lists_count_a_nested_pause_once_and_page(store_with_pauses, tmp_path):
    done = troupe("runs", "list", "--store", str(store_with_pauses), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 call(s) waiting in 4 run(s)." in done.stdout
    assert done.stdout.count("sup/data") == 1 and " data " not in done.stdout

    paged = ["runs", "list", "--store", str(store_with_pauses), "--limit", "3", "--json"]
    page1, page2 = troupe(*paged, cwd=tmp_path), troupe(*paged, "--page", "2", cwd=tmp_path)
    first, second = json.loads(page1.stdout), json.loads(page2.stdout)
    assert (len(first["runs"]), len(second["runs"]), first["total"]) == (3, 1, 4)
    assert second["runs"][0]["agent_id"] == "sup", "oldest first: the nested pause came last"
    table = troupe("runs", "list", "--store", str(store_with_pauses), "--limit", "3", cwd=tmp_path)
    assert "Runs 1-3 of 4 shown (oldest first); next: --page 2." in table.stdout
    # The cursor it prints asks for the same next page, read from the store's index at its place.
    cursor = table.stdout.split("--cursor ")[1].split()[0]
    after = troupe(*paged, "--cursor", cursor, cwd=tmp_path)
    assert (
        json.loads(after.stdout)["runs"] == second["runs"] and json.loads(after.stdout)["next_cursor"] is None
    )
    both = troupe(*paged, "--cursor", cursor, "--page", "2", cwd=tmp_path)
    assert both.returncode == 1 and "not both" in both.stderr
    assert (
        troupe("runs", "list", "--store", str(store_with_pauses), "--page", "0", cwd=tmp_path).returncode == 2
    )


def test_terminal_output_escapes_control_characters(store_with_pauses, tmp_path):
    listed = json.loads(
        troupe("runs", "list", "--store", str(store_with_pauses), "--json", cwd=tmp_path).stdout
    )
    run_id = listed["runs"][0]["run_id"]
    shown = troupe("runs", "show", run_id, "--store", str(store_with_pauses), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "t\\x1b]0;pwned\\x070" in shown.stdout


# ---- the server: body limit, open mode -----------------------------------------------------------------


def raw_request(port: int, head: str, body_chunks: Any = ()) -> tuple[int, bytes]:
    """Send a request by hand (so a body can be announced and withheld, or streamed) and read the
    response status."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head.encode())
        try:
            for chunk in body_chunks:
                conn.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the whole body was sent
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
            more = conn.recv(65536)
            if not more:
                break
            data += more
    status = int(data.split(b" ", 2)[1])
    return status, data


def _length(response: bytes) -> int:
    for line in response.partition(b"\r\n\r\n")[0].lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def test_a_20_mb_anonymous_body_is_refused_before_the_key_check_without_being_read(served):
    before = rss_kib(served.proc.pid)
    path = f"/api/agents/{AGENT}/generate"
    # Announced and never sent: the answer comes at once, so nothing was waited for or read.
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    status, data = raw_request(served.port, head + f"Content-Length: {20 * 1024 * 1024}\r\n\r\n")
    assert status == 413 and b"BODY_TOO_LARGE" in data, data

    # Streamed without a length: refused as soon as the limit is passed.
    chunk = b"x" * (1024 * 1024)
    chunked = (b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(20))
    status, data = raw_request(served.port, head + "Transfer-Encoding: chunked\r\n\r\n", chunked)
    assert status == 413, data
    grown_mib = (rss_kib(served.proc.pid) - before) / 1024
    assert grown_mib < 20, f"the server grew by {grown_mib:.1f} MiB"

    # At the limit the body is read and the key is checked as usual.
    at_limit = b'{"messages": "' + b"a" * (1024 * 1024 - 16) + b'"}'
    assert len(at_limit) == 1024 * 1024
    response = httpx.post(served.url + path, content=at_limit, headers={"content-type": "application/json"})
    assert response.status_code == 401, response.text


def test_open_mode_answers_only_its_own_host(http_server, tmp_path, calls):
    server = http_server(inbox_runtime(tmp_path, calls), open_mode=True)
    ok = httpx.get(server.url + "/api/inbox")
    assert ok.status_code == 200
    assert (
        httpx.get(server.url + "/api/inbox", headers={"Host": f"localhost:{server.port}"}).status_code == 200
    )
    for host in ("attacker.example", f"attacker.example:{server.port}", "127.0.0.1.attacker.example"):
        refused = httpx.post(
            server.url + "/api/agents/ops/generate", json={"messages": "rec-1"}, headers={"Host": host}
        )
        assert refused.status_code == 421 and refused.json()["code"] == "HOST_NOT_ALLOWED", host
    assert calls.count("delete_record") == 0 and httpx.get(server.url + "/api/inbox").json()["total"] == 0


def test_open_mode_refuses_a_remote_address_unless_asked(tmp_path):
    done = troupe("serve", "--demo", "--open", "--host", "0.0.0.0", cwd=tmp_path)
    assert done.returncode == 2 and "--allow-remote-open" in done.stderr
    assert list(tmp_path.iterdir()) == [], "refused before anything started"


# ---- malformed input: one line, never a traceback -----------------------------------------------------


def _one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 1, (done.args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, (done.args, done.stderr)
    assert expected in done.stderr, (done.args, done.stderr)
    assert "hunter2" not in done.stderr + done.stdout, "a password was shown"
    assert "Nothing is waiting" not in done.stdout


def test_malformed_urls_are_one_line_without_the_password(tmp_path):
    cases = {
        "--server http://127.0.0.1:notaport: not a URL (Invalid port": ["--server", "http://127.0.0.1:notaport"],
        "--server http://[::1: not a URL": ["--server", "http://[::1"],
        "--server http://ann:***@127.0.0.1:notaport: not a URL": ["--server", "http://ann:hunter2@127.0.0.1:notaport"],
        "--server ftp://127.0.0.1: not an http(s) URL": ["--server", "ftp://127.0.0.1"],
        "--store redis://:***@127.0.0.1:notaport/0: Port could not be cast to integer": [
            "--store", "redis://:hunter2@127.0.0.1:notaport/0"
        ],
        "--store redis://:***@127.0.0.1:99999/0: Port out of range": ["--store", "redis://:hunter2@127.0.0.1:99999/0"],
    }  # fmt: skip
    for expected, where in cases.items():
        _one_line(troupe("runs", "list", *where, cwd=tmp_path), expected)
    shown = troupe("runs", "show", "r", "--store", "redis://:hunter2@127.0.0.1:99999/0", cwd=tmp_path)
    _one_line(shown, "Port out of range")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [("text/html", b"<html>please sign in</html>"), ("application/json", b"[1, 2, 3]"),
     ("application/json", b'{"hello": "world"}'), ("application/json", b'{"runs": [1], "total": 1}')],
    ids=["html", "json-list", "json-object", "runs-not-objects"],
)  # fmt: skip
def test_a_server_that_is_not_troupe_is_named_not_read_as_nothing_waiting(tmp_path, content_type, body):
    with answering(content_type, body) as site:
        other = site.rstrip("/")
        done = troupe("runs", "list", "--server", other, cwd=tmp_path)
        found = troupe(
            "approve", "r", "--server", other, cwd=tmp_path, env={"XDG_STATE_HOME": str(tmp_path)}
        )
        one_agent = troupe("runs", "list", "--agent", "ops", "--server", other, cwd=tmp_path)
    expected = f"the server at {other} did not answer GET /api/inbox as a Troupe server does"
    _one_line(done, expected)
    _one_line(found, expected)
    listing = f"the server at {other} did not answer GET /api/agents/ops/suspended-runs as a Troupe"
    _one_line(one_agent, listing)


def test_a_damaged_decisions_file_is_forgotten_not_a_traceback(tmp_path):
    server = "http://127.0.0.1:1"
    state = tmp_path / "state" / "troupe" / "cli-decisions.json"
    state.parent.mkdir(parents=True)
    damaged = {"at": "yesterday", "agent": "ops", "call": "c"}
    records = {
        json.dumps(["x", "y", "approve"]): damaged,
        json.dumps([server, "r", "approve c"]): damaged,
        json.dumps([server, "r", "approve"]): {**damaged, "at": [1]},
    }
    state.write_text(json.dumps(records))
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    for args in (
        ["approve", "r", "c", "--agent", "ops"],
        ["approve", "r", "c"],
        ["approve", "r", "--agent", "ops"],
    ):
        done = troupe(*args, "--server", server, cwd=tmp_path, env=env)
        _one_line(done, f"cannot reach the server at {server}")
