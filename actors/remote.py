"""The one place Ray is touched in the actors layer: starting Ray, spawning actors, calling them.

Plain classes (``AgentHost``) become actors here and nowhere else. ``RayActor`` wraps an
actor handle so that callers see the same exceptions they would see in-process: Ray's ``RayTaskError``
wrapper is removed and the original (picklable) Troupe error re-raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import ActorDiedError, ActorUnschedulableError, RayActorError, RayTaskError
from troupe.actors import ray_auth
from troupe.actors.announce import starting
from troupe.actors.channel import ChannelClient, ChannelClosed, ChannelServer, Endpoint, FrameTooLarge
from troupe.actors.transport import DEFAULT_MAX_CONCURRENCY, RayCall, Transport, for_caller, limited

# Agent steps must not be replayed by Ray: a replayed call could run a tool twice. Recovery after an
# actor restart is Troupe's job (from the store), not Ray's.
# Troupe's actors live in their own Ray namespace, named after their runtime and agent.
NAMESPACE = "troupe"
# How long callers keep retrying an actor that Ray is restarting (a restart takes about 1-1.5 s here).
RESTART_WAIT_S = float(os.environ.get("TROUPE_RESTART_WAIT_S", "30"))
_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 0, "max_restarts": 5, "max_task_retries": 0}
# Calls to an actor on the same node go over a direct channel (see troupe.actors.channel) unless this is "0".
_CHANNELS = os.environ.get("TROUPE_ACTOR_CHANNEL", "1") != "0"
# Ray's switch for a loopback-only node (see _loopback_node), as its processes read it.
_CLUSTER_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
# No idle workers started ahead, neither when the first driver connects (one per CPU by default, about
# 45 MiB each) nor for queued tasks: Troupe runs actors, and each gets a worker of its own when it is
# created. Raylet settings (RayConfig) of the node Troupe starts; a cluster it joins keeps its own.
_LEAN_SYSTEM_CONFIG = {"prestart_worker_first_driver": False, "enable_worker_prestart": False}

log = logging.getLogger(__name__)


def ensure_ray(address: str | None = None) -> None:
    """Start (or connect to) Ray once per process, with the settings every Troupe process shares.

    A Ray started here is private: token auth stays on, with a 0600 token that Troupe's own processes
    inherit (see troupe.actors.ray_auth). It runs only the processes Troupe uses (see _lean_node).
    Joining ``address`` presents that cluster's token, checked up front so a missing or wrong one is a
    clear error at once, and takes the cluster as it is."""
    if ray.is_initialized():
        return
    # Ray's unix sockets need a short temp path, and one that no other user could have made first.
    if "RAY_TMPDIR" not in os.environ:  # only then make the private folder
        os.environ["RAY_TMPDIR"] = ray_auth.private_tmpdir()
    if address is not None:
        ray_auth.check_cluster_token(address)
        ray.init(address=address, log_to_driver=False, configure_logging=False)
        return
    ray_auth.prepare_embedded()
    # Workers of a local cluster inherit this environment: give them this process's import path, so
    # agents and tools defined in the caller's own modules unpickle there (a remote cluster uses its
    # job's runtime_env instead).
    paths = [os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Processes started from here (Troupe's own, Ray's workers) that join this Ray by its address must
    # not swap its loopback address for another either (see _loopback_node).
    os.environ[_CLUSTER_VAR] = "0"
    with _loopback_node(), _lean_node(), _own_process_groups(), starting("starting Ray (usually 5-15 s)"):
        ray.init(
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            _temp_dir=os.environ["RAY_TMPDIR"],
            _node_ip_address="127.0.0.1",
            _system_config=_LEAN_SYSTEM_CONFIG,
        )


@contextlib.contextmanager
def _loopback_node() -> Iterator[None]:
    """While a local Ray starts, its node's address is loopback, so every one of its listeners binds
    there: its processes get the address on their command lines.

    ``ray.init(_node_ip_address="127.0.0.1")`` alone does not do it: Ray swaps a loopback address for the
    machine's reachable one (``services.resolve_ip_for_localhost``). Its agents then listen on that
    address, its gRPC servers on every interface, and three Prometheus metrics servers on every
    interface without a token. The one switch Ray has for a loopback-only node is the one it turns off
    on macOS and Windows (``ray_constants.ENABLE_RAY_CLUSTER``), which is read only to choose that
    address (and by ``ray start``). It is turned back as it was once the node is up; the processes
    started from here get it through ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which sets it."""
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


@contextlib.contextmanager
def _own_process_groups() -> Iterator[None]:
    """While Troupe's own Ray starts, each process it starts leads a process group of its own, as Ray
    does on Windows: a signal sent to the group of the process that started it (Ctrl-C at a terminal,
    ``timeout``, ``kill -TERM -PGID``) reaches that process, which then shuts Ray down in order, and not
    Ray's GCS too, which would leave the process waiting 60 s for it to come back ("Failed to connect to
    GCS within 60 seconds"). Only where the kernel ends them when this process dies (Linux's
    parent-death signal, which Ray sets when it can), so no Ray process outlives it."""
    from ray._private import services, utils

    if not sys.platform.startswith("linux") or not utils.detect_fate_sharing_support():
        yield
        return

    class GroupLeader(services.ConsolePopen):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "process_group": 0})

    saved = services.ConsolePopen
    setattr(services, "ConsolePopen", GroupLeader)  # noqa: B010 - a class, which mypy will not reassign
    try:
        yield
    finally:
        setattr(services, "ConsolePopen", saved)  # noqa: B010


@contextlib.contextmanager
def _lean_node() -> Iterator[None]:
    """While Troupe's own Ray starts, its node runs what Troupe uses: the GCS, the raylet, the raylet's
    two agents and, later, the agents' actors. Left to ``ray.init`` it also runs an autoscaler monitor
    (nothing to scale here), a log monitor (it forwards workers' output to drivers, which Troupe turns
    off with ``log_to_driver=False``) and Ray's API server, about 170 MiB and a second or more of start
    together (bench/embedded_ray.py).

    Nor does it hold Ray's fixed ports: its dashboard agent listens where the OS says.

    The monitors go by Ray's own node options, ``no_monitor`` and ``include_log_monitor`` (``ray start
    --no-monitor --include-log-monitor=false``), which ``ray.init`` does not take: they are set on the
    parameters it builds for the node. The API server has no option: with ``include_dashboard=False``
    Ray 2.60 still starts it, to run its usage-statistics module alone (usage statistics are off for a
    ``ray.init`` cluster), and a node whose API server fails to start carries on without it; here it
    is not started. The raylet's two agents stay: it refuses to start without their commands and exits
    when either of them exits (the dashboard agent serves the metrics every Ray process reports to, the
    runtime-env agent sets up the environments of workers)."""
    from ray._private import node, parameter

    class LeanParams(parameter.RayParams):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # The dashboard agent on a port of the OS's choosing (0), not Ray's fixed 52365: a cluster
            # started with `ray start` on the same machine needs that one for its own agent.
            lean = {"no_monitor": True, "include_log_monitor": False, "dashboard_agent_listen_port": 0}
            super().__init__(*args, **{**kwargs, **lean})

    def no_api_server(self: Any, *, include_dashboard: bool | None, raise_on_failure: bool) -> None:
        """In place of Node.start_api_server: the node's dashboard URL stays None, as when it fails."""

    lean = [(parameter, "RayParams", LeanParams), (node.Node, "start_api_server", no_api_server)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in lean]
    for owner, name, value in lean:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def current_actor_id() -> str | None:
    """The id of the Ray actor this code runs in (stable across its restarts), or None outside one."""
    if not ray.is_initialized():
        return None
    actor_id = ray.get_runtime_context().get_actor_id()
    return f"ray-actor:{actor_id}" if actor_id else None


