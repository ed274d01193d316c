"""Serve a runtime over HTTP with uvicorn until SIGTERM or SIGINT, then shut it down cleanly (exit 0).

uvicorn's own signal handling is replaced: it re-raises the signal after its graceful shutdown (the
process would die of it), and ``ray.init`` swaps out the SIGTERM handler anyway. So Ray is started (or
joined) first, then this module's handlers go in, and a signal only asks the server to stop; the runtime
is shut down after the last connection closed (or a grace period ran out). A second SIGINT forces it.

The runtime's shutdown is bounded (``SHUTDOWN_S``): a stop that signals every process of the service
at once (systemd's ``KillMode=control-group``, a container runtime) reaches Ray's GCS too, which then
stops answering without exiting, and the shutdown's calls to it would wait a minute before Ray ended
the process itself. Past the bound the process exits as the signal asked, saying so; what the runs had
written to the store stands, as after any crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import socket
import sys
import threading
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
# How long the runtime's shutdown may take once the server has stopped (see the module docstring).
SHUTDOWN_S = 3.0


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
    """Serve a runtime over HTTP in this (main) thread until SIGTERM or SIGINT; return the exit code.

    It takes its port first of all, before the runtime is made or Ray started. On a signal it stops
    taking requests, lets open ones finish (up to 5 s), and shuts the runtime down; if that has not
    finished ``SHUTDOWN_S`` seconds later (Ray stopped answering), the process exits there.

    Args:
        source: The runtime, or a function (sync or async) that makes it.
        host: The address to listen on (default loopback).
        port: The port.
        keys: The API keys (a ``KeyRing``, or a mapping as ``troupe keys`` writes it).
        open_mode: Serve without keys, every caller an admin (loopback only, for trying things).
        log_level: uvicorn's log level.
        notifications: Replace the runtime's notifications (``troupe serve --notify FILE``).
        listener: A socket to serve on (from ``troupe.api.listener.listen``), instead of taking
            ``host:port``.
        **app_options: More options of ``create_app`` (``max_body_bytes``, ``hosts``, ...).

    Returns:
        0 once the server served and stopped; 1 if it never started.

    Raises:
        ListenError: The port is in use (nothing was changed).
    """
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
        code = 0 if server is not None and server.started else 1
        with _bounded(SHUTDOWN_S, code):
            await runtime.shutdown()
    return code


@contextlib.contextmanager
def _bounded(seconds: float, code: int) -> Iterator[None]:
    """The block finishes within ``seconds``, or the process ends with ``code``, saying why. A timer
    thread does it: what blocks is a Ray call that holds the event loop, so nothing on the loop could."""

    def give_up() -> None:
        print(
            f"troupe: the shutdown did not finish within {seconds:g} s (Ray stopped answering: it was "
            "signalled too); exiting without waiting for it. Runs stand as they were last written.",
            file=sys.stderr,
            flush=True,
        )
        os._exit(code)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


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
