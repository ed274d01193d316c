"""The agent loop: model turn, tool calls, pauses, checkpoints.

``RunLoop.advance`` drives one ``ActiveRun`` from wherever its state stands until it finishes or pauses.
It never waits for a human: a pause is a checkpoint followed by the pause chunks (in that order, so a
pause is only announced once it is durable), and the operation ends there, as Mastra's stream does (no
``finish``). A decision later re-enters here; its stream goes straight on from the decided call (no
``start``), also as Mastra's does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, assert_never

from troupe.core.deciding.cancelling import out_of_time
from troupe.core.deciding.handoff import pending_delivery
from troupe.core.notifying.outbox import Event, pause_notification
from troupe.core.run.agent import DELEGATION_PREFIX, AgentSpec
from troupe.core.run.calls import Calls
from troupe.core.run.delegation import Delegation, child_run_id, delegation_tool
from troupe.core.run.flow import (
    ActiveRun,
    Continue,
    Failed,
    Finished,
    Paused,
    Plan,
    StepOutcome,
    finish_payload,
)
from troupe.core.run.in_doubt import TakeBack
from troupe.core.run.late_results import LateOutcomes
from troupe.core.run.memory import settled_length, take_unsaved
from troupe.core.run.paused import PausedRuns
from troupe.core.run.pauses import Pauses, open_pause_chunks
from troupe.core.run.settings import RunSettings
from troupe.core.run.stopping import Stopping
from troupe.core.run.turn import model_turn
from troupe.core.run.writes import Prepared, RunWriter
from troupe.core.tracing import span
from troupe.core.vocabulary.errors import (
    DecisionPendingError,
    RunTakenOverError,
    StorageError,
    ToolNameConflictError,
    TroupeError,
)
from troupe.core.vocabulary.messages import tool_message
from troupe.core.vocabulary.requests import AgentPort
from troupe.core.vocabulary.state import Cancellation, RunState, utcnow
from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, Store, ThreadAppend
from troupe.core.vocabulary.tool_threads import ToolThreads
from troupe.core.vocabulary.tools import Tool

log = logging.getLogger(__name__)


class RunLoop:
    def __init__(
        self,
        spec: AgentSpec,
        store: Store,
        ports: dict[str, AgentPort],
        settings: RunSettings,
        threads: ToolThreads | None = None,
    ) -> None:
        self.spec = spec
        self.durability = settings.durability
        clock = settings.clock
        # The state each run was paused with, for its decision to claim without a read
        # (troupe.core.run.paused).
        self.paused = PausedRuns()
        self.store = store
        self.clock = clock
        # Every write of a run goes through here, with the notifications it makes (troupe.core.run.writes).
        self.writer = RunWriter(store, settings.notifications)
        self.delegations = {
            DELEGATION_PREFIX + key: Delegation(key, sub, ports[key])
            for key, sub in spec.agents.items()
            if key in ports
        }
        self.tools: dict[str, Tool] = {**spec.tools}
        for name, delegation in self.delegations.items():
            self.tools[name] = delegation_tool(delegation)
        # Tools a host found for this agent elsewhere (an MCP server's), by source: see use_tools.
        self.sourced: dict[str, frozenset[str]] = {}
        self.tool_specs = [tool.spec(name) for name, tool in self.tools.items()]
        self.pauses = Pauses(spec.id, clock, settings.policies)
        # Outcomes of sync tools that finish after their call was given up (troupe.core.run.late_results).
        self.late = LateOutcomes(store)
        self.calls = Calls(
            spec,
            self.tools,
            self.delegations,
            self.pauses,
            threads or ToolThreads(),
            settings.policies,
            self.late,
        )
        # Runs this host was asked to stop, set before their operation's task is cancelled: the task
        # that sees the cancel ends the run (troupe.core.run.stopping) instead of dying with it.
        self.stops: dict[str, Cancellation] = {}
        # The task driving each run here (inside ``advance``), and the runs being ended: those are not
        # stopped again.
        self.driving: dict[str, asyncio.Task[Any]] = {}
        self.ending: set[str] = set()
        self.stopping = Stopping(store, self.writer, self.delegations, self._end)
        # What a host that lost a run does with the tools it ran meanwhile (troupe.core.run.in_doubt).
        self.take_back = TakeBack(store, self.writer)

    def stop(self, run_id: str, cancellation: Cancellation, *, about_to: bool = False) -> bool:
        """Stop the run if an operation here drives it: its task is cancelled and ends the run (see
        ``troupe.core.run.stopping``). False if nothing here drives it. ``about_to``: an operation here
        holds the run and is about to drive it: it stops as soon as it begins."""
        task = self.driving.get(run_id)
        if task is None or task.done():
            if about_to:
                self.stops[run_id] = cancellation
            return False
        if run_id not in self.ending and run_id not in self.stops:
            self.stops[run_id] = cancellation
            task.cancel()
        return True

    def use_tools(self, source: str, tools: dict[str, Tool]) -> None:
        """Offer ``tools`` from ``source`` (say, ``mcp:files``) from the next model turn on, in place of
        what that source offered before; a name another source offers is refused, and nothing changes.
        The table is shared with ``Calls``, so a call made by name finds the tool wherever it came from."""
        for name in tools:
            owner = self._owner_of(name, source)
            if owner is not None:
                raise ToolNameConflictError(
                    f"agent {self.spec.id!r}: tool name {name!r} is offered by {source} and by {owner}; "
                    "give one of them a prefix",
                    agent_id=self.spec.id,
                    tool_name=name,
                )
        for name in self.sourced.get(source, ()):
            del self.tools[name]
        self.tools.update(tools)
        self.sourced[source] = frozenset(tools)
        self.tool_specs = [tool.spec(name) for name, tool in self.tools.items()]

    def _owner_of(self, name: str, source: str) -> str | None:
        if name in self.spec.tools:
            return "the agent's own tools"
        if name in self.delegations:
            return "a subagent"
        return next(
            (other for other, names in self.sourced.items() if other != source and name in names), None
        )

    # ---- the loop ------------------------------------------------------------------------------------

    async def advance(
        self, run: ActiveRun, plan: Plan | None = None, start_note: dict[str, Any] | None = None
    ) -> StepOutcome:
        """Drive the run from ``plan`` until it finishes, pauses, fails or is stopped; ``start_note``
        (given for a new run or a recovery, not a decision) opens the stream with a ``start`` chunk
        carrying it."""
        run_id = run.state.run_id
        task = asyncio.current_task()
        assert task is not None
        self.driving[run_id] = task
        try:
            return await self._advance(run, plan or Plan(), start_note)
        finally:
            if self.driving.get(run_id) is task:
                del self.driving[run_id]
            self.stops.pop(run_id, None)
            self.ending.discard(run_id)

    async def _advance(self, run: ActiveRun, plan: Plan, start_note: dict[str, Any] | None) -> StepOutcome:
        state = run.state
        if start_note is not None:
            run.chunk("start", id=self.spec.id, agent_id=self.spec.id, **start_note)
        for chunk in plan.backlog:
            run.emit(chunk)
        # Opened on a cancelled run (recovered, or the canceller's), or asked to stop before it began.
        stop = state.cancel or self.stops.pop(state.run_id, None)
        if stop is not None:
            self.ending.add(state.run_id)
            if state.cancel is not None:
                return await self.stopping.end(run, stop)
            return await self.stopping.stopped(run, stop)
        deadline = _loop_time(state.duration_deadline())
        while True:
            outcome = await self._guarded_step(run, plan, deadline)
            match outcome:
                case Continue():
                    plan = Plan()
                case Finished() | Paused():
                    return outcome
                case Failed(error=error):
                    after = await self._after_failure(run, plan, error)
                    if not isinstance(after, Plan):
                        return after
                    plan = after  # the run was lost, and is this host's again: it goes on
                case _:
                    assert_never(outcome)

    async def _guarded_step(self, run: ActiveRun, plan: Plan, deadline: float | None) -> StepOutcome:
        """One step, within the run's time budget (the loop's clock ``deadline``): a stop asked of
        this host (its task cancelled) or the budget running out ends the run here."""
        state = run.state
        # One span per step this operation works on: the model turn (unless the step was already
        # planned, e.g. when a decision resumes it), then the step's tool calls.
        resumed = bool(state.calls)
        try:
            with span(
                "troupe.step", troupe__step=state.step + (0 if resumed else 1), troupe__resumed=resumed
            ):
                async with asyncio.timeout_at(deadline) as budget:
                    outcome = await self._step(run, plan)
            stop = self._swallowed_stop(run, outcome, budget)
            if stop is None:
                return outcome
            _uncancel()
        except asyncio.CancelledError:
            stop = self.stops.pop(state.run_id, None)
            if stop is None:
                raise
            _uncancel()
        except TimeoutError as exc:
            if not budget.expired():
                return Failed(exc)
            stop = _out_of_time(state)
        except Exception as exc:
            return Failed(exc)
        self.ending.add(state.run_id)
        return await self.stopping.stopped(run, stop)

    def _swallowed_stop(
        self, run: ActiveRun, outcome: StepOutcome, budget: asyncio.Timeout
    ) -> Cancellation | None:
        """A stop the step's work swallowed: a tool that catches the cancel meant to stop it (to clean
        up, say) and returns. The run was asked to stop all the same, so it ends here, before its next
        model turn, rather than going on after its cancel was durable. (A finish or a pause is written
        with a compare-and-set that a recorded cancel fails: that ends the run the usual way.)"""
        if not isinstance(outcome, Continue):
            return None
        stop = self.stops.pop(run.state.run_id, None)
        if stop is None and budget.expired():
            stop = _out_of_time(run.state)
        return stop

    async def _after_failure(self, run: ActiveRun, plan: Plan, error: Exception) -> StepOutcome | Plan:
        """A step failed: because the run was cancelled meanwhile (it ends), or lost to another host
        while tools ran here and taken back (the plan to go on with), or for good (it fails)."""
        run_id = run.state.run_id
        self.ending.add(run_id)  # what is left of this operation is not stopped
        cancelled = await self.stopping.cancelled_meanwhile(run, error)
        if cancelled is not None:
            return await self.stopping.stopped(run, cancelled)
        back = await self.take_back.after_loss(run, error)
        if isinstance(back, Plan):
            self.ending.discard(run_id)
            return back
        failure = back or error
        if not isinstance(failure, TroupeError):
            log.error("run %s failed", run_id, exc_info=failure)
        await self.fail(run, failure, plan.audit)
        return Failed(failure)

    async def _step(self, run: ActiveRun, plan: Plan) -> StepOutcome:
        """Drive one step: the model's turn unless ``plan`` resumes a step, then the step's calls."""
        state = run.state
        if not state.calls:
            turn = await model_turn(self.spec, self.tool_specs, run)
            if not turn.calls:
                self._step_finish(run, turn.finish_reason, turn.text)
                await self.finish(run, turn.finish_reason)
                return Finished(turn.finish_reason)
            plan = Plan(calls=await self.calls.plan(run, turn.calls))
            if plan.calls:
                # Calls about to run are marked running in the store first: a crash mid-tool must be
                # seen as an interrupted call, never silently re-run. (If nothing runs, the pause or
                # the end of the step checkpoints the plan anyway.)
                await self.checkpoint(run)
        consumed = await self.calls.execute(run, plan)
        if state.paused_calls():
            return await self._suspend(run, plan.audit, consumed)
        self._close_step(run)
        if state.step >= state.max_steps:
            # The model wanted more steps than the run allows: it ends here, and says why.
            await self.finish(run, "max-steps", plan.audit)
            return Finished("max-steps")
        if self.durability == "sync" or plan.audit or consumed:
            # (Audit entries and consumed subagent records are never left waiting for a later write.)
            # Sent ahead: the model's next turn does not wait for it, whatever comes after it does.
            await self.checkpoint(run, audit=plan.audit, consumed=consumed, ahead=True)
        return Continue()

    async def checkpoint(
        self,
        run: ActiveRun,
        thread: ThreadAppend | None = None,
        events: Sequence[Event] = (),
        *,
        audit: tuple[AuditEntry, ...] = (),
        consumed: Sequence[str] = (),
        ahead: bool = False,
    ) -> None:
        """Write the run (with ``audit``), then delete the ``consumed`` subagent runs it now records.
        ``ahead``: send the write and go on without waiting for it (see ``ActiveRun.send_ahead``). Either
        way the state is serialized here, once, as it is now (``RunWriter.prepare``): the run can change
        meanwhile."""
        await run.wait_ahead()
        run.state.updated_at = utcnow()
        write = self._write(run, self.writer.prepare(run.state, audit, events), thread, audit, consumed)
        if ahead:
            run.send_ahead(write)
        else:
            run.version = await write

    async def _write(
        self,
        run: ActiveRun,
        prepared: Prepared,
        thread: ThreadAppend | None,
        audit: tuple[AuditEntry, ...],
        consumed: Sequence[str],
    ) -> int:
        version = await self.writer.write(prepared, expected_version=run.version, audit=audit, thread=thread)
        run.ran.clear()  # their results are in the run now
        for child in consumed:
            await self.store.delete_run(child)
            run.deleted_children.add(child)
        return version

    async def finish(self, run: ActiveRun, reason: str, audit: tuple[AuditEntry, ...] = ()) -> None:
        text = _final_text(run.state)
        # The run's conversation (OpenAI chat format), as Mastra's finish carries its messages; taken
        # before _end, which clears a subagent's.
        messages = list(run.state.messages)
        await self._end(run, {"finish_reason": reason, "text": text}, audit)
        run.chunk("finish", **finish_payload(run.state, reason, text), messages=messages)

    def _step_finish(self, run: ActiveRun, reason: str, text: str) -> None:
        state = run.state
        continued = reason == "tool-calls"
        run.chunk("step-finish", step=state.step, **finish_payload(state, reason, text, continued))

    async def _end(self, run: ActiveRun, outcome: dict[str, Any], audit: tuple[AuditEntry, ...]) -> None:
        """A top-level run's snapshot goes (its last messages join its thread in the same write). A
        subagent's run keeps a small finished record until its parent has checkpointed the outcome, so a
        parent recovering from a crash can still collect it. ``audit`` is written first."""
        state = run.state
        await run.wait_ahead()
        # Every subagent record this run consumed goes first (also any a crash kept from being deleted),
        # but not one this operation deleted already: that would be a round trip to the store for nothing.
        for child in self._children_of(state):
            if child not in run.deleted_children:
                await self.store.delete_run(child)
        if state.parent is None:
            if audit:
                await self.checkpoint(run, audit=audit)
            thread = take_unsaved(self.spec.memory, state, upto=len(state.messages))
            if run.version:
                await self.store.delete_run(state.run_id, expected_version=run.version, thread=thread)
            elif thread is not None:
                # Never stored (it ended before its first checkpoint): only its messages are kept.
                await self.store.append_messages(thread.thread_id, thread.resource_id, thread.messages)
        else:
            state.status, state.outcome, state.calls = "finished", outcome, []
            state.messages = []
            await self.checkpoint(run, audit=audit)

    def _children_of(self, state: RunState) -> list[str]:
        """Run ids of the subagent runs this run delegated to (derived from its conversation)."""
        return [
            child_run_id(state.run_id, call["id"])
            for message in state.messages
            if message.get("role") == "assistant"
            for call in message.get("tool_calls") or ()
            if call["function"]["name"] in self.delegations
        ]

    async def fail(self, run: ActiveRun, error: BaseException, audit: tuple[AuditEntry, ...] = ()) -> None:
        """Report a run that cannot go on (``audit``: what its last step had yet to write).

        A model or tool-infrastructure failure ends the run, so its snapshot goes. A storage failure leaves
        the last durable checkpoint as it is, for recovery once storage is back.
        """
        error = pending_delivery(run.state, self.delegations, error)
        if isinstance(error, TroupeError):
            info = error.to_dict()
        else:
            info = {"code": "AGENT_RUN_FAILED", "message": f"{type(error).__name__}: {error}", "details": {}}
        if not isinstance(error, StorageError | DecisionPendingError | RunTakenOverError):
            try:
                await self._end(run, {"finish_reason": "error", "error": info}, audit)
            except StorageError:
                log.warning("could not end the snapshot of failed run %s", run.state.run_id, exc_info=True)
            except StaleSnapshotError:
                log.warning("failed run %s was changed elsewhere; left as it is", run.state.run_id)
        run.chunk("error", error=info)
        run.chunk("finish", **finish_payload(run.state, "error", ""))

    # ---- closing a step ------------------------------------------------------------------------------

    def _close_step(self, run: ActiveRun) -> None:
        """Every call is resolved: results go to the model in the order the calls were made."""
        state = run.state
        state.messages.extend(tool_message(c.tool_call_id, c.output) for c in state.calls)
        state.calls = []
        self._step_finish(run, "tool-calls", _final_text(state))

    async def _suspend(
        self, run: ActiveRun, audit: tuple[AuditEntry, ...], consumed: Sequence[str]
    ) -> Paused:
        state = run.state
        state.status = "suspended"
        # Only the top-level run announces pauses to people (a subagent's pause bubbles up to it).
        announcing = state.parent is None and self.writer.notifying
        pauses = [pause_notification(state, c, p) for c, p in state.open_pauses()] if announcing else []
        thread = take_unsaved(self.spec.memory, state, upto=settled_length(state))
        await self.checkpoint(run, thread, pauses, audit=audit, consumed=consumed)
        self.paused.keep(state, run.version)  # this operation ends here: the state is not changed again
        # Durable now: announce every open pause, oldest first, so the last one is the newest.
        announced = open_pause_chunks(state)
        for chunk in announced:
            run.emit(chunk)
        return Paused(tuple(c.pause for c in announced if c.pause is not None))


def _loop_time(at: datetime | None) -> float | None:
    """The event loop's clock reading at wall-clock time ``at`` (None stays None: no deadline)."""
    if at is None:
        return None
    return asyncio.get_running_loop().time() + (at - utcnow()).total_seconds()


def _uncancel() -> None:
    """This task was cancelled to stop its run: it goes on to end the run, no longer cancelled."""
    task = asyncio.current_task()
    while task is not None and task.cancelling():
        task.uncancel()


def _out_of_time(state: RunState) -> Cancellation:
    waiting = " (time spent waiting for people included)" if state.duration_counts_waiting else ""
    return out_of_time(f"it ran longer than its max_duration_s of {state.max_duration_s:g} s{waiting}")


def _final_text(state: RunState) -> str:
    """The run's answer: the text of its last assistant turn."""
    for message in reversed(state.messages):
        if message.get("role") == "assistant":
            return str(message.get("content") or "")
    return ""


__all__ = ["RunLoop"]
