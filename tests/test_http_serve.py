"""``troupe serve`` as a real process: it serves, stops cleanly on SIGTERM (exit 0, also with Ray, whose
``ray.init`` replaces uvicorn's SIGTERM handler), and a run left paused is there after a restart."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import ROOT
from troupe.api.keys import digested


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """``troupe serve`` in a process of its own; ``troupe`` is the command (this venv's by default),
    run in ``cwd`` with ``env``."""

    def __init__(
        self,
        tmp_path: Path,
        *args: str,
        troupe: list[str] | None = None,
        cwd: Path = ROOT,
        env: dict[str, str] | None = None,
        own_group: bool = False,
    ) -> None:
        self.port = free_port()
        self.log = (tmp_path / f"serve-{self.port}.log").open("w")
        troupe = troupe or [sys.executable, "-m", "troupe.cli"]
        command = [*troupe, "serve", "--port", str(self.port), *args]
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=own_group,  # a process group of its own, as under `timeout` or a shell
        )
        self.url = f"http://127.0.0.1:{self.port}/api"

    def wait_ready(self, headers: dict[str, str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                if httpx.get(self.url + "/agents", headers=headers, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(self.output())

    def stop(self, sig: int = signal.SIGTERM, within: float = 10.0) -> tuple[int, float]:
        started = time.monotonic()
        self.process.send_signal(sig)
        try:
            code = self.process.wait(within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"still running {within}s after the signal:\n{self.output()}") from None
        self.log.close()
        return code, time.monotonic() - started

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()


def test_serve_answers_stops_on_sigterm_and_keeps_paused_runs(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(digested({"k-acme": {"name": "acme", "resources": ["acme"]}})))
    args = ("--demo", "--store", str(tmp_path / "demo.db"), "--executor", "local", "--keys", str(keys))
    acme = {"Authorization": "Bearer k-acme"}

    first = Served(tmp_path, *args)
    try:
        first.wait_ready(acme)
        assert "records-assistant" in httpx.get(first.url + "/agents", headers=acme).json()
        assert httpx.get(first.url + "/agents").status_code == 401
        paused = httpx.post(
            first.url + "/agents/records-assistant/generate",
            json={"messages": "Please delete record abc-123", "resourceId": "acme"},
            headers=acme,
            timeout=30,
        ).json()
        assert paused["suspendPayload"]["toolName"] == "delete_record"
    finally:
        code, took = first.stop()
    assert code == 0, first.output()
    assert took < 8

    second = Served(tmp_path, *args)
    try:
        second.wait_ready(acme)
        listed = httpx.get(second.url + "/agents/records-assistant/suspended-runs", headers=acme).json()
        assert [r["runId"] for r in listed["runs"]] == [paused["runId"]]
        done = httpx.post(
            second.url + "/agents/records-assistant/approve-tool-call-generate",
            json={"runId": paused["runId"], "toolCallId": "call-delete"},
            headers=acme,
            timeout=30,
        )
        assert done.json()["suspendPayload"]["toolName"] == "book_table", "deleted; now it asks"
    finally:
        code, _ = second.stop(signal.SIGINT)
    assert code == 0, second.output()


@pytest.mark.ray
def test_serve_on_ray_stops_cleanly_on_sigterm(tmp_path, ray_session):
    address = ray_session.get_runtime_context().gcs_address
    served = Served(
        tmp_path, "--demo", "--store", str(tmp_path / "demo.db"), "--ray-address", address, "--open"
    )
    try:
        served.wait_ready({})
        stream = httpx.post(
            served.url + "/agents/records-assistant/stream", json={"messages": "delete abc-123"}, timeout=30
        )
        assert '"type":"tool-call-approval"' in stream.text
    finally:
        code, took = served.stop()
    assert code == 0, served.output()
    assert took < 10
