"""How a call reaches an actor: one interface, two ways.

``RayCall`` is the plain Ray actor call, which works from anywhere in the cluster. ``ChannelClient``
(troupe.actors.channel) is the direct line to an actor on the same node. ``RayActor`` picks one per call
and the rest of Troupe never knows which: both raise what the method raised, both report a lost actor as
``RayActorError``, and both are held to the actor's ``max_concurrency`` (``limited`` below), so where an
actor is placed changes how fast a call is, never how it behaves.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any, Protocol

from ray.exceptions import RayActorError, RayTaskError
from troupe.core.vocabulary.errors import AgentUnavailableError

# Ray's own default for an async actor's max_concurrency.
DEFAULT_MAX_CONCURRENCY = 1000


class Transport(Protocol):
    closed: bool

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The method's result, or what it raised (``RayActorError``-like if the actor was lost)."""
        ...


def for_caller(error: BaseException) -> BaseException:
    """The error an actor's method raised, as its caller should see it. If that was itself the death of
    *another* actor it called (a subagent), say so as a Troupe error: a bare RayActorError would read
    as the death of the actor the caller called."""
    if isinstance(error, RayActorError):
        return AgentUnavailableError(f"an actor this agent called is unavailable: {error}")
    return error


class RayCall:
    """The plain Ray call, with Ray's ``RayTaskError`` wrapper taken off the method's own error."""

    closed = False

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return await getattr(self.handle, method).remote(*args, **kwargs)
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            raise (for_caller(cause) if isinstance(cause, BaseException) else exc) from None


def limited(actor_class: type, limit: int) -> dict[str, Callable[..., Any]]:
    """Replacements for the public async methods of ``actor_class`` that share one semaphore of
    ``limit`` slots per actor. Ray already holds its own calls to ``max_concurrency``; with the channel
    answering calls too, both transports must draw on the same slots, or a same-node caller would get
    past a limit a caller on another node is held to."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def within_limit(self: Any, *args: Any, **kwargs: Any) -> Any:
            slots = self.__dict__.get("_troupe_slots")
            if slots is None:
                slots = self.__dict__["_troupe_slots"] = asyncio.Semaphore(limit)
            async with slots:
                return await method(self, *args, **kwargs)

        return within_limit

    return {
        name: wrap(member)
        for name, member in inspect.getmembers(actor_class, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }


__all__ = ["DEFAULT_MAX_CONCURRENCY", "RayCall", "Transport", "for_caller", "limited"]
