"""Conversation memory: threads of messages kept in the runtime's store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import ThreadAppend


@dataclass(frozen=True)
class Memory:
    """Give an agent memory: runs with a ``thread_id`` see that thread's earlier messages.

    ``last_messages`` caps how many earlier messages a run is given (None: all of them).
    """

    last_messages: int | None = None

    def __post_init__(self) -> None:
        if self.last_messages is not None and self.last_messages < 0:
            raise ValueError("last_messages must be >= 0")


def trim_history(messages: list[dict[str, Any]], last: int | None) -> list[dict[str, Any]]:
    """The thread's last ``last`` messages, starting at a user message so that no tool result is cut
    off from the assistant turn that asked for it."""
    kept = messages if last is None else messages[len(messages) - last :] if last else []
    start = next((i for i, m in enumerate(kept) if m.get("role") == "user"), len(kept))
    return kept[start:]


def settled_length(state: RunState) -> int:
    """How many of the run's messages form a complete conversation: while a step waits, its assistant
    turn (tool calls without results yet) is not, and a later run on the thread must not see it."""
    return len(state.messages) - 1 if state.calls else len(state.messages)


def take_unsaved(memory: Memory | None, state: RunState, *, upto: int) -> ThreadAppend | None:
    """The run's messages not yet in its thread, up to ``upto``, marked as saved in ``state``: the caller
    writes both in one atomic store write (so a crash cannot save them twice, or lose them)."""
    if memory is None or state.thread_id is None or state.parent is not None:
        return None
    new = state.messages[state.memory_saved : upto]
    if not new:
        return None
    state.memory_saved = upto
    return ThreadAppend(state.thread_id, state.resource_id, new)


__all__ = ["Memory", "settled_length", "take_unsaved", "trim_history"]
