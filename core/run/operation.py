"""An accepted operation on a run (a start, a decision, an expiry, a recovery), ready to execute.

The engine opens it (``troupe.core.run.engine``) holding the run's lock and a ``Plan``; executing it hands
both to the loop, streams chunks through ``emit`` and releases the run at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from troupe.core.run.flow import ActiveRun, Plan, StepOutcome
from troupe.core.run.loop import RunLoop
from troupe.core.run.recovery import replay
from troupe.core.tracing import carrier, span
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import TroupeError
from troupe.core.vocabulary.state import RunState


class Operation:
    """Executing it always ends the stream with a ``finish`` chunk (``finish_reason="error"`` after an
    ``error`` chunk) or at the run's pause chunks, and releases the run."""

    def __init__(
        self,
        loop: RunLoop,
        run: ActiveRun,
        release: Callable[[], None],
        plan: Plan | None = None,
        start_note: dict[str, Any] | None = None,
        kind: str = "start",
        caller: dict[str, str] | None = None,
    ) -> None:
        self.run_id = run.state.run_id
        self._loop = loop
        self._run = run
        self._release = release
        self._plan = plan or Plan()
        # A new run's stream opens with a start chunk; a decision's goes straight on (as Mastra's do).
        self.start_note = start_note if start_note is not None or kind != "start" else {}
        self._kind = kind
        self._caller = caller
        # Set when the caller's decision was refused but the run still has to move on: the host runs the
        # operation with nobody reading and raises this to the caller.
        self.refusal: TroupeError | None = None
        # How the run's last step ended, once executed (None for an operation that drives nothing).
        self.outcome: StepOutcome | None = None

    def open_with(self, *chunks: Chunk) -> None:
        """Chunks the stream opens with (after its ``start``), before anything the plan does."""
        self._plan = replace(self._plan, backlog=(*chunks, *self._plan.backlog))

    async def execute(self, emit: Callable[[Chunk], None]) -> None:
        """Drive the run; ``outcome`` then says how it ended."""
        run, state = self._run, self._run.state
        run.emit = emit
        # The run's first operation starts under the caller's span; every later one continues the run's
        # own trace, whatever process it runs in and however long after.
        with span(
            "troupe.run",
            parent=state.trace or self._caller,
            troupe__run_id=state.run_id,
            troupe__agent_id=state.agent_id,
            troupe__operation=self._kind,
        ):
            if state.trace is None:
                state.trace = carrier()
            try:
                self.outcome = await self._loop.advance(run, self._plan, self.start_note)
            finally:
                self._release()


class Recorded(Operation):
    """A decision that only counted towards a quorum: its stream tells where the run stands (still
    paused, with the same pauses), and nothing else happens."""

    def __init__(
        self, loop: RunLoop, state: RunState, release: Callable[[], None], caller: dict[str, str] | None
    ) -> None:
        super().__init__(loop, ActiveRun(state, 0, True), release, kind="approval-recorded", caller=caller)
        self._state = state

    async def execute(self, emit: Callable[[Chunk], None]) -> None:
        try:
            for chunk in replay(self._loop.spec.id, self._state):
                emit(chunk)
        finally:
            self._release()


__all__ = ["Operation", "Recorded"]
