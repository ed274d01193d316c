"""The run engine of one agent: opens operations (start a run, decide a paused call) and executes them.

An operation is opened in two phases. ``begin_*`` does everything that can fail because of the caller
(unknown run, wrong call, conflicting or invalid decision) and, for a decision, claims it with a
compare-and-set in the store. Only then is the operation handed back to be executed, streaming chunks
through a sink. A per-run lock serialises operations on one run inside this process; the store's
compare-and-set keeps other processes honest.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from troupe.core import decision_log
from troupe.core.agent import AgentSpec
from troupe.core.approvers import ApproverPolicies, ApproverPolicy, check_decider, needs_more
from troupe.core.auto_resume import extract_resume_data, find_resumable
from troupe.core.chunks import Chunk
from troupe.core.decisions import (
    Target,
    already_decided,
    apply,
    as_decision,
    audit_entry,
    check_kind,
    find_target,
)
from troupe.core.errors import (
    DecisionConflictError,
    DecisionRejectedError,
    PauseExpiredError,
    SnapshotNotFoundError,
    ThreadAccessError,
    ToolCallNotSuspendedError,
    TroupeError,
)
from troupe.core.loop import ActiveRun, RunLoop
from troupe.core.memory import trim_history
from troupe.core.messages import last_user_text, normalize_messages
from troupe.core.options import RunOptions
from troupe.core.outbox import Notifications, interrupted_event
from troupe.core.policy import RunPolicy
from troupe.core.recovery import prepare_recovery, replay
from troupe.core.requests import AgentPort, DecideRequest, Decline, Resume, StartRequest
from troupe.core.state import CallStatus, Clock, Pause, RunState, ToolCallState, utcnow
from troupe.core.store import AuditEntry, StaleSnapshotError, Store, StoredRun, ThreadAppend
from troupe.core.tools import ToolThreads
from troupe.core.tracing import carrier, record_wait, span

log = logging.getLogger(__name__)

_CLAIM_ATTEMPTS = 5


class ContinuedElsewhere(Exception):
    def __init__(self, error: TroupeError, run: ActiveRun) -> None:
        super().__init__(str(error))
        self.error = error
        self.run = run


class QuorumPending(Exception):
    """An approval was counted towards its quorum; the call still waits (the run is unchanged)."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state.run_id)
        self.state = state


