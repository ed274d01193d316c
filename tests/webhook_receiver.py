"""A real webhook receiver for tests: ``http.server`` on 127.0.0.1 in a thread, recording every request.

It can be down (nothing listening on its port) and brought up later on the same port, so a test can
make an outage real. ``wait_for(n)`` blocks until ``n`` requests have arrived (no sleeps in tests).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Receiver:
    def __init__(self, port: int | None = None, status: int = 204) -> None:
        self.port = port or free_port()
        self.status = status
        self.received: list[Received] = []
        # Cleared: every request is held before it is answered (a slow receiver) until it is set again.
        self.answering = threading.Event()
        self.answering.set()
        self._changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                with receiver._changed:
                    receiver.received.append(Received(self.path, dict(self.headers.items()), body))
                    receiver._changed.notify_all()
                receiver.answering.wait(60)
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="receiver").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    async def arrived(self, count: int, within: float = 30.0) -> list[Received]:
        """``wait_for`` without blocking the caller's event loop (where the sender may run)."""
        return await asyncio.to_thread(self.wait_for, count, within)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.received) >= count, timeout):
                raise AssertionError(f"expected {count} webhook requests, got {len(self.received)}")
            return list(self.received)


__all__ = ["Received", "Receiver", "free_port"]
