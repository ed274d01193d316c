"""The FastAPI front door as a Ray Serve deployment: ``troupe serve --replicas N``, or ``serve run``.

Each replica builds the user's Runtime itself (``module:attr``, as ``troupe serve --app`` takes it) and
serves ``create_app`` on it, with the same API keys or open mode as the uvicorn front door. The replicas'
runtimes join the one Ray cluster and share one durable store, so any replica serves any run: a decision
is claimed by compare-and-set whichever replica takes it, and the runs a lost replica's agents were
driving are taken over by the other replicas' reconcilers on their next round. A store only one process
can see (``MemoryStore``) is refused for that reason.

    troupe serve --app myproject.agents:runtime --keys keys.json --replicas 2
    serve run troupe.front_door:app app=myproject.agents:runtime keys=keys.json replicas=2

Serve's HTTP proxy binds 127.0.0.1 unless told otherwise (``--host``, or ``http_options.host`` in a
``serve run`` config). Every response names the replica that answered in ``x-troupe-replica``: which
replica serves a request is Serve's choice, and the header is how a caller (or a test) can tell.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import ray
from ray import serve
from ray.serve import Application

from troupe.actors.remote import ensure_ray
from troupe.api.app import create_app
from troupe.api.auth import KeyRing
from troupe.api.guards import DEFAULT_MAX_BODY_BYTES
from troupe.api.serve import runtime_from
from troupe.api.tokens import OidcSettings
from troupe.core.notifying.outbox import Notifications
from troupe.ops.apps import load_notifications, load_runtime
from troupe.supervisor.runtime import Runtime

log = logging.getLogger(__name__)

APP_NAME = "troupe"
DEPLOYMENT = "TroupeFrontDoor"
REPLICA_HEADER = "x-troupe-replica"
# Open SSE streams (runs, the inbox's events) each hold a slot for as long as they last; Serve's default
# of 5 per replica would queue the sixth reader behind them.
MAX_ONGOING_REQUESTS = 256

RuntimeSource = str | Callable[[], Runtime | Awaitable[Runtime]]


@dataclass(frozen=True)
class DoorSettings:
    """What ``create_app`` takes besides the runtime; travels to every replica (keys as digests only)."""

    keys: KeyRing | None = None
    open_mode: bool = False
    oidc: OidcSettings | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    hosts: tuple[str, ...] = ()
    notifications: Notifications | None = None


class _NamesReplica:
    """ASGI middleware: adds the answering replica's id to every HTTP response."""

    def __init__(self, app: Any, replica: str) -> None:
        self.app = app
        self.header = (REPLICA_HEADER.encode(), replica.encode())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, named)


async def replica_runtime(source: RuntimeSource) -> Runtime:
    """The Runtime one replica serves, refused unless its store is one every replica shares."""
    if isinstance(source, str):
        try:
            runtime = await load_runtime(source)
        except SystemExit as exc:  # the CLI's way to fail; a replica must raise to report it
            raise ValueError(str(exc)) from None
    else:
        runtime = await runtime_from(source)
    if not getattr(runtime.storage, "shared_across_processes", True):
        raise ValueError(
            f"the front door on Ray Serve needs a store every replica shares (RedisStore, or "
            f"SqliteStore on a file all replicas reach), not {type(runtime.storage).__name__}: "
            "each replica would see only its own runs"
        )
    return runtime


def _replica_grpc_on_node_address() -> None:
    """Serve (2.60) starts a gRPC server in every replica, for calls between deployments, on every
    interface ("[::]:0", which it does not let anyone configure): with no token on it. Here it binds the
    node's own address instead, which is where Serve's proxy and other replicas reach it (loopback for
    the Ray Troupe starts itself). Patched in this replica's process, before Serve starts that server
    (after the constructor)."""
    from ray.serve._private import replica as serve_replica

    bind = serve_replica.add_port_to_grpc_server
    if getattr(bind, "troupe_node_address", False):
        return
    node = ray.util.get_node_ip_address()

    def on_node_address(server: Any, address: str) -> int:
        if address.startswith("[::]:"):
            address = f"{node}:{address.removeprefix('[::]:')}"
        return int(bind(server, address))

    on_node_address.troupe_node_address = True  # type: ignore[attr-defined]
    serve_replica.add_port_to_grpc_server = on_node_address


@serve.deployment(
    name=DEPLOYMENT, ray_actor_options={"num_cpus": 0}, max_ongoing_requests=MAX_ONGOING_REQUESTS
)
@serve.ingress()
class FrontDoor:
    """One replica: its own Runtime on the shared cluster and store, and the app serving it."""

    # Serve awaits an async constructor (the runtime's hosts start here).
    async def __init__(self, source: RuntimeSource, settings: DoorSettings) -> None:  # type: ignore[misc]
        _replica_grpc_on_node_address()
        self._settings = settings
        runtime = await replica_runtime(source)
        if settings.notifications is not None:
            runtime.use_notifications(settings.notifications)
        runtime.store()
        # Start the hosts now: they take over runs a lost replica (or a dead server) left in flight.
        await runtime.recover(0.0)
        self._runtime = runtime

    def __serve_build_asgi_app__(self) -> Any:
        s = self._settings
        app = create_app(
            self._runtime,
            keys=s.keys,
            open_mode=s.open_mode,
            oidc=s.oidc,
            max_body_bytes=s.max_body_bytes,
            hosts=s.hosts,
        )
        app.add_middleware(_NamesReplica, replica=serve.get_replica_context().replica_id.unique_id)
        return app

    async def __del__(self) -> None:
        await self._runtime.shutdown()