class RunLocks:
    """One asyncio lock per run id, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def acquire(self, key: str) -> Callable[[], None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._forget(key)
            raise
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                lock.release()
                self._forget(key)

        return release

    def _forget(self, key: str) -> None:
        lock, users = self._locks[key]
        if users <= 1:
            del self._locks[key]
        else:
            self._locks[key] = (lock, users - 1)

    def held(self, key: str) -> bool:
        return key in self._locks

    def __len__(self) -> int:
        return len(self._locks)


class Operation:
    """An accepted operation on a run, ready to execute. Executing it always ends the stream with a
    ``finish`` chunk (``finish_reason="error"`` after an ``error`` chunk) and releases the run."""

    def __init__(
        self,
        loop: RunLoop,
        run: ActiveRun,
        release: Callable[[], None],
        backlog: list[Chunk] | None = None,
        start_note: dict[str, Any] | None = None,
        kind: str = "start",
        caller: dict[str, str] | None = None,
    ) -> None:
        self.run_id = run.state.run_id
        self._loop = loop
        self._run = run
        self._release = release
        self._backlog = backlog or []
        # A new run's stream opens with a start chunk; a decision's goes straight on (as Mastra's do).
        self.start_note = start_note if start_note is not None or kind != "start" else {}
        self._kind = kind
        self._caller = caller
        # Set when the caller's decision was refused but the run still has to move on: the host runs the
        # operation with nobody reading and raises this to the caller.
        self.refusal: TroupeError | None = None

    async def execute(self, emit: Callable[[Chunk], None]) -> None:
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
                await self._loop.advance(run, self._backlog, self.start_note)
            except Exception as exc:
                if not isinstance(exc, TroupeError):
                    log.exception("run %s failed", self.run_id)
                await self._loop.fail(run, exc)
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
            for chunk in replay(self._loop, self._state):
                emit(chunk)
        finally:
            self._release()


class RunEngine:
    def __init__(
        self,
        spec: AgentSpec,
        store: Store,
        ports: dict[str, AgentPort] | None = None,
        owner: str | None = None,
        notifications: Notifications | None = None,
        policies: ApproverPolicies | None = None,
        clock: Clock = utcnow,
        threads: ToolThreads | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.loop = RunLoop(spec, store, ports or {}, notifications, clock, threads)
        self.policies = policies
        self.locks = RunLocks()
        # Who drives the runs this engine works on (its host's identity; see RunState.owner).
        self.owner = owner or f"engine:{uuid.uuid4().hex}"

    # ---- starting a run -----------------------------------------------------------------------------

    async def begin_start(self, request: StartRequest) -> Operation:
        options = RunOptions.merge(dict(request.options_given), self.spec.default_options)
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
        state = RunState(
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
            started_by=options.started_by,
            parent=request.parent,
            owner=self.owner,
        )
        release = await self.locks.acquire(state.run_id)
        try:
            # Durable from the first moment, so a crash before the first step still leaves a run to recover.
            version = await self.store.create_run(state)
        except BaseException:
            release()
            raise
        run = ActiveRun(state, version, options.require_tool_approval)
        return Operation(self.loop, run, release, caller=request.trace)

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
        """If a tool on this thread waits for data, let this message answer it (troupe.core.auto_resume)."""
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
            decided_by="auto-resume",
        )
        # The answer joins the thread's conversation (with the claim, atomically), where the paused run's
        # turns will follow it.
        said = ThreadAppend(options.thread_id, options.resource_id, messages)
        try:
            operation = await self.begin_decision(request, thread=said)
        except (DecisionRejectedError, DecisionConflictError, ToolCallNotSuspendedError):
            return None  # not an answer after all (or answered meanwhile): a new run takes the message
        operation.start_note = {"auto_resumed": True}  # the caller asked for a stream: it opens as one
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
        try:
            run, backlog = await self._claim(request, thread=thread)
        except QuorumPending as pending:
            return Recorded(self.loop, pending.state, release, caller=request.trace)
        except ContinuedElsewhere as moved:
            operation = Operation(self.loop, moved.run, release, kind="decision", caller=request.trace)
            operation.refusal = moved.error
            return operation
        except BaseException:
            release()
            raise
        return Operation(self.loop, run, release, backlog, kind="decision", caller=request.trace)

    async def begin_expiry(self, run_id: str) -> Operation | None:
        """Decline the run's most overdue pause because its time ran out (the model is told so).
        None if nothing in the run is overdue any more."""
        release = await self.locks.acquire(run_id)
        try:
            stored = await self.store.load_run(run_id)
            now = self.loop.clock()
            due = (
                []
                if stored is None or stored.state.parent is not None
                else [
                    (pause.expires_at, call, pause)
                    for call, pause in stored.state.open_pauses()
                    if pause.expires_at is not None and pause.expires_at <= now
                ]
            )
            if not due:
                release()
                return None
            deadline, call, pause = min(due, key=lambda item: item[0])
            reason = f"No decision was made in time: the request expired at {deadline.isoformat()}"
            request = DecideRequest(
                run_id=run_id,
                decision=Decline(reason),
                tool_call_id=call.tool_call_id,
                fingerprint=pause.fingerprint,
                decided_by="expiry",
            )
            run, backlog = await self._claim(request, expiring=True)
        except BaseException:
            release()
            raise
        return Operation(self.loop, run, release, backlog, kind="expiry")

    async def _claim(
        self, request: DecideRequest, expiring: bool = False, thread: ThreadAppend | None = None
    ) -> tuple[ActiveRun, list[Chunk]]:
        """Claim the decision with a compare-and-set on the run. For a delegated call this level claims
        first and the subagent second (``_route``), so a crash between the two leaves this level ahead,
        and recovery re-attaches to the subagent to find out where it really stands."""
        for _ in range(_CLAIM_ATTEMPTS):
            stored, target = await self._target(request)
            state = stored.state
            expires_at, now = target.pause.expires_at, self.loop.clock()
            if not expiring and state.parent is None and expires_at is not None and expires_at <= now:
                raise PauseExpiredError(
                    f"tool call {target.call.tool_call_id!r} of run {state.run_id} expired at "
                    f"{expires_at.isoformat()}; it is declined for lack of a decision",
                    run_id=state.run_id,
                    tool_call_id=target.call.tool_call_id,
                )
            policy = None if expiring or state.parent is not None else self._policy(target.pause)
            if policy is not None:
                try:
                    await self._check_policy(policy, stored.version, state, target, request)
                except StaleSnapshotError:
                    continue
            call = target.call
            delegated = call.tool_name in self.loop.delegations and call.child is not None
            # A delegated call is put back as it was if the subagent refuses the decision (see _route).
            before = call.model_copy(deep=True) if delegated else call
            entry = apply(state, target, request, None if delegated else self.loop.tools.get(call.tool_name))
            if expiring:
                assert call.decision is not None
                call.decision.kind = entry.kind = "expired"
            if policy is not None and policy.quorum > 1 and entry.kind == "approved":
                entry.approvals = [*target.pause.approvals, entry.decided_by or ""]
                entry.quorum = policy.quorum
            # In flight from here: a crash before the next checkpoint leaves it for recovery, not listed.
            state.status, state.owner = "running", self.owner
            try:
                # A delegated decision is audited once the subagent has accepted it (see _route).
                audit = () if delegated else (entry,)
                version = await self.loop.save(
                    state, expected_version=stored.version, audit=audit, thread=thread
                )
            except StaleSnapshotError:
                continue
            if state.parent is None:  # a nested decision is logged once, at the top, with its full path
                decision_log.decided(entry)
            record_wait(
                "troupe.approval_wait",
                target.pause.paused_at,
                state.trace,
                troupe__run_id=state.run_id,
                troupe__tool=target.pause.tool_name,
                troupe__tool_call_id=call.tool_call_id,
                troupe__decision=entry.kind,
                troupe__fingerprint=entry.fingerprint,
                troupe__decided_by=entry.decided_by,
            )
            run = ActiveRun(state, version, self._resumed_policy(state))
            if delegated:
                await self._route(run, call, before, target.pause, request, entry)
                return run, []
            if call.status is CallStatus.RUNNING:
                run.todo.append(call.tool_call_id)
                return run, []
            return run, [self.loop.decline_chunk(state.run_id, call)]
        raise StaleSnapshotError(f"run {request.run_id} kept changing while a decision was claimed; retry")

    def _policy(self, pause: Pause) -> ApproverPolicy | None:
        return None if self.policies is None else self.policies.for_pause(pause)

    async def _check_policy(
        self, policy: ApproverPolicy, version: int, state: RunState, target: Target, request: DecideRequest
    ) -> None:
        """Refuse a decider the policy does not allow (``ApprovalPolicyError``, nothing written). An
        approval short of the quorum is counted (the call keeps waiting; audited and announced in the
        same write) and ends the claim with ``QuorumPending``."""
        pause = target.pause
        # Resume data answering an approval pause counts as the approval (or decline) it stands for.
        request = replace(request, decision=as_decision(pause, target.call.tool_call_id, request.decision))
        check_decider(policy, state, pause, request)
        if not needs_more(policy, pause, request):
            return
        pause.approvals.append(request.decided_by or "")
        entry = audit_entry(
            state,
            target,
            kind="approval-recorded",
            decided_by=request.decided_by,
            approvals=list(pause.approvals),
            quorum=policy.quorum,
        )
        await self.loop.save(state, expected_version=version, audit=(entry,))
        decision_log.decided(entry)  # logged as "decision ... decision=approval-recorded"
        raise QuorumPending(state)

    async def _target(self, request: DecideRequest) -> tuple[StoredRun, Target]:
        """The run and the paused call a decision is for, or the error saying why there is none."""
        stored = await self.store.load_run(request.run_id)
        if stored is None:
            raise await self._missing(request)
        if stored.state.agent_id != self.spec.id:
            # Another agent's run: its tools, schemas and opt-ins are not this agent's to check.
            raise await self._missing(request, foreign=True)
        try:
            target = find_target(stored.state, request)
        except ToolCallNotSuspendedError as exc:
            # A call of an earlier step may have been decided already (a retry after the run moved on).
            decided = await self._decided_before(request)
            if decided is None:
                raise
            raise decided from exc
        check_kind(stored.state.run_id, target, request)
        return stored, target

    async def _route(
        self,
        run: ActiveRun,
        call: ToolCallState,
        before: ToolCallState,
        pause: Pause,
        request: DecideRequest,
        entry: AuditEntry,
    ) -> None:
        """Hand a claimed decision down to the subagent that owns the call."""
        assert call.child is not None
        delegation = self.loop.delegations[call.tool_name]
        inner = DecideRequest(
            run_id=call.child.run_id,
            decision=request.decision,
            tool_call_id=pause.inner_tool_call_id,
            fingerprint=pause.inner_fingerprint,
            decided_by=request.decided_by,
        )
        try:
            run.child_streams[call.tool_call_id] = await delegation.port.decide(inner)
        except (DecisionRejectedError, SnapshotNotFoundError):
            # Refused below before anything was written there: put this level back as it was.
            run.state.calls[run.state.calls.index(call)] = before
            run.state.status = "suspended"
            run.version = await self.store.save_run(run.state, expected_version=run.version)
            raise
        except (DecisionConflictError, ToolCallNotSuspendedError) as exc:
            # The subagent moved on already (a decision whose answer was lost to a crash): this level
            # follows it from here, and the caller hears that the call was decided before.
            run.reattach.add(call.tool_call_id)
            run.todo.append(call.tool_call_id)
            raise ContinuedElsewhere(exc, run) from exc
        except Exception:
            # The subagent could not answer (its actor died, storage failed mid-write): whether it took
            # the decision is unknown, so this level keeps its claim and follows the subagent's run
            # wherever it stands. Either way the decision is not lost: this level's claim is its durable
            # hand-off (troupe.core.handoff), which the subagent applies when its run is next followed.
            # So it is audited here, once, and at once: the run may wait a long time for its subagent.
            log.warning(
                "routing a decision to run %s failed; following it instead", inner.run_id, exc_info=True
            )
            run.version = await self.store.save_run(run.state, expected_version=run.version, audit=(entry,))
            run.reattach.add(call.tool_call_id)
            run.todo.append(call.tool_call_id)
            return
        run.pending_audit.append(entry)
        run.todo.append(call.tool_call_id)

    async def _decided_before(self, request: DecideRequest) -> DecisionConflictError | None:
        if request.tool_call_id is not None:
            for entry in await self.store.list_audit(request.run_id):
                if (
                    entry.tool_call_id == request.tool_call_id
                    and entry.agent_id == self.spec.id
                    and entry.kind != "approval-recorded"  # a quorum's count, not a decision
                ):
                    return already_decided(request.run_id, entry.tool_call_id, entry.kind, entry.decided_by)
        return None

    async def _missing(self, request: DecideRequest, foreign: bool = False) -> TroupeError:
        """No snapshot (of this agent's): say whether the call was decided already, else why there is
        nothing to resume."""
        decided = None if foreign else await self._decided_before(request)
        if decided is not None:
            return decided
        return SnapshotNotFoundError(
            f"snapshot not found for run {request.run_id} of agent {self.spec.id!r}: the run is unknown, "
            "has already finished, or was never checkpointed (is storage configured?)",
            run_id=request.run_id,
        )

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
            state = stored.state
            state.owner = self.owner
            run = ActiveRun(state, stored.version, self._resumed_policy(state))
            running = [c.tool_call_id for c in state.calls if c.status is CallStatus.RUNNING]
            notes = prepare_recovery(self.loop, run)
            cut = [c for c in state.calls if c.tool_call_id in running and c.status is not CallStatus.RUNNING]
            try:
                run.version = await self.loop.save(
                    state, expected_version=stored.version, events=[interrupted_event(state, c) for c in cut]
                )
            except StaleSnapshotError:
                release()
                return None
        except BaseException:
            release()
            raise
        interrupted = [c.tool_call_id for c in state.calls if c.pauses and c.pauses[0].interrupted]
        interrupted += [n.payload["tool_call_id"] for n in notes]
        decision_log.recovered(run_id, state.agent_id, interrupted, self.owner, expected_owner)
        start_note = {"recovered": True, "interrupted_tool_calls": interrupted}
        return Operation(self.loop, run, release, notes, start_note, kind="recovery")

    async def describe(self, run_id: str) -> list[Chunk] | None:
        """Chunks telling where a run that is not in flight here stands (``troupe.core.recovery.replay``)."""
        stored = await self.store.load_run(run_id)
        return None if stored is None else replay(self.loop, stored.state)

    def is_busy(self, run_id: str) -> bool:
        return self.locks.held(run_id)


__all__ = ["Operation", "RunEngine", "RunLocks"]
