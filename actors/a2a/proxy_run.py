"""A proxy run: a remote A2A agent's task, followed for a delegation call as if it were a subagent's run.

Its record is a small ``RunState`` in the store (the ``A2AAgent``'s id, its parent's link, the prompt,
and the remote task in ``RunState.remote``), so the parent finds it by its child run id as it finds any
subagent's run, and any process can follow the task or carry a decision to it. It goes:

    running (the prompt sent; the task id recorded as soon as the remote agent names it)
      -> suspended (the task is input-required: each question is a paused call, announced as pause
         chunks, which the parent lifts and bubbles up)
      -> running (a decision claimed here, then sent to the task as a message)
      -> finished (the task's answer, or why it failed: a tool error naming the remote agent)

A decision is claimed with a compare-and-set on the record before it is sent, and never sent again: a
send that certainly never left (the connection was refused) puts the call back, paused, and the decider
hears why. Any other outcome is looked up on the task (``get``), since an error code alone does not say
whether the answer was taken: a task that moved on is followed; one that still asks the same question
after a refusal gets the call put back, and after the remote's own failure the call put back marked
interrupted (it may have acted); a send whose reply was lost is followed a while for a sign it arrived,
and if the task still asks, its question is asked again, marked interrupted, rather than sent a second
time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

from troupe.actors.a2a.connection import (
    RemoteAgent,
    RemoteFailed,
    RemoteLost,
    RemoteRefused,
    RemoteUnreachable,
)
from troupe.actors.a2a.errors import DecisionNotDeliveredError, RemoteAgentError, RemoteCardError
from troupe.actors.a2a.pending import is_pending
from troupe.actors.a2a.questions import answer_message, calls_of, prompt_of, refusal_of
from troupe.actors.a2a.remote_task import Broke, Ended, Outcome, Question, RemoteTask
from troupe.actors.host import HEARTBEAT_S
from troupe.core.deciding.cancelling import DEFAULT_REASON as DEFAULT_CANCEL_REASON
from troupe.core.deciding.cancelling import cancelled_error, outcome, record
from troupe.core.deciding.decisions import apply, as_decision, check_kind, find_target
from troupe.core.run.pauses import open_pause_chunks
from troupe.core.run.recovery import replay
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DecisionInterruptedError,
    DecisionRejectedError,
    ResumeDataValidationError,
    ToolCallNotSuspendedError,
)
from troupe.core.vocabulary.json_schemas import instance_errors
from troupe.core.vocabulary.requests import Cancel, DecideRequest, Resume
from troupe.core.vocabulary.state import Cancellation, RunState, ToolCallState, utcnow
from troupe.core.vocabulary.store import StaleSnapshotError, Store, StoredRun

log = logging.getLogger(__name__)

# Following a task by asking for it: the first wait, the longest, and how many failed asks in a row
# end the follow (a remote agent gone for good is reported, not waited for forever).
_POLL_FIRST_S = 0.1
_POLL_MAX_S = 2.0
_POLL_FAILURES = 5
# How long a task is watched for a sign that an answer whose reply was lost arrived.
_UNSURE_GRACE_S = 30.0
# Beyond the remote agent's ``timeout_s``, how long a start whose task was not named yet is waited for.
_SENDING_MARGIN_S = 5.0
# How long a cancel waits for the remote agent to take its task's cancel (the run is cancelled already).
_TELL_CANCEL_S = 10.0
# How often a proxy run followed while its remote agent is silent is looked at for a cancel recorded
# elsewhere (as often as an agent host looks at the runs it drives).
_LOOK_S = HEARTBEAT_S


class ProxyRun:
    """One proxy run as stored at ``version``; its methods drive it and yield its chunks."""

    def __init__(self, remote: RemoteAgent, store: Store, state: RunState, version: int) -> None:
        self.remote = remote
        self.store = store
        self.state = state
        self.version = version
        self.agent_id = state.agent_id

    async def save(self) -> None:
        """Write the run on the version it was read at. A write that loses because the run was cancelled
        meanwhile (``cancel``, from another coroutine or process) raises ``Stopped``."""
        try:
            self.version = await self.store.save_run(self.state, expected_version=self.version)
        except StaleSnapshotError:
            stored = await self.store.load_run(self.state.run_id)
            if stored is not None and stored.state.cancel is not None:
                raise Stopped(stored.state) from None
            raise

    async def watched(self, chunks: AsyncIterator[Chunk]) -> AsyncIterator[Chunk]:
        """``chunks``, ending the way the run ended if it is cancelled while they are read, or settled by
        another process following the same task: the parent following it is told the cancel (its
        finish), or what that process recorded, never a write that failed. A cancel recorded
        elsewhere (another process, or a remote agent that goes on working regardless) is seen at the
        run's next write, or within ``_LOOK_S`` while the remote agent is silent: what was being read
        is given up then (the remote stream closed)."""
        source = aiter(chunks)
        try:
            while True:
                try:
                    chunk = await self._next(source)
                except StopAsyncIteration:
                    return
                yield chunk
        except Stopped as stopped:
            await source.aclose()  # type: ignore[attr-defined]
            for chunk in replay(self.agent_id, stopped.state)[1:]:
                yield chunk
        except StaleSnapshotError:
            # Another process following the same task recorded where it went first (a run taken over
            # while its first host still followed it): what it recorded is what this one tells.
            stored = await self.store.load_run(self.state.run_id)
            if stored is None or stored.state.status == "running":
                raise
            await source.aclose()  # type: ignore[attr-defined]
            for chunk in replay(self.agent_id, stored.state)[1:]:
                yield chunk

    async def _next(self, source: AsyncIterator[Chunk]) -> Chunk:
        """The next chunk of ``source``; ``Stopped`` if the run is found cancelled while it waits."""
        step = asyncio.ensure_future(anext(source))
        try:
            while True:
                done, _ = await asyncio.wait({step}, timeout=_LOOK_S)
                if done:
                    return step.result()
                stored = await self.store.load_run(self.state.run_id)
                if stored is not None and stored.state.cancel is not None:
                    raise Stopped(stored.state)
        finally:
            if not step.done():
                step.cancel()
                await asyncio.wait({step})

    def _chunk(self, type_: Any, **payload: Any) -> Chunk:
        return Chunk(type_, self.state.run_id, payload)

    # ---- starting -----------------------------------------------------------------------------------

    async def begin(self) -> AsyncIterator[Chunk]:
        """Send the prompt as a new task, then follow the task until it settles."""
        yield self._chunk("start", id=self.agent_id, agent_id=self.agent_id)
        message = answer_message(self.state, None, None, prompt=prompt_of(self.state))
        async for chunk in self._follow(self.remote.send(message)):
            yield chunk

    async def _follow(self, events: AsyncIterator[Any], first: Any = None) -> AsyncIterator[Chunk]:
        """Fold the task's events (``first`` already read) until it settles, then settle the run. A
        stream that ends early, or breaks off once the task is named (a connection cut, a read that
        timed out), leaves the task going on over there: it is followed by asking for it. What else
        goes wrong with the remote agent on the way ends the run with a tool error naming it."""
        task = RemoteTask(self.remote.name, self.state.remote.task_id if self.state.remote else None)
        try:
            try:
                async with contextlib.aclosing(events):  # type: ignore[type-var]
                    async for event in _chained([first] if first is not None else [], events):
                        task.feed(event)
                        await self._note_task(task)
                        if task.settled:
                            break
            except RemoteLost as lost:
                if task.task_id is None:
                    raise
                why = lost.message
                log.info("the stream of %s broke off (%s): asking for its task", self.remote.name, why)
            if not task.settled:
                await self._poll(task)
            outcome = task.outcome()
        except RemoteAgentError as exc:
            outcome = Broke(exc.message, exc)
        async for chunk in self._settle(outcome):
            yield chunk

    async def _note_task(self, task: RemoteTask) -> None:
        """Record the task's id the moment the remote agent names it: from then on, any process can
        follow it (before that, a crash leaves a run that is reported lost, never started again)."""
        remote = self.state.remote
        if remote is not None and remote.task_id is None and task.task_id is not None:
            remote.task_id, remote.context_id = task.task_id, task.context_id
            await self.save()

    async def _poll(self, task: RemoteTask, moved: Callable[[RemoteTask], bool] | None = None) -> None:
        """Ask for the task until it settles (its stream ended early, or nothing streams it), or until
        ``moved`` says it has."""
        assert task.task_id is not None, "a task is polled only once its id is known"
        wait, failures = _POLL_FIRST_S, 0
        while not (moved(task) if moved is not None else task.settled):
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL_MAX_S)
            try:
                task.feed_task(_as_dict(await self.remote.get(task.task_id)))
                failures = 0
            except (RemoteUnreachable, RemoteLost):
                failures += 1
                if failures >= _POLL_FAILURES:
                    raise

    # ---- settling -----------------------------------------------------------------------------------

    async def _settle(self, outcome: Outcome, *, interrupted: bool = False) -> AsyncIterator[Chunk]:
        """Record how the task stands and tell it: its answer, its failure, or its question (with
        ``interrupted``: asked again after an answer that may have arrived, marked so)."""
        if isinstance(outcome, Question):
            try:
                calls = calls_of(self.state, outcome, self.remote)
            except RemoteAgentError as exc:
                outcome = Broke(exc.message, exc)
            else:
                if interrupted:
                    for call in calls:
                        call.mark_interrupted()
        match outcome:
            case Ended(text=text):
                await self._end({"finish_reason": "stop", "text": text})
                for chunk in replay(self.agent_id, self.state)[1:]:
                    yield chunk
            case Broke(why=why, error=error):
                failure = error or RemoteAgentError(f"{self.remote.name} {why}")
                async for chunk in self._fail(failure):
                    yield chunk
            case Question():
                self.state.calls, self.state.status = calls, "suspended"
                self._delivered()
                await self.save()
                for chunk in open_pause_chunks(self.state):
                    yield chunk

    async def _fail(self, error: RemoteAgentError) -> AsyncIterator[Chunk]:
        """End the run with ``error``: the parent's model sees a tool error naming the remote agent."""
        await self._end({"finish_reason": "error", "error": error.to_dict()})
        for chunk in replay(self.agent_id, self.state)[1:]:
            yield chunk

    async def _end(self, outcome: dict[str, Any]) -> None:
        state = self.state
        state.status, state.outcome, state.calls, state.messages = "finished", outcome, [], []
        self._delivered()
        await self.save()

    def _delivered(self) -> None:
        if self.state.remote is not None:
            self.state.remote.answer_id = None

    # ---- cancelling ---------------------------------------------------------------------------------

    async def cancel(self, cancellation: Cancellation, surface: str) -> None:
        """Record the cancel and end the run in one compare-and-set (``StaleSnapshotError`` if the run
        changed since it was read: read it again and retry), then ask the remote agent to cancel its
        task. The record comes first, so an acknowledged cancel is durable; the remote cancel is told
        once, and a remote agent that cannot be reached is only logged (its task is no longer followed,
        and no answer is ever sent to it again)."""
        state = self.state
        entries = record(state, cancellation, surface)
        state.status, state.outcome, state.calls, state.messages = "finished", outcome(cancellation), [], []
        self._delivered()
        self.version = await self.store.save_run(state, expected_version=self.version, audit=entries)
        task_id = state.remote.task_id if state.remote is not None else None
        if task_id is None:
            return  # the remote agent never named a task (a start lost to a crash): nothing to tell
        await self.tell_cancel(task_id)

    async def tell_cancel(self, task_id: str) -> None:
        """Ask the remote agent to cancel ``task_id``, with the run's cancel as the reason; one that
        cannot be reached, refuses or takes too long is only logged (the run stays cancelled here)."""
        state = self.state
        reason = state.cancel.reason if state.cancel is not None else None
        try:
            async with asyncio.timeout(_TELL_CANCEL_S):
                await self.remote.cancel(task_id, reason)
        except (RemoteAgentError, TimeoutError) as exc:
            why = exc.message if isinstance(exc, RemoteAgentError) else f"no answer in {_TELL_CANCEL_S:g} s"
            log.warning(
                "the cancel of run %s could not be told to %s (task %s): %s; the run is cancelled here",
                state.run_id,
                self.remote.name,
                task_id,
                why,
            )

    async def _cancelled(self, request: DecideRequest, cancel: Cancel) -> AsyncIterator[Chunk]:
        """A cancel routed down from the top run (its delegation call's pause was claimed for it):
        record it here and end the run, whose finish tells the parent."""
        who = request.decider
        cancellation = Cancellation(
            reason=cancel.reason or DEFAULT_CANCEL_REASON, by=who.identity() if who is not None else None
        )
        try:
            await self.cancel(cancellation, request.surface)
        except StaleSnapshotError:
            raise DecisionConflictError(
                f"run {self.state.run_id} changed while its cancel was recorded; retry",
                run_id=self.state.run_id,
            ) from None
        return _listed(replay(self.agent_id, self.state)[1:])

    # ---- deciding -----------------------------------------------------------------------------------

    async def answer(self, request: DecideRequest) -> AsyncIterator[Chunk]:
        """Claim ``request`` on the run and send it to the remote task. Returns once the remote agent has
        taken it (or it is known to be lost), then streams the run on; a decision that cannot be taken
        raises here, and leaves the call paused."""
        state = self.state
        if state.cancel is not None:
            raise cancelled_error(state.run_id, state.cancel, "nothing in it is decided any more")
        if isinstance(request.decision, Cancel):
            return await self._cancelled(request, request.decision)
        if state.status != "suspended" or state.remote is None or state.remote.task_id is None:
            raise ToolCallNotSuspendedError(
                f"run {state.run_id} ({self.remote.name}) has no question waiting for an answer",
                run_id=state.run_id,
            )
        target = find_target(state, request)
        check_kind(state.run_id, target, request)
        decision = as_decision(target.pause, target.call.tool_call_id, request.decision)
        if isinstance(decision, Resume) and target.pause.resume_schema is not None:
            errors = instance_errors(target.pause.resume_schema, decision.resume_data)
            if errors:
                raise ResumeDataValidationError(
                    f"the answer for {target.pause.tool_name!r} does not match the schema "
                    f"{self.remote.name} asked for: " + "; ".join(errors),
                    tool_call_id=target.call.tool_call_id,
                )
        before = [call.model_copy(deep=True) for call in state.calls]
        message = answer_message(state, target, decision)
        entry = apply(state, target, decision, request, None)
        state.status = "running"
        state.remote.answer_id = message.message_id
        try:
            self.version = await self.store.save_run(state, expected_version=self.version, audit=(entry,))
        except StaleSnapshotError:
            now = await self.store.load_run(state.run_id)
            if now is not None and now.state.cancel is not None:
                raise cancelled_error(state.run_id, now.state.cancel, "its answer was not sent") from None
            raise DecisionConflictError(
                f"tool call {target.call.tool_call_id!r} of run {state.run_id} was decided at the same "
                "time elsewhere; its answer goes to the remote agent once",
                run_id=state.run_id,
                tool_call_id=target.call.tool_call_id,
            ) from None
        try:
            return await self._sent(message, before, target.pause.fingerprint)
        except Stopped as stopped:  # cancelled after the claim; the answer did not get through
            raise cancelled_error(state.run_id, stopped.cancellation, "its answer was not taken") from None

    async def _sent(self, message: Any, before: list[ToolCallState], pause: str) -> AsyncIterator[Chunk]:
        """Send the answer ``message`` (for the pause whose fingerprint is ``pause``); the remote agent's
        first event says whether it took it."""
        events = self.remote.send(message)
        try:
            first = await anext(events)
        except StopAsyncIteration:
            return self._unsure(RemoteLost(f"{self.remote.name} answered the message with nothing"))
        except (RemoteUnreachable, RemoteCardError) as exc:  # nothing left: no connection, or no card
            await self._put_back(before)
            raise DecisionNotDeliveredError(f"{exc.message}; the answer was not sent") from None
        except RemoteRefused as exc:
            if exc.gone:
                return self._fail(exc)
            return await self._answered_with(exc, before, pause)
        except RemoteFailed as exc:
            return await self._answered_with(exc, before, pause)
        except RemoteLost as exc:
            return self._unsure(exc)
        refused = refusal_of(first)
        if refused is None:
            return self._follow(events, first)
        await events.aclose()  # type: ignore[attr-defined]
        code, why = refused
        if code == DecisionInterruptedError.code:  # it went further down, and may have taken effect there
            await self._put_back(before, interrupted=pause)
            raise DecisionInterruptedError(f"{self.remote.name} passed the answer on, and {why}")
        await self._put_back(before)
        raise DecisionRejectedError(f"{self.remote.name} did not take the answer: {code}: {why}")

    async def _answered_with(
        self, error: RemoteRefused | RemoteFailed, before: list[ToolCallState], pause: str
    ) -> AsyncIterator[Chunk]:
        """The remote agent answered the answer with an error. Its task says what came of it: moved on
        (failed, say, as the a2a-sdk's server fails a task whose agent broke, whatever error code the
        request got), it took the answer, and is followed from there. Still asking the same question: a
        refusal took nothing, and the call waits as it did; a failure of its own (``RemoteFailed``) may
        have come after it acted, so the call waits again marked interrupted (here and at every level
        above), and the decider hears that the answer may have taken effect. Either way the answer is
        never sent a second time by itself: a second answer could make the remote agent act twice."""
        state = self.state
        assert state.remote is not None and state.remote.task_id is not None
        task = RemoteTask(self.remote.name, state.remote.task_id)
        try:
            task.feed_task(_as_dict(await self.remote.get(state.remote.task_id)))
            asks = task.settled and self._still_asks(task.outcome())
        except RemoteAgentError:  # how the task stands is not known: only a refusal says it took nothing
            asks = isinstance(error, RemoteRefused)
        if not asks:
            return self._unsure(error)
        if isinstance(error, RemoteRefused):
            await self._put_back(before)
            raise DecisionNotDeliveredError(f"{error.message}; the answer was not taken") from None
        await self._put_back(before, interrupted=pause)
        raise DecisionInterruptedError(
            f"{error.message}; its task still asks, and it may have acted on the answer before it failed. "
            "The answer is not sent again: the call waits, marked interrupted, to be decided again",
            run_id=state.run_id,
            task_id=state.remote.task_id,
        )

    async def _put_back(self, before: list[ToolCallState], *, interrupted: str | None = None) -> None:
        """Undo a claim whose answer never reached the remote agent: the calls wait as they did. With
        ``interrupted`` (a pause's fingerprint), one that may have reached it: that pause is marked."""
        if interrupted is not None:
            for call in before:
                call.mark_interrupted(interrupted)
        self.state.calls, self.state.status = before, "suspended"
        self._delivered()
        await self.save()

    async def _unsure(self, lost: RemoteAgentError) -> AsyncIterator[Chunk]:
        """An answer went out but the exchange broke off: follow the task by asking for it. Once it has
        moved past the question the answer answered, follow it on. If it still asks that question after
        ``_UNSURE_GRACE_S`` (and its history does not show the answer arrived), the question is asked
        again, marked interrupted: the answer may have arrived all the same, and it is never sent a
        second time by itself. If the task cannot be asked for, the delegation fails, saying so."""
        state = self.state
        assert state.remote is not None and state.remote.task_id is not None
        answer_id, task = state.remote.answer_id, RemoteTask(self.remote.name, state.remote.task_id)
        give_up = asyncio.get_running_loop().time() + _UNSURE_GRACE_S
        outcome: Outcome | None = None

        def moved(seen: RemoteTask) -> bool:
            # Working again, or asking something else: it took the answer (it was asking when it went).
            if not seen.settled or not self._still_asks(seen.outcome()):
                return True
            return answer_id not in seen.history and asyncio.get_running_loop().time() > give_up

        try:
            task.feed_task(_as_dict(await self.remote.get(state.remote.task_id)))
            await self._poll(task, moved)
            await self._poll(task)
            outcome = task.outcome()
        except RemoteAgentError as exc:
            lost = exc
        if outcome is not None and self._still_asks(outcome):
            log.warning(
                "the answer sent to %s (task %s) may not have arrived (%s), and the task still asks: "
                "asked again, marked interrupted",
                self.remote.name,
                state.remote.task_id,
                lost.message,
            )
            async for chunk in self._settle(outcome, interrupted=True):
                yield chunk
            return
        if outcome is None:
            why = (
                f"the answer sent to {self.remote.name} (task {state.remote.task_id}) may not have "
                f"arrived, and the task could not be asked for ({lost.message}); it is not sent a second "
                "time"
            )
            async for chunk in self._fail(RemoteAgentError(why, task_id=state.remote.task_id)):
                yield chunk
            return
        async for chunk in self._settle(outcome):
            yield chunk

    def _still_asks(self, outcome: Outcome) -> bool:
        """Whether the task asks again what the answer in flight answered."""
        if not isinstance(outcome, Question):
            return False
        decided = {c.decision.inner_tool_call_id or c.tool_call_id for c in self.state.calls if c.decision}
        listed = {outcome.id}
        for data in outcome.data:
            if is_pending(data) and isinstance(data.get("pendingToolCalls"), list):
                listed |= {str(p.get("toolCallId")) for p in data["pendingToolCalls"] if isinstance(p, dict)}
        return bool(decided & listed)

    # ---- following after a restart ------------------------------------------------------------------

    async def resumed(self) -> AsyncIterator[Chunk]:
        """Follow a run in flight that nothing here drives (its parent recovered): its task where it
        stands, an answer whose fate is unknown, or a start the remote agent never named a task for."""
        yield self._chunk("start", id=self.agent_id, agent_id=self.agent_id, recovered=True)
        if self.state.remote is None or self.state.remote.task_id is None:
            stored = await self._named_meanwhile()
            if stored is None:
                why = (
                    f"the task for {self.remote.name} was lost while it was being started (the process "
                    "stopped before the remote agent named it); the remote agent may have begun it, and "
                    "it is not started a second time"
                )
                async for chunk in self._fail(RemoteAgentError(why)):
                    yield chunk
                return
            if stored.state.status != "running":  # it went on without this process: tell where
                for chunk in replay(self.agent_id, stored.state)[1:]:
                    yield chunk
                return
            self.state, self.version = stored.state, stored.version
        remote = self.state.remote
        assert remote is not None and remote.task_id is not None
        if remote.answer_id is not None:
            steps = self._unsure(RemoteLost(f"the process sending the answer to {self.remote.name} stopped"))
        else:
            steps = self._follow_by_asking(remote.task_id)
        async for chunk in steps:
            yield chunk

    async def _named_meanwhile(self) -> StoredRun | None:
        """The run once the process sending its prompt has recorded the task's id, or has gone on past
        it; None if that has not happened by the time the prompt's request could have come back (its
        ``timeout_s`` from the run's start, plus a margin). That process may be alive though it lost
        the parent (its lease lapsed): reported lost at once, the task may be delegated again while
        the remote agent works on it."""
        spec = self.remote.spec
        deadline = self.state.created_at + timedelta(seconds=spec.timeout_s + _SENDING_MARGIN_S)
        wait = _POLL_FIRST_S
        while True:
            stored = await self.store.load_run(self.state.run_id)
            if stored is None:
                return None
            remote = stored.state.remote
            if stored.state.status != "running" or (remote is not None and remote.task_id is not None):
                return stored
            left = (deadline - utcnow()).total_seconds()
            if left <= 0:
                return None
            await asyncio.sleep(min(wait, left))
            wait = min(wait * 2, _POLL_MAX_S)

    async def _follow_by_asking(self, task_id: str) -> AsyncIterator[Chunk]:
        task = RemoteTask(self.remote.name, task_id)
        try:
            task.feed_task(_as_dict(await self.remote.get(task_id)))
            await self._poll(task)
            outcome: Outcome = task.outcome()
        except RemoteAgentError as exc:
            outcome = Broke(exc.message, exc)
        async for chunk in self._settle(outcome):
            yield chunk


class Stopped(Exception):
    """The run was cancelled while it was followed here; ``state`` is how it ended."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state.run_id)
        self.state = state

    @property
    def cancellation(self) -> Cancellation:
        """The cancel that stopped it."""
        assert self.state.cancel is not None, "a proxy run is stopped by its cancel"
        return self.state.cancel


async def _listed(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


async def _chained(first: list[Any], rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    for item in first:
        yield item
    async for item in rest:
        yield item


def _as_dict(task: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(task)


__all__ = ["ProxyRun", "Stopped"]
