"""A small actor for the channel tests (a module of its own, so Ray workers can import it)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from ray.exceptions import RayActorError


class Echo:
    def __init__(self) -> None:
        self.seen: list[Any] = []

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

    async def hold(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "held"

    def pid(self) -> int:
        return os.getpid()

    def seen_values(self) -> list[Any]:
        return list(self.seen)
