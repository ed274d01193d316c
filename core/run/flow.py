"""The run's flow as values: the run an operation drives, the plan it starts from, and how each step
and each delegation ends.

An operation (a start, a decision, a recovery) is opened with a ``Plan``: which of the step's calls to
execute, which delegations to follow in their subagent's run, the subagent streams a routed decision
already opened, audit entries for the next checkpoint, and chunks to open the stream with. The loop
applies it and then plans each new step itself. A step ends as one of ``StepOutcome``; a delegation as
one of ``ChildOutcome``, which the loop turns into the call's result or pauses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from troupe.core.vocabulary.chunks import Chunk, PauseEvent
from troupe.core.vocabulary.model import Usage
from troupe.core.vocabulary.options import RunPolicy
from troupe.core.vocabulary.requests import ChunkBatches
from troupe.core.vocabulary.state import ChildLink, RunState, ToolCallState
from troupe.core.vocabulary.store import AuditEntry

Emit = Callable[[Chunk], None]


@dataclass
class ActiveRun:
    """A run while an operation drives it: its state, the store version it was read or written at, its
    approval policy, and where its chunks go. Lives only for that operation."""

    state: RunState
    version: int
    policy: RunPolicy
    emit: Emit = lambda chunk: None
    # Subagent runs this operation has deleted once its checkpoint recorded them: the run's end need
    # not delete them again (it still deletes every other child, e.g. one a crash kept from going).
    deleted_children: set[str] = field(default_factory=set)
    # A write sent ahead (``durability="sync"``: the start, and the checkpoint after a step's tools) that
    # the model's turn does not wait for; whatever comes next that runs, announces or ends anything
    # waits for it first (``wait_ahead``). ``version`` is the run's version once it has.
    ahead: asyncio.Future[int] | None = None
    # Calls whose tools ran in this operation, until a write holding their results is durable: if the
    # run turns out to be another host's by then, their outcome is recorded on its own (late_results).
    ran: list[ToolCallState] = field(default_factory=list)

    def chunk(self, type_: Any, **payload: Any) -> None:
        self.emit(Chunk(type_, self.state.run_id, payload))

    def send_ahead(self, write: Awaitable[int]) -> None:
        """Send ``write`` (which returns the run's new version) without waiting for it."""
        assert self.ahead is None, "one write ahead at a time: wait for the last first"
        self.ahead = asyncio.ensure_future(_behind_ready_tasks(write))
        # An operation that ends some other way (cancelled) never waits for it: its error is not lost,
        # the write was not acknowledged, and recovery reads what is durable.
        self.ahead.add_done_callback(_seen)

    async def wait_ahead(self) -> None:
        """Wait until the write sent ahead is durable; a failed one raises here, once."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            self.version = await ahead


async def _behind_ready_tasks(write: Awaitable[int]) -> int:
    """``write``, started once the tasks ready to run now have had their turn. A run's first write is
    sent ahead just before the task that drives the run is spawned: without this, the write's own work
    (the state's serialization, and SqliteStore's commit, which runs on the loop) would go first, and the
    model's first turn would wait for it after all. With it, the model's call is out first."""
    await asyncio.sleep(0)
    return await write


def _seen(write: asyncio.Future[int]) -> None:
    if not write.cancelled():
        write.exception()  # marks it retrieved; wait_ahead() still raises it


@dataclass(frozen=True)
class Plan:
    """What an operation does before the loop goes on by itself."""

    # Calls of the step to execute now (claimed: RUNNING, no output yet), in this order.
    calls: tuple[str, ...] = ()
    # Delegation calls to follow in their subagent's run rather than start one (a recovered parent, or
    # a decision the subagent took before this level heard back).
    reattach: frozenset[str] = frozenset()
    # Decided delegation calls: the subagent's stream for the decision, opened when it was routed.
    child_streams: Mapping[str, ChunkBatches] = field(default_factory=dict)
    # Audit entries written with the next checkpoint (a delegated decision, once the subagent took it).
    audit: tuple[AuditEntry, ...] = ()
    # Chunks the operation's stream opens with (a decline's outcome, calls cut short by a crash).
    backlog: tuple[Chunk, ...] = ()


# ---- how a step ends ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Continue:
    """The step's calls are all resolved and checkpointed: the next model turn follows."""


@dataclass(frozen=True)
class Finished:
    """The run ended (its last chunk is ``finish``)."""

    reason: str


@dataclass(frozen=True)
class Paused:
    """The run waits for a human; these pauses are durable and announced."""

    pauses: tuple[PauseEvent, ...]


@dataclass(frozen=True)
class Failed:
    """The step raised: the run is reported failed (``RunLoop.fail``)."""

    error: Exception


StepOutcome = Continue | Finished | Paused | Failed


def finish_payload(state: RunState, reason: str, text: str, continued: bool = False) -> dict[str, Any]:
    """A step-finish or finish payload: Troupe's ``finish_reason``/``usage`` and Mastra's
    ``step_result``/``output`` (what Mastra's clients read)."""
    usage = Usage(state.input_tokens, state.output_tokens).to_dict()
    return {
        "finish_reason": reason,
        "usage": usage,
        "step_result": {"reason": reason, "is_continued": continued},
        "output": {"text": text, "usage": usage},
    }


# ---- how a delegation ends ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChildFinished:
    """The subagent's run ended with this answer (the text of its last turn)."""

    link: ChildLink
    text: str


@dataclass(frozen=True)
class ChildFailed:
    link: ChildLink
    message: str


@dataclass(frozen=True)
class ChildPaused:
    """The subagent's run waits for a human: these pauses become the delegation call's."""

    link: ChildLink
    pauses: tuple[PauseEvent, ...]


ChildOutcome = ChildFinished | ChildFailed | ChildPaused


__all__ = [
    "ActiveRun",
    "ChildFailed",
    "ChildFinished",
    "ChildOutcome",
    "ChildPaused",
    "Continue",
    "Emit",
    "Failed",
    "Finished",
    "Paused",
    "Plan",
    "StepOutcome",
    "finish_payload",
]
