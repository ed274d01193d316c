"""A real redis-server for tests: started on 127.0.0.1 on a free port with its own directory.

The append-only file is fsynced on every write, so ``kill()`` (SIGKILL) followed by ``start()`` on the same
port and directory brings back everything that was acknowledged.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

_START_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``settings``: more redis.conf lines (say, a password), written to a config file only its owner
    can read, never put on the command line where any user's ``ps`` would show them. ``flags``: more
    command-line flags (``--sentinel`` runs a Sentinel)."""

    def __init__(
        self,
        directory: Path,
        port: int | None = None,
        *,
        settings: dict[str, str] | None = None,
        flags: tuple[str, ...] = (),
    ) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise RuntimeError(
                "redis-server is not installed; the Redis tests start a real one "
                "(run scripts/setup.sh --system, or apt-get install redis-server)"
            )
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.settings = settings or {}
        self.flags = flags  # say, ("--sentinel",)
        self.process: subprocess.Popen[bytes] | None = None

    def _config(self) -> list[str]:
        """The config file argument (first on redis-server's command line), if there are settings."""
        if not self.settings:
            return []
        path = self.directory / "redis.conf"
        path.touch(mode=0o600)
        path.write_text("".join(f"{name} {value}\n" for name, value in self.settings.items()))
        return [str(path)]

    def start(self) -> None:
        if self.process is not None:
            raise RuntimeError(f"redis-server on port {self.port} is already running")
        assert self.binary is not None
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                *self._config(),
                *self.flags,
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--dir", str(self.directory),
                "--save", "",
                "--appendonly", "yes",
                "--appendfsync", "always",
                "--daemonize", "no",
                "--protected-mode", "yes",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self._wait_until_it_answers()

    def _wait_until_it_answers(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        client = self.client(socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
        try:
            while True:
                if self.process.poll() is not None:
                    code = self.process.returncode
                    raise RuntimeError(f"redis-server exited with {code}: {self._log_tail()}")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                    pass  # not listening yet, or still loading the append-only file
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"redis-server did not answer PING in {_START_TIMEOUT_S}s: {self._log_tail()}"
                    )
                time.sleep(0.02)
        finally:
            client.close()

    def client(self, **options: Any) -> redis.Redis:
        """A plain client of this one server (with its password, if it has one)."""
        password = self.settings.get("requirepass")
        return redis.Redis(host="127.0.0.1", port=self.port, password=password, **options)

    def kill(self) -> None:
        """SIGKILL, as in a crash: nothing is flushed beyond what ``appendfsync always`` already wrote."""
        process = self._running()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    @property
    def pid(self) -> int:
        return self._running().pid

    def restart(self) -> None:
        """Start it again if it died (say, killed by a fault-injection test); a live server is left be."""
        if self.process is not None and self.process.poll() is None:
            return
        if self.process is not None:
            self.process.wait(timeout=10)
            self.process = None
        self.start()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _running(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise RuntimeError(f"redis-server on port {self.port} is not running")
        return self.process

    def _log_tail(self) -> str:
        try:
            return (self.directory / "redis.log").read_text(errors="replace")[-2000:]
        except FileNotFoundError:
            return "(no log)"


__all__ = ["RedisServer", "free_port"]
