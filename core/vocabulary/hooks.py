"""Hooks around tool calls: observe them, or block one and hand the model an output instead.

Hooks run on the agent's event loop, sync or async, unlike a sync tool (which gets a worker thread): they
are bookkeeping around every call, where a hop to a thread would cost each call more than the hook
itself. A hook that waits on I/O should be async (or hand the wait to ``asyncio.to_thread``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from troupe.core.vocabulary.tools import ToolContext


@dataclass(frozen=True)
class ToolCallOverride:
    """Returned by ``before_tool_call``: ``proceed=False`` skips the tool and gives the model ``output``."""

    proceed: bool = True
    output: Any = None


BeforeToolCall = Callable[
    [str, Any, ToolContext], "ToolCallOverride | Awaitable[ToolCallOverride | None] | None"
]
AfterToolCall = Callable[[str, Any, Any, ToolContext], "Awaitable[None] | None"]


@dataclass(frozen=True)
class Hooks:
    """``before_tool_call(tool_name, input, ctx)`` runs after approval, right before the tool;
    ``after_tool_call(tool_name, input, output, ctx)`` runs after it returned (not after a suspend)."""

    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None


__all__ = ["AfterToolCall", "BeforeToolCall", "Hooks", "ToolCallOverride"]