def front_door(source: RuntimeSource, settings: DoorSettings, replicas: int = 1) -> Application:
    """The Serve application: ``replicas`` front door replicas serving the Runtime ``source`` gives."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    deployment: Any = FrontDoor  # a serve.Deployment (its decorators are untyped)
    return deployment.options(num_replicas=replicas).bind(source, settings)


def _join_ray(source: RuntimeSource, ray_address: str | None) -> None:
    if isinstance(source, str) and os.getcwd() not in sys.path:
        # Like --app: a Ray started here hands its import path to the workers, replicas included.
        sys.path.insert(0, os.getcwd())
    ensure_ray(ray_address)


def start(
    source: RuntimeSource,
    settings: DoorSettings,
    *,
    replicas: int,
    host: str = "127.0.0.1",
    port: int = 8000,
    ray_address: str | None = None,
) -> None:
    """Start (or join) Ray, start Serve's proxy on ``host:port`` and deploy the front door; returns once
    every replica is up (a replica that fails to start raises, with its error)."""
    _join_ray(source, ray_address)
    serve.start(http_options={"host": host, "port": port})
    try:
        serve.run(front_door(source, settings, replicas), name=APP_NAME, route_prefix="/")
    except RuntimeError as exc:  # Serve says only that the deployment failed; its replicas say why
        raise RuntimeError(f"{exc} {_why_replicas_failed()}".strip()) from exc


def _why_replicas_failed() -> str:
    """The last line of the error a replica's constructor raised, as Serve's status reports it."""
    app_status = serve.status().applications.get(APP_NAME)
    deployment = app_status.deployments.get(DEPLOYMENT) if app_status else None
    lines = [line for line in (deployment.message if deployment else "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def stop(embedded: bool) -> None:
    """Remove the front door: its application (each replica shuts its runtime down), and with a Ray this
    process started, that Ray, Serve's controller and proxy with it. (``serve.shutdown()`` first would
    have the raylet print a failed-task warning: it kills the controller while its own shutdown task is
    still queued for a retry.)"""
    serve.delete(APP_NAME)
    if embedded:
        ray.shutdown()


def run(
    source: RuntimeSource,
    settings: DoorSettings,
    *,
    replicas: int,
    host: str,
    port: int,
    ray_address: str | None = None,
) -> int:
    """``troupe serve --replicas N``: serve until SIGINT or SIGTERM, then take the front door down."""
    _join_ray(source, ray_address)
    stopping = threading.Event()
    # After Ray's start-up, which installs a SIGTERM handler of its own; before the replicas start,
    # so a signal while they do still ends in a clean stop.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        start(source, settings, replicas=replicas, host=host, port=port, ray_address=ray_address)
    except RuntimeError as exc:
        print(f"troupe: the front door did not start: {exc}", file=sys.stderr, flush=True)
        stop(embedded=ray_address is None)
        return 1
    access = "open mode: no key needed" if settings.open_mode else "API keys required"
    print(
        f"troupe: serving on Ray Serve, {replicas} replica(s) ({access}); approval inbox at "
        f"http://{host}:{port}/inbox",
        file=sys.stderr,
        flush=True,
    )
    stopping.wait()
    stop(embedded=ray_address is None)
    return 0


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


def app(args: dict[str, Any]) -> Application:
    """The builder ``serve run`` / a Serve config's ``import_path`` names: ``troupe.front_door:app``.

    ``args``: ``app`` (MODULE:ATTR, required), ``keys`` (a keys file) and/or ``oidc`` (an identity
    provider's settings file, ``{"oidc": {...}}``), or ``open: true``; ``replicas``, ``max_body_bytes``,
    ``allowed_hosts`` (comma-separated, with ``open``), ``notify`` (a notifications file). Files are read
    where the application is built."""
    known = {"app", "keys", "oidc", "open", "replicas", "max_body_bytes", "allowed_hosts", "notify"}
    unknown = set(args) - known
    if unknown:
        raise ValueError(f"unknown troupe.front_door argument(s): {', '.join(sorted(unknown))}")
    if not args.get("app"):
        raise ValueError("troupe.front_door needs app=MODULE:ATTR (a Runtime or a function returning one)")
    open_mode = _flag(args.get("open", False))
    if not args.get("keys") and not args.get("oidc") and not open_mode:
        raise ValueError(
            "troupe.front_door needs keys=FILE and/or oidc=FILE, or open=true for local use without keys"
        )
    settings = DoorSettings(
        keys=KeyRing.load(str(args["keys"])) if args.get("keys") else None,
        open_mode=open_mode,
        oidc=OidcSettings.load(str(args["oidc"])) if args.get("oidc") else None,
        max_body_bytes=int(args.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)),
        hosts=_hosts(args.get("allowed_hosts", "")),
        notifications=load_notifications(str(args["notify"])) if args.get("notify") else None,
    )
    return front_door(str(args["app"]), settings, int(args.get("replicas", 1)))


def _hosts(value: str | Iterable[str]) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else value
    return tuple(n.strip() for n in names if n.strip())


__all__ = [
    "APP_NAME",
    "DEPLOYMENT",
    "REPLICA_HEADER",
    "DoorSettings",
    "FrontDoor",
    "app",
    "front_door",
    "replica_runtime",
    "run",
    "start",
    "stop",
]
