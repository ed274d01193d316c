"""Serve a runtime over HTTP with uvicorn until SIGTERM or SIGINT, then shut it down cleanly (exit 0).

uvicorn's own signal handling is replaced: it re-raises the signal after its graceful shutdown (the
process would die of it), and ``ray.init`` swaps out the SIGTERM handler anyway. So Ray is started (or
joined) first, then this module's handlers go in, and a signal only asks the server to stop; the runtime
is shut down after the last connection closed (or a grace period ran out). A second SIGINT forces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import uvicorn
from troupe.api.app import create_app
from troupe.api.auth import KeyRing
from troupe.api.listener import listen
from troupe.core.notifying.outbox import Notifications
from troupe.supervisor.runtime import Runtime

log = logging.getLogger("troupe.serve")

RuntimeSource = Runtime | Callable[[], Runtime | Awaitable[Runtime]]
GRACE_S = 5


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # signals are handled by ``serve`` (see the module docstring)


def serve(
    source: RuntimeSource,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    keys: KeyRing | Mapping[str, Any] | None = None,
    open_mode: bool = False,
    log_level: str = "info",
    notifications: Notifications | None = None,
    listener: socket.socket | None = None,
    **app_options: Any,
) -> int:
    """Run the server in this (main) thread; returns the process exit code. ``app_options`` go to
    ``create_app`` (``max_body_bytes``, ``hosts``); ``notifications``, when given, replace the
    runtime's own (``troupe serve --notify FILE``). It listens on ``listener`` (a socket from
    ``troupe.api.listener.listen``), or takes ``host:port`` itself first of all, before the runtime is
    made or Ray started: a port in use raises ``ListenError`` having changed nothing."""
    listener = listener if listener is not None else listen(host, port)
    with listener:
        return asyncio.run(
            _serve(source, listener, host, port, keys, open_mode, log_level, app_options, notifications)
        )


async def _serve(
    source: RuntimeSource,
    listener: socket.socket,
    host: str,
    port: int,
    keys: KeyRing | Mapping[str, Any] | None,
    open_mode: bool,
    log_level: str,
    app_options: dict[str, Any],
    notifications: Notifications | None = None,
) -> int:
    runtime = await runtime_from(source)
    if notifications is not None:
        runtime.use_notifications(notifications)
    server: _Server | None = None
    try:
        runtime.store()  # starts or joins Ray when the runtime uses it: before the handlers below
        await runtime.recover(0.0)  # start the hosts; they pick up runs a dead server left in flight
        app = create_app(runtime, keys=keys, open_mode=open_mode, **app_options)
        config = uvicorn.Config(
            app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=GRACE_S
        )
        server = _Server(config)
        _announce(runtime, host, port, open_mode)
        await _until_stopped(server, listener)
    finally:
        await runtime.shutdown()
    return 0 if server is not None and server.started else 1


def _announce(runtime: Runtime, host: str, port: int, open_mode: bool) -> None:
    agents = ", ".join(sorted(a.id for a in runtime.list_agents()))
    access = "open mode: no key needed, every caller is an admin" if open_mode else "API keys required"
    print(
        f"troupe: serving {agents} ({runtime.executor} executor; {access}); "
        f"approval inbox at http://{host}:{port}/inbox",
        file=sys.stderr,
        flush=True,
    )


async def _until_stopped(server: _Server, listener: socket.socket) -> None:
    """Serve until SIGINT or SIGTERM asks the server to stop (a second one forces it)."""
    loop = asyncio.get_running_loop()

    def stop(signum: int) -> None:
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    handled: list[int] = []
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop, sig)
            handled.append(sig)
        await server.serve(sockets=[listener])
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


async def runtime_from(source: RuntimeSource) -> Runtime:
    """The Runtime ``source`` is, or that calling it (sync or async) makes."""
    made: Any = source() if callable(source) and not isinstance(source, Runtime) else source
    if inspect.isawaitable(made):
        made = await made
    if not isinstance(made, Runtime):
        raise TypeError(f"expected a troupe Runtime (or a function returning one), got {type(made).__name__}")
    return made


__all__ = ["runtime_from", "serve"]
