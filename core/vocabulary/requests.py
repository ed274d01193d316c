"""What a caller asks of an agent's host: start a run, or decide a paused call.

These travel to Ray actors, so they are plain picklable dataclasses. ``AgentPort`` is how anything
(the public Agent, a supervisor delegating) reaches an agent's host without knowing where it runs.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, Self

from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.state import Cancellation, ParentLink


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
    # What ``send_tool_approval`` said beside the data (``approved=True``): resume data that answers an
    # approval must say the same, or the request contradicts itself. None from the resume methods.
    approved: bool | None = None


@dataclass(frozen=True)
class Cancel:
    """A cancel routed down a delegation, as a decision on the delegation call that leads to the run
    below being cancelled (``run_id``); see ``troupe.core.deciding.cancelling``."""

    run_id: str
    reason: str | None = None


DecisionInput = Approve | Decline | Resume | Cancel


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
    # Handed down by the parent run, which claimed it first and checked it there (``troupe.core.run.claim``
    # routing it, or ``troupe.core.deciding.handoff``): only such a decision may decide a subagent's run.
    routed: bool = False

    @property
    def decided_by(self) -> str | None:
        """The decider's name, as the audit and messages show it."""
        return self.decider.display if self.decider is not None else None


@dataclass(frozen=True)
class CancelRequest:
    """Cancel a run: ``reason`` is recorded and told (the model of a parent whose subagent's run this
    is, the audit, notification targets). With ``tool_call_id`` and ``fingerprint`` the cancel applies
    only while that call still waits with that fingerprint (what the canceller saw): against an approval
    of the same call exactly one of them wins."""

    run_id: str
    reason: str | None = None
    tool_call_id: str | None = None
    fingerprint: str | None = None
    # Who cancels (None: the process itself, through the Python API without a name), and through which
    # surface; a cancel that cascades from a parent run is the runtime's own.
    canceller: Principal | None = None
    surface: str = "python"
    # From the parent run's cancel (cascading down): not checked again, and not told to the parent.
    cascade: bool = False
    finish_reason: Literal["cancelled", "max-duration"] = "cancelled"

    @property
    def cancelled_by(self) -> str | None:
        return self.canceller.display if self.canceller is not None else None


@dataclass(frozen=True)
class CancelledRun:
    """What ``cancel_run`` answers once the cancel is durable: the run is cancelled from then on, and
    whichever host holds it stops it (in-flight work is cancelled, pending pauses are withdrawn)."""

    run_id: str
    agent_id: str
    reason: str
    cancelled_by: str | None
    cancelled_at: datetime
    # Where the run stood when it was cancelled: "running" or "suspended".
    was: str

    @classmethod
    def of(cls, run_id: str, agent_id: str, cancellation: Cancellation, was: str) -> CancelledRun:
        """The answer for ``cancellation``, as it was recorded in run ``run_id``."""
        return cls(
            run_id=run_id,
            agent_id=agent_id,
            reason=cancellation.reason,
            cancelled_by=cancellation.who,
            cancelled_at=cancellation.at,
            was=was,
        )


ChunkBatches = AsyncIterator[list[Chunk]]


class CallerPulledBatches(abc.ABC):
    """Chunk batches that whoever reads them may pull in their own task: their operation goes on
    whether or not anyone pulls (an in-process host's outbox keeps its chunks), and a pull cancelled
    midway loses nothing (the next pull gets what it would have). ``AgentStream`` reads these without a
    task of its own, which saves the hand-offs between two tasks on every batch."""

    def __aiter__(self) -> Self:
        return self

    @abc.abstractmethod
    async def __anext__(self) -> list[Chunk]:
        """The next batch; ``StopAsyncIteration`` once the operation has ended and all was read."""


class AgentPort(Protocol):
    """Opens operations on one agent. Both methods return once the operation has been accepted
    (errors such as an unknown run or a conflicting decision are raised here), then stream chunks."""

    async def start(self, request: StartRequest) -> ChunkBatches: ...

    async def decide(self, request: DecideRequest) -> ChunkBatches: ...

    async def attach(self, run_id: str) -> ChunkBatches | None:
        """Follow a run wherever it stands: its live operation, or a replay of its paused or finished
        state (recovering it first if it was orphaned). None if the run never existed."""
        ...

    async def cancel(self, request: CancelRequest) -> CancelledRun:
        """Cancel a run of this agent; returns once the cancel is durable (see ``CancelRequest``)."""
        ...


__all__ = [
    "AgentPort",
    "Approve",
    "CallerPulledBatches",
    "Cancel",
    "CancelRequest",
    "CancelledRun",
    "ChunkBatches",
    "DecideRequest",
    "DecisionInput",
    "Decline",
    "Resume",
    "StartRequest",
]
