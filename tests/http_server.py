"""A real HTTP front door for tests: uvicorn on 127.0.0.1 (a free port) in a background thread with its
own event loop, serving a Runtime built in that thread, plus the agents and keys the HTTP tests share.

Everything the runtime touches lives on the server's loop; tests talk to it over HTTP only (httpx, the
Python client, Node), exactly as a remote caller would.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from helpers import delete_tool, echo_model, weather_tool
from troupe.api.app import create_app

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, tool_call

KEYS = {
    "key-a": {"name": "tenant-a", "resources": ["a1", "a2"]},
    "key-b": {"name": "tenant-b", "resources": ["b1"]},
    "key-admin": {"name": "ops", "admin": True},
}
A = {"Authorization": "Bearer key-a"}
B = {"Authorization": "Bearer key-b"}
ADMIN = {"Authorization": "Bearer key-admin"}


class LiveServer:
    def __init__(
        self,
        build: Callable[[], Runtime],
        *,
        keys: Any = None,
        open_mode: bool = False,
        make_app: Callable[[Runtime], Any] | None = None,
        **app_options: Any,
    ) -> None:
        self._build = build
        self._make_app = make_app  # an app of the test's own around the runtime, instead of create_app
        self._keys = keys
        self._open = open_mode
        self._app_options = app_options  # more of create_app's options (max_body_bytes, hosts)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True, name="http")
        self.server: uvicorn.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> LiveServer:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the HTTP server did not start")
        if self._error is not None:
            raise RuntimeError("the HTTP server failed to start") from self._error
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(timeout=30)

    async def _main(self) -> None:
        runtime: Runtime | None = None
        try:
            runtime = self._build()
            if self._make_app is not None:
                app = self._make_app(runtime)
            else:
                app = create_app(runtime, keys=self._keys, open_mode=self._open, **self._app_options)
            config = uvicorn.Config(
                app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=2
            )
            self.server = uvicorn.Server(config)
            serving = asyncio.get_running_loop().create_task(self.server.serve())
            while not self.server.started and not serving.done():
                await asyncio.sleep(0.01)
            if serving.done():
                serving.result()
            self.port = self.server.servers[0].sockets[0].getsockname()[1]
            self._ready.set()
            await serving
        except BaseException as exc:
            self._error = exc
            raise
        finally:
            self._ready.set()
            if runtime is not None:
                await runtime.shutdown()


# ---- the agents the HTTP tests serve ---------------------------------------------------------------------


def ops_agents(calls: CallLog) -> list[Agent]:
    """``ops`` deletes records (approval needed); ``planner`` asks for a city (``suspend()``)."""
    return [
        Agent(
            "ops",
            name="Operations",
            description="Deletes records",
            model=echo_model(tool_call("delete_record", {"id": "abc-123"}, id="call-1")),
            tools=[delete_tool(calls)],
        ),
        Agent("planner", model=echo_model(tool_call("weather", {}, id="w1")), tools=[weather_tool(calls)]),
    ]


def runtime_factory(tmp_path: Path, calls: CallLog, executor: str = "local") -> Callable[[], Runtime]:
    def build() -> Runtime:
        return Runtime(ops_agents(calls), storage=SqliteStore(tmp_path / "http.db"), executor=executor)  # type: ignore[arg-type]

    return build


# ---- reading responses -----------------------------------------------------------------------------------


def sse_frames(body: str) -> list[Any]:
    """The ``data:`` payloads of an event stream, parsed (``[DONE]`` kept as the string)."""
    frames = [block[len("data: ") :] for block in body.split("\n\n") if block.startswith("data: ")]
    return [f if f == "[DONE]" else json.loads(f) for f in frames]


def stream_frames(client: httpx.Client, path: str, body: Any, headers: dict[str, str]) -> list[Any]:
    response = client.post(path, json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = sse_frames(response.text)
    assert frames[-1] == "[DONE]"
    return frames[:-1]


def approval_of(frames: list[Any]) -> dict[str, Any]:
    return next(f for f in frames if f["type"] == "tool-call-approval")
