"""What a caller asks of an agent's host: start a run, or decide a paused call.

These travel to Ray actors, so they are plain picklable dataclasses. ``AgentPort`` is how anything
(the public Agent, a supervisor delegating) reaches an agent's host without knowing where it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.state import ParentLink


@dataclass(frozen=True)
class StartRequest:
    messages: str | list[dict[str, Any]]
    # The options the caller gave (omitted ones absent); the agent's host merges its default_options.
    options_given: dict[str, Any] = field(default_factory=dict)
    parent: ParentLink | None = None
    # The caller's trace context (W3C traceparent), so the run's spans join the caller's trace.
    trace: dict[str, str] | None = None
    # The options' run id was generated for this start (a random uuid the caller's library made, so it
    # can follow the run up), not chosen by a person: no other run holds it.
    generated_run_id: bool = False
    # The options came from a caller the runtime does not trust (an HTTP body): they may turn approval
    # on, never off (the agent's default_options and its tools decide what is gated).
    remote: bool = False


@dataclass(frozen=True)
class Approve:
    edited_args: dict[str, Any] | None = None


@dataclass(frozen=True)
class Decline:
    reason: str | None = None


@dataclass(frozen=True)
class Resume:
    resume_data: Any = None


DecisionInput = Approve | Decline | Resume


@dataclass(frozen=True)
class DecideRequest:
    run_id: str
    decision: DecisionInput
    tool_call_id: str | None = None
    # When given, the decision applies only if the paused call still has this fingerprint.
    fingerprint: str | None = None
    # Who decides (subject, issuer, roles: what an approver policy checks) and through which surface;
    # None: nobody said, which only a call no approver policy governs accepts.
    decider: Principal | None = None
    surface: str = "python"
    trace: dict[str, str] | None = None

    @property
    def decided_by(self) -> str | None:
        """The decider's name, as the audit and messages show it."""
        return self.decider.display if self.decider is not None else None


ChunkBatches = AsyncIterator[list[Chunk]]


class AgentPort(Protocol):
    """Opens operations on one agent. Both methods return once the operation has been accepted
    (errors such as an unknown run or a conflicting decision are raised here), then stream chunks."""

    async def start(self, request: StartRequest) -> ChunkBatches: ...

    async def decide(self, request: DecideRequest) -> ChunkBatches: ...

    async def attach(self, run_id: str) -> ChunkBatches | None:
        """Follow a run wherever it stands: its live operation, or a replay of its paused or finished
        state (recovering it first if it was orphaned). None if the run never existed."""
        ...


__all__ = [
    "AgentPort",
    "Approve",
    "ChunkBatches",
    "DecideRequest",
    "DecisionInput",
    "Decline",
    "Resume",
    "StartRequest",
]
