"""The one place Ray is touched in the actors layer: starting Ray, spawning actors, calling them.

Plain classes (``AgentHost``, ``StoreHost``) become actors here and nowhere else. ``RayActor`` wraps an
actor handle so that callers see the same exceptions they would see in-process: Ray's ``RayTaskError``
wrapper is removed and the original (picklable) Troupe error re-raised.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from core.errors import AgentUnavailableError

# Agent steps must not be replayed by Ray: a replayed call could run a tool twice. Recovery after an
# actor restart is Troupe's job (from the store), not Ray's.
# Troupe's actors live in their own Ray namespace, named after their runtime and agent.
NAMESPACE = "troupe"
# How long callers keep retrying an actor that Ray is restarting (a restart takes about 1-1.5 s here).
RESTART_WAIT_S = 30.0
_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 0, "max_restarts": 5, "max_task_retries": 0}


def ensure_ray(address: str | None = None) -> None:
    """Start (or connect to) Ray once per process, with the settings every Troupe process shares."""
    if ray.is_initialized():
        return
    # Every process must agree on auth (Ray 2.60 turns token auth on by default and a mismatch hangs
    # for 20 s), and Ray's unix sockets need a short temp path.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_TMPDIR", os.path.join(tempfile.gettempdir(), "troupe-ray"))
    if address is not None:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
        return
    # Workers of a local cluster inherit this environment: give them this process's import path, so
    # agents and tools defined in the caller's own modules unpickle there (a remote cluster uses its
    # job's runtime_env instead).
    paths = [os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    ray.init(
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _temp_dir=os.environ["RAY_TMPDIR"],
    )


def current_actor_id() -> str | None:
    """The id of the Ray actor this code runs in (stable across its restarts), or None outside one."""
    if not ray.is_initialized():
        return None
    actor_id = ray.get_runtime_context().get_actor_id()
    return f"ray-actor:{actor_id}" if actor_id else None


def _unwrap(exc: RayTaskError) -> BaseException:
    """The error the actor's method raised. If that was itself the death of *another* actor it called
    (a subagent), say so as a Troupe error: a bare RayActorError would read as this actor's death."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, RayActorError):
        return AgentUnavailableError(f"an actor this agent called is unavailable: {cause}")
    return cause if isinstance(cause, BaseException) else exc


class RayActor:
    """A named actor whose calls raise what the actor raised.

    It travels (to other actors) as its name and is looked up where it lands: a supervisor's actor is
    created with no actor handles among its arguments, so Ray keeps nothing in its object store that a
    restart of that actor would depend on (ray-project/ray#53727).
    """

    def __init__(self, name: str, handle: Any = None) -> None:
        self.name = name
        self._handle = handle

    @classmethod
    def spawn(cls, actor_class: type, *args: Any, name: str, **options: Any) -> RayActor:
        remote_class: Any = ray.remote(**{**_ACTOR_OPTIONS, **options})(actor_class)
        return cls(name, remote_class.options(name=name, namespace=NAMESPACE).remote(*args))

    @property
    def handle(self) -> Any:
        if self._handle is None:
            self._handle = ray.get_actor(self.name, namespace=NAMESPACE)
        return self._handle

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self.handle, method).remote(*args, **kwargs)
        except RayTaskError as exc:
            raise _unwrap(exc) from None

    async def call_while_restarting(self, method: str, *args: Any) -> Any:
        """``call`` for idempotent methods: retried while the actor is dead and being restarted."""
        deadline = time.monotonic() + RESTART_WAIT_S
        delay = 0.05
        while True:
            try:
                return await self.call(method, *args)
            except RayActorError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def kill(self) -> None:
        ray.kill(self.handle, no_restart=True)

    def __reduce__(self) -> Any:
        return (RayActor, (self.name,))


__all__ = ["RESTART_WAIT_S", "RayActor", "RayActorError", "current_actor_id", "ensure_ray"]
