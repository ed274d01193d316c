"""Conversation memory: threads of messages kept in the runtime's store."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Memory:
    """Give an agent memory: runs with a ``thread_id`` see that thread's earlier messages.

    ``last_messages`` caps how many earlier messages a run is given (None: all of them).
    """

    last_messages: int | None = None

    def __post_init__(self) -> None:
        if self.last_messages is not None and self.last_messages < 0:
            raise ValueError("last_messages must be >= 0")


__all__ = ["Memory"]
