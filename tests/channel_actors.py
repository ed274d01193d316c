"""A small actor for the channel tests (a module of its own, so Ray workers can import it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any

from ray.exceptions import RayActorError


class Echo:
    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.holding = False
        self._released = asyncio.Event()

    async def echo(self, value: Any, delay: float = 0.0) -> Any:
        await asyncio.sleep(delay)
        self.seen.append(value)
        return value

    async def apply(self, func: Callable[[int], int], value: int) -> int:
        return func(value)

    async def fail(self, kind: str) -> None:
        if kind == "value":
            raise ValueError("bad value")
        raise RayActorError(error_msg="a subagent's actor died")

    async def hold(self, seconds: float = 60.0) -> str:
        """Occupy the caller's slot until ``release`` (or ``seconds``)."""
        self.holding = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._released.wait(), seconds)
        return "held"

    def is_holding(self) -> bool:
        return self.holding

    def release(self) -> None:
        self._released.set()

    def pid(self) -> int:
        return os.getpid()

    def seen_values(self) -> list[Any]:
        return list(self.seen)
