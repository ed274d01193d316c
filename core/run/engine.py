"""The run engine of one agent: opens operations (start a run, decide a paused call) and executes them.

An operation is opened in two phases. ``begin_*`` does everything that can fail because of the caller
(unknown run, wrong call, conflicting or invalid decision) and, for a decision, claims it with a
compare-and-set in the store (``troupe.core.run.claim``). Only then is the operation handed back,
with the ``Plan`` the loop starts from, to be executed, streaming chunks through a sink. A per-run lock
serialises operations on one run inside this process; the store's compare-and-set keeps other processes
honest.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, Literal

from troupe.core.deciding import decision_log
from troupe.core.deciding.cancelling import OUT_OF_TIME, cancelled_error
from troupe.core.notifying.outbox import interrupted_event
from troupe.core.run.agent import AgentSpec
from troupe.core.run.auto_resume import extract_resume_data, find_resumable
from troupe.core.run.cancels import CancelRecorded, Cancels
from troupe.core.run.claim import Claims, ContinuedElsewhere, QuorumPending
from troupe.core.run.flow import ActiveRun, Plan
from troupe.core.run.in_doubt import fence
from troupe.core.run.locks import RunLocks
from troupe.core.run.loop import RunLoop
from troupe.core.run.memory import trim_history
from troupe.core.run.operation import Operation, Recorded
from troupe.core.run.recovery import Doubt, prepare_recovery, replay
from troupe.core.run.settings import RunSettings
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DecisionRejectedError,
    RunNotCancellableError,
    SnapshotNotFoundError,
    ThreadAccessError,
    ToolCallNotSuspendedError,
)
from troupe.core.vocabulary.identity import Principal, starter_fields
from troupe.core.vocabulary.messages import last_user_text, normalize_messages
from troupe.core.vocabulary.options import RunOptions, RunPolicy
from troupe.core.vocabulary.requests import (
    AgentPort,
    Cancel,
    CancelRequest,
    DecideRequest,
    Decline,
    Resume,
    StartRequest,
)
from troupe.core.vocabulary.run_record import RunRecord
from troupe.core.vocabulary.state import UNREADABLE, CallStatus, RunState
from troupe.core.vocabulary.store import StaleSnapshotError, Store, ThreadAppend
from troupe.core.vocabulary.tool_threads import ToolThreads

log = logging.getLogger(__name__)


class RunEngine:
    def __init__(
        self,
        spec: AgentSpec,
        store: Store,
        ports: dict[str, AgentPort] | None = None,
        owner: str | None = None,
        settings: RunSettings | None = None,
        threads: ToolThreads | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        settings = settings or RunSettings()
        self.settings = settings
        self.loop = RunLoop(spec, store, ports or {}, settings, threads)
        self.locks = RunLocks()
        # Who drives the runs this engine works on (its host's identity; see RunState.owner).
        self.owner = owner or f"engine:{uuid.uuid4().hex}"
        self.claims = Claims(self.loop, self.owner, settings.policies, self._resumed_policy)
        self.cancels = Cancels(self.loop, self.owner, settings.policies)
        self._unreadable: set[str] = set()  # runs whose overdue pause could not be read (said so once)

    # ---- starting a run -----------------------------------------------------------------------------

    async def begin_start(self, request: StartRequest) -> Operation:
        options = RunOptions.merge(_trusted(request), self.spec.default_options)
        messages = normalize_messages(request.messages)
        memory = self.spec.memory
        if memory is not None and options.thread_id is not None:
            await self._check_thread(options.thread_id, options.resource_id)
        if memory is not None and options.thread_id is not None and options.auto_resume_suspended_tools:
            resumed = await self._auto_resume(options, messages)
            if resumed is not None:
                return resumed
        history: list[dict[str, Any]] = []
        if memory is not None and options.thread_id is not None:
            history = trim_history(await self.store.load_messages(options.thread_id), memory.last_messages)
        state = self._new_state(request, options, history, messages)
        run = ActiveRun(state, 0, options.require_tool_approval)
        release = await self.locks.acquire(state.run_id)
        try:
            first_write = self._first_write(request, options)
            if first_write == "now":
                run.version = await self.store.create_run(state)
            elif first_write == "ahead":
                run.send_ahead(self.store.create_run(RunRecord.of(state)))
        except BaseException:
            release()
            raise
        return Operation(self.loop, run, release, caller=request.trace)

    def _new_state(
        self,
        request: StartRequest,
        options: RunOptions,
        history: list[dict[str, Any]],
        messages: list[dict[str, Any]],
    ) -> RunState:
        return RunState(
            run_id=options.run_id or str(uuid.uuid4()),
            agent_id=self.spec.id,
            thread_id=options.thread_id,
            resource_id=options.resource_id,
            request_context=options.request_context,
            messages=history + messages,
            memory_saved=len(history),
            max_steps=options.max_steps,
            approval=self._storable_policy(request, options.require_tool_approval),
            auto_resume=options.auto_resume_suspended_tools,
            approval_timeout=options.approval_timeout,
            max_duration_s=options.max_duration_s,
            duration_counts_waiting=options.duration_counts_waiting,
            **starter_fields(options.started_by),
            parent=request.parent,
            owner=self.owner,
        )

    def _first_write(self, request: StartRequest, options: RunOptions) -> Literal["now", "ahead", "later"]:
        """When a new run is first stored. An id the caller chose is stored now, so one already taken is
        refused before anything runs; a subagent's run too, so its parent, recovering, can find it by its
        id. A run under an id generated here: with durability="sync", its write is sent ahead (the first
        model turn does not wait for it; its first tool call does), so a crash during that turn leaves a
        run to recover; with "exit", it is stored by its first checkpoint (before any tool runs, with its
        first pause, or at its end): until then nothing outside has happened but model turns, and a
        crash loses only a run its caller sees fail."""
        generated = (options.run_id is None or request.generated_run_id) and request.parent is None
        if not generated:
            return "now"
        return "ahead" if self.loop.durability == "sync" else "later"

    async def _check_thread(self, thread_id: str, resource_id: str | None) -> None:
        """A thread's history is read only by runs of the resource it belongs to."""
        owner = await self.store.thread_resource(thread_id)
        if owner is not None and owner != (resource_id or ""):
            raise ThreadAccessError(
                f"thread {thread_id!r} belongs to another resource; a run for resource {resource_id!r} "
                "cannot use it",
                thread_id=thread_id,
            )

    async def _auto_resume(self, options: RunOptions, messages: list[dict[str, Any]]) -> Operation | None:
        """If a tool on this thread waits for data, let this message answer it
        (troupe.core.run.auto_resume)."""
        assert options.thread_id is not None
        found = await find_resumable(self.store, self.spec.id, options.thread_id, options.resource_id)
        if found is None:
            return None
        state, call, pause = found
        data = await extract_resume_data(self.spec.model, pause, last_user_text(messages))
        if data is None:
            return None
        request = DecideRequest(
            run_id=state.run_id,
            decision=Resume(data),
            tool_call_id=call.tool_call_id,
            fingerprint=pause.fingerprint,
            decider=Principal.system("auto-resume"),
            surface="system",
        )
        # The answer joins the thread's conversation (with the claim, atomically), where the paused run's
        # turns will follow it.
        said = ThreadAppend(options.thread_id, options.resource_id, messages)
        try:
            operation = await self.begin_decision(request, thread=said)
        except (DecisionRejectedError, DecisionConflictError, ToolCallNotSuspendedError):
            return None  # not an answer after all (or answered meanwhile): a new run takes the message
        operation.start_note = {"auto_resumed": True}  # the caller asked for a stream: it opens as one
        # As Mastra's does: a step, and the call the answer resumes, before that call's result.
        step = Chunk("step-start", state.run_id, {"step": state.step})
        args = {"tool_call_id": call.tool_call_id, "tool_name": call.tool_name, "args": call.effective_args}
        operation.open_with(step, Chunk("tool-call", state.run_id, args))
        return operation

    def _storable_policy(self, request: StartRequest, policy: RunPolicy) -> Any:
        if isinstance(policy, bool):
            return "on" if policy else "off"
        if "require_tool_approval" not in request.options_given:
            return "agent-default"
        return "on"  # a per-call function cannot be stored: a resumed run gates every call (fail-safe)

    def _resumed_policy(self, state: RunState) -> RunPolicy:
        if state.approval == "agent-default":
            policy: RunPolicy = self.spec.default_options.get("require_tool_approval", True)
            return policy
        return state.approval == "on"

    # ---- deciding a paused call ---------------------------------------------------------------------

    async def begin_decision(self, request: DecideRequest, thread: ThreadAppend | None = None) -> Operation:
        """Accept a decision. If it turns out the call was decided before and the run must catch up with
        its subagent, the returned operation carries that error as ``refusal``: run it, then raise."""
        release = await self.locks.acquire(request.run_id)
        cancel = request.decision
        if isinstance(cancel, Cancel) and cancel.run_id == request.run_id:
            return await self._cancelled_here(request, cancel, release)
        try:
            run, plan = await self.claims.claim(request, thread=thread)
        except QuorumPending as pending:
            return Recorded(self.loop, pending.state, release, caller=request.trace)
        except ContinuedElsewhere as moved:
            operation = Operation(
                self.loop, moved.run, release, moved.plan, kind="decision", caller=request.trace
            )
            operation.refusal = moved.error
            return operation
        except BaseException:
            release()
            raise
        return Operation(self.loop, run, release, plan, kind="decision", caller=request.trace)

    async def begin_expiry(self, run_id: str) -> Operation | None:
        """Decline the run's most overdue pause because its time ran out (the model is told so).
        None if nothing in the run is overdue any more."""
        try:
            return await self._begin_expiry(run_id)
        except _SETTLED_MEANWHILE:
            # Decided, cancelled or ended elsewhere (another process) after this host read the run and
            # before its claim landed: nothing in it is overdue any more. That is no error of the sweep,
            # which would otherwise leave the runs listed after this one waiting for its next round.
            return None

    async def _begin_expiry(self, run_id: str) -> Operation | None:
        release = await self.locks.acquire(run_id)
        try:
            try:
                stored = await self.store.load_run(run_id)
            except UNREADABLE as exc:  # not this Troupe's to decline: the sweep goes on to the next run
                if run_id not in self._unreadable:  # said once, not at every sweep
                    self._unreadable.add(run_id)
                    log.error("run %s cannot be read, so its overdue pause is not declined: %s", run_id, exc)
                release()
                return None
            now = self.loop.clock()
            # A run in flight (decided meanwhile elsewhere) is not declined under its host: the sweep
            # finds it again if it pauses with the deadline still passed.
            due = (
                []
                if stored is None or stored.state.parent is not None or stored.state.status != "suspended"
                else [
                    (pause.expires_at, call, pause)
                    for call, pause in stored.state.open_pauses()
                    if pause.expires_at is not None and pause.expires_at <= now
                ]
            )
            if not due:
                release()
                return None
            end = stored.state.duration_deadline() if stored is not None else None
            # Read on the same clock as the pauses' deadlines above: a pause due because the run's
            # time ran out must stop the run, never be declined as if a person had not answered.
            if stored is not None and end is not None and end <= now:
                # Its max_duration_s, waiting included, ran out: the run is stopped, not the pause declined.
                return await self._cancel_under_lock(_out_of_time(stored.state), release)
            deadline, call, pause = min(due, key=lambda item: item[0])
            reason = f"No decision was made in time: the request expired at {deadline.isoformat()}"
            request = DecideRequest(
                run_id=run_id,
                decision=Decline(reason),
                tool_call_id=call.tool_call_id,
                fingerprint=pause.fingerprint,
                decider=Principal.system("expiry"),
                surface="system",
            )
            run, plan = await self.claims.claim(request, expiring=True)
        except BaseException:
            release()
            raise
        return Operation(self.loop, run, release, plan, kind="expiry")

    # ---- cancelling a run ----------------------------------------------------------------------------

    async def cancel(self, request: CancelRequest) -> CancelRecorded:
        """Record a cancel in the run, durably (``troupe.core.run.cancels``); the caller then stops
        the run if this host drives it, or ends it here if this host took it (``CancelRecorded.taken``)."""
        return await self.cancels.cancel(request)

    async def _cancelled_here(
        self, request: DecideRequest, cancel: Cancel, release: Callable[[], None]
    ) -> Operation:
        """A cancel routed down a delegation has reached the run it cancels (held under ``release``):
        record it here and end the run on the stream the parent follows, which tells the parent's model."""
        here = CancelRequest(
            run_id=request.run_id,
            reason=cancel.reason,
            canceller=request.decider,
            surface=request.surface,
            cascade=True,
        )
        return await self._cancel_under_lock(here, release)

    async def _cancel_under_lock(self, request: CancelRequest, release: Callable[[], None]) -> Operation:
        """Record ``request`` in a paused run held under ``release``; the operation that ends it."""
        try:
            recorded = await self.cancels.cancel(request)
            stored = await self.store.load_run(request.run_id)
        except BaseException:
            release()
            raise
        if stored is None or not recorded.taken:  # ended already, or a live host drives it and ends it
            release()
            raise cancelled_error(request.run_id, recorded.cancellation, "it is cancelled once")
        run = ActiveRun(stored.state, stored.version, self._resumed_policy(stored.state))
        return Operation(self.loop, run, release, kind="cancel")

    async def begin_ending(self, run_id: str) -> Operation | None:
        """An operation that ends the cancelled run this host holds (``troupe.core.run.stopping``);
        None if it is not cancelled, not this host's, or over already."""
        release = await self.locks.acquire(run_id)
        try:
            stored = await self.store.load_run(run_id)
        except BaseException:
            release()
            raise
        if stored is None or stored.state.cancel is None or stored.state.owner != self.owner:
            release()
            return None
        run = ActiveRun(stored.state, stored.version, self._resumed_policy(stored.state))
        return Operation(self.loop, run, release, kind="cancel")

    # ---- recovering an orphaned run ------------------------------------------------------------------

    async def begin_recovery(self, run_id: str, expected_owner: str | None) -> Operation | None:
        """Take over a run left ``running`` by ``expected_owner`` (a dead host, or this one before a
        restart). None if the run has moved on or someone else took it first."""
        release = await self.locks.acquire(run_id)
        try:
            stored = await self.store.load_run(run_id)
            if stored is None or stored.state.status != "running" or stored.state.owner != expected_owner:
                release()
                return None
            # Tools this host ran in the run and whose outcomes the store failed to take: recorded now,
            # so the calls take them below rather than go back to a person as interrupted.
            await self.loop.take_back.record_kept(run_id)
            state = stored.state
            state.owner = self.owner
            run = ActiveRun(state, stored.version, self._resumed_policy(state))
            # A cancelled run is only ended (the operation sees its cancel), never resumed.
            running = [
                c.tool_call_id for c in state.calls if c.status is CallStatus.RUNNING and state.cancel is None
            ]
            loop = self.loop
            # Its last owner may have finished a tool after all, and recorded it (late_results).
            audit = await self.store.list_audit(run_id) if running else []
            plan = (
                Plan()
                if state.cancel is not None
                else prepare_recovery(
                    state,
                    loop.tools,
                    loop.delegations,
                    loop.pauses,
                    audit,
                    self._doubt(expected_owner, state),
                )
            )
            completed = {n.payload["tool_call_id"] for n in plan.backlog if "completed_at" in n.payload}
            cut = [
                c
                for c in state.calls
                if c.tool_call_id in running and c.status is not CallStatus.RUNNING
                if c.tool_call_id not in completed
            ]
            try:
                run.version = await self.loop.writer.save(
                    state, expected_version=stored.version, events=[interrupted_event(state, c) for c in cut]
                )
            except StaleSnapshotError:
                release()
                return None
        except BaseException:
            release()
            raise
        interrupted = [c.tool_call_id for c in state.calls if c.pauses and c.pauses[0].interrupted]
        interrupted += [n.payload["tool_call_id"] for n in plan.backlog if n.payload.get("interrupted")]
        decision_log.recovered(run_id, state.agent_id, interrupted, self.owner, expected_owner)
        start_note = {"recovered": True, "interrupted_tool_calls": interrupted}
        return Operation(self.loop, run, release, plan, start_note, kind="recovery")

    async def record_kept(self) -> None:
        """Record the outcomes of tools that completed here while the store failed (kept since by
        ``TakeBack``), each run under its lock; raises what the store raises. A run held here is left
        for now: whatever holds it (its recovery records them) may hold it long, and the heartbeat that
        calls this must not wait."""
        for run_id in list(self.loop.take_back.kept):
            if self.locks.held(run_id):
                continue
            release = await self.locks.acquire(run_id)  # free: taken at once
            try:
                await self.loop.take_back.record_kept(run_id)
            finally:
                release()

    def _doubt(self, owner: str | None, state: RunState) -> Doubt | None:
        """How calls taken over from ``owner`` are marked in doubt (None: ``owner`` is this host, whose
        earlier process, which ran them, is gone: nothing can still be running)."""
        if owner == self.owner:
            return None
        settings = self.settings
        seen = state.updated_at  # before this takeover's write changes it
        return lambda call, tool: fence(
            call, tool, owner, seen, settings.in_doubt_default_s, settings.in_doubt_margin_s
        )

    async def describe(self, run_id: str) -> list[Chunk] | None:
        """Chunks telling where a run that is not in flight here stands
        (``troupe.core.run.recovery.replay``)."""
        stored = await self.store.load_run(run_id)
        return None if stored is None else replay(self.spec.id, stored.state)

    def is_busy(self, run_id: str) -> bool:
        return self.locks.held(run_id)


# What an expiry's claim (or its stop of a run out of time) meets when the run was decided, cancelled or
# ended elsewhere since the sweep read it.
_SETTLED_MEANWHILE = (
    DecisionConflictError,
    ToolCallNotSuspendedError,
    SnapshotNotFoundError,
    RunNotCancellableError,
)


def _out_of_time(state: RunState) -> CancelRequest:
    """The stop of a paused run whose ``max_duration_s`` (waiting included) ran out."""
    return CancelRequest(
        run_id=state.run_id,
        reason=f"it ran longer than its max_duration_s of {state.max_duration_s:g} s (time spent waiting "
        "for people included)",
        canceller=OUT_OF_TIME,
        surface="system",
        cascade=True,
        finish_reason="max-duration",
    )


def _trusted(request: StartRequest) -> dict[str, Any]:
    """The options to merge over the agent's defaults. A remote caller's may turn approval on, never
    off: omitting it leaves what the agent's default_options say."""
    given = dict(request.options_given)
    if request.remote and given.get("require_tool_approval") is not True:
        given.pop("require_tool_approval", None)
    return given


# Operation and RunLocks live in their own modules; their names stay importable from here.
__all__ = ["Operation", "RunEngine", "RunLocks"]