def current_node_id() -> str | None:
    """The Ray node this code runs on, or None without Ray."""
    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


class _Reachable:
    """Mixed into every Troupe actor: serves its methods on a channel too (see troupe.actors.channel)."""

    _channel_server: ChannelServer | None = None

    async def troupe_channel(self) -> Endpoint:
        if self._channel_server is None:
            node_id = ray.get_runtime_context().get_node_id()
            self._channel_server = ChannelServer(self, node_id, for_caller)
        return await self._channel_server.start()


def settle_heap() -> None:
    """Collect once, then freeze what the process holds (Ray, Troupe, the agent: about 95,000 objects in
    an agent's actor) out of the collector's passes. Without it, each full collection in an actor traced
    them all again: a 50-70 ms stall in the middle of whichever call was running (measured in W2 on
    Ray). What the actor creates afterwards is collected as usual. Only in processes Troupe owns: a
    library does not freeze its caller's heap."""
    gc.collect()
    gc.freeze()


@functools.cache
def _reachable(actor_class: type, max_concurrency: int) -> type:
    """The actor class as Ray runs it: reachable on a channel, its calls held to ``max_concurrency``
    whichever transport brings them, and its heap settled once it is built (``settle_heap``)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        actor_class.__init__(self, *args, **kwargs)  # type: ignore[misc]
        settle_heap()

    members = {
        "__qualname__": actor_class.__qualname__,
        "__init__": __init__,
        **limited(actor_class, max_concurrency),
    }
    return type(actor_class.__name__, (actor_class, _Reachable), members)


def _broken(opening: asyncio.Task[ChannelClient | None]) -> bool:
    if not opening.done():
        return False
    if opening.cancelled() or opening.exception() is not None:
        return True
    line = opening.result()
    return line is not None and line.closed


@dataclass(frozen=True)
class _Recipe:
    """How to create an actor again under its name, wherever it is needed (see ``RayActor.handle``)."""

    actor_class: type
    args: tuple[Any, ...]
    options: dict[str, Any]


def _unpicklable(args: tuple[Any, ...]) -> TypeError | None:
    """Why an actor's arguments cannot travel to its process, said for the person who wrote them (Ray's
    own report is pages of its object walk), or None if they can (the TypeError was something else)."""
    for arg in args:
        try:
            ray.cloudpickle.dumps(arg)
        except Exception as exc:  # whatever pickling an object raises: TypeError, PicklingError, ...
            return TypeError(
                f"{arg!r} cannot be sent to its Ray actor: {exc}. An agent travels to the actor's process "
                "with its tools, model and hooks: open connections and clients inside the tool instead of "
                "holding them in its closure or object, or run in this process (executor='local')"
            )
    return None


class RayActor:
    """A named actor whose calls raise what the actor raised.

    It travels (to other actors) as its name and is looked up where it lands: a supervisor's actor is
    created with no actor handles among its arguments, so Ray keeps nothing in its object store that a
    restart of that actor would depend on (ray-project/ray#53727). An agent's actor also travels with
    its recipe: once Ray has given up on it (restarts exhausted, or no node left for it), whoever
    calls it next re-places it under the same name, so a run paused there can still be decided.
    """

    def __init__(self, name: str, handle: Any = None, recipe: _Recipe | None = None) -> None:
        self.name = name
        self._handle = handle
        self._recipe = recipe
        # Per event loop: the channel to the actor (None: call through Ray), or the task opening it.
        self._lines: dict[asyncio.AbstractEventLoop, asyncio.Task[ChannelClient | None]] = {}

    @classmethod
    def spawn(
        cls, actor_class: type, *args: Any, name: str, replaceable: bool = False, **options: Any
    ) -> RayActor:
        recipe = _Recipe(actor_class, args, options)
        actor = cls(name, recipe=recipe if replaceable else None)
        actor._handle = actor._create(recipe)
        return actor

    def _create(self, recipe: _Recipe, **extra: Any) -> Any:
        options = {**_ACTOR_OPTIONS, **recipe.options}
        limit = int(options.get("max_concurrency", DEFAULT_MAX_CONCURRENCY))
        remote_class: Any = ray.remote(**options)(_reachable(recipe.actor_class, limit))
        try:
            return remote_class.options(name=self.name, namespace=NAMESPACE, **extra).remote(*recipe.args)
        except TypeError as exc:
            unpicklable = _unpicklable(recipe.args)
            if unpicklable is None:
                raise
            raise unpicklable from exc

    @property
    def handle(self) -> Any:
        if self._handle is None:
            try:
                self._handle = ray.get_actor(self.name, namespace=NAMESPACE)
            except ValueError:
                if self._recipe is None:
                    raise RayActorError(error_msg=f"actor {self.name} is gone") from None
                # Gone for good. Re-placed detached: it must not die with whichever process noticed
                # (a supervisor's actor); the runtime's shutdown kills it by name like any other.
                log.warning("actor %s is gone for good; placing a new one", self.name)
                self._handle = self._create(self._recipe, get_if_exists=True, lifetime="detached")
        return self._handle

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            transport: Transport = await self._line() or RayCall(self.handle)
            return await transport.call(method, args, kwargs)
        except FrameTooLarge:
            # Nothing was sent: a call too big for one frame takes the way calls from elsewhere take.
            return await RayCall(self.handle).call(method, args, kwargs)
        except ChannelClosed as exc:
            # Whether the call reached the actor is unknown, as when a Ray call's actor dies.
            raise RayActorError(error_msg=f"actor {self.name}: {exc}") from exc
        except ActorUnschedulableError as exc:
            # No node may hold it now (say, a hard node affinity to a node that is gone): as out of
            # reach as a dead actor, and looked up (or re-placed) afresh next time.
            self._handle = None
            raise RayActorError(error_msg=f"actor {self.name}: {exc}") from exc

    async def _line(self) -> ChannelClient | None:
        """This event loop's channel to the actor, opened on first use and again after it broke."""
        if not _CHANNELS:
            return None
        loop = asyncio.get_running_loop()
        opening = self._lines.get(loop)
        if opening is not None and not _broken(opening):
            return opening.result() if opening.done() else await asyncio.shield(opening)
        # First use, or the line broke: ask the (maybe restarted) actor where it listens now.
        for gone in [other for other in self._lines if other.is_closed()]:
            del self._lines[gone]
        opening = self._lines[loop] = loop.create_task(self._open_line())
        return await asyncio.shield(opening)

    async def _open_line(self) -> ChannelClient | None:
        try:
            endpoint: Endpoint = await self.handle.troupe_channel.remote()  # RayActorError if it is dead
        except RayTaskError:
            log.warning("actor %s serves no channel; calling it through Ray", self.name, exc_info=True)
            return None
        if endpoint.node_id != ray.get_runtime_context().get_node_id():
            return None  # on another node: its calls go through Ray
        try:
            return await ChannelClient.connect(endpoint)
        except OSError:
            log.warning("no channel to actor %s; calling it through Ray", self.name, exc_info=True)
            return None

    async def call_while_restarting(self, method: str, *args: Any) -> Any:
        """``call`` for idempotent methods: retried while the actor is dead and being restarted."""
        deadline = time.monotonic() + RESTART_WAIT_S
        delay = 0.05
        while True:
            try:
                return await self.call(method, *args)
            except RayActorError as exc:
                if time.monotonic() >= deadline:
                    raise
                if isinstance(exc, ActorDiedError):
                    self._handle = None  # look it up again: restarted, or re-placed (see ``handle``)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def kill(self) -> None:
        # By name: whichever actor holds it now (it may have been re-placed); none if gone already.
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(self.name, namespace=NAMESPACE), no_restart=True)

    def __reduce__(self) -> Any:
        return (RayActor, (self.name, None, self._recipe))


__all__ = [
    "RESTART_WAIT_S",
    "RayActor",
    "RayActorError",
    "current_actor_id",
    "current_node_id",
    "ensure_ray",
]
