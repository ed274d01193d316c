"""Troupe's agents over A2A: the request handler behind ``POST /a2a/{agentId}`` (``troupe.api.a2a_http``).

A run is a task (task id = run id; context id = thread id), started, followed and decided through the
same service as ``/api``, as the caller's principal: a new run belongs to one of the caller's resources,
a task of another resource is answered as unknown, and every answer goes through the agent's own
decision methods (claim, fingerprint, approver policies, audit), through the surface ``"a2a"``.

- ``SendMessage``/``SendStreamingMessage`` without a task id start a run from the message's text
  (``metadata.resourceId`` names its resource; a key of one resource needs none). With a task id, the
  message answers the run's paused calls: a data part ``{"decisions": [...]}``
  (``troupe.actors.a2a.pending``), every one checked against the waiting calls before any is applied,
  then applied in order. An answer that is refused (unreadable, a wrong tool call id, data that fails
  the schema) is reported in the task's status message, and the task stays ``input-required`` with
  every call still waiting; a refusal only deciding finds (a policy that says no) names the decisions
  taken before it.
- ``GetTask`` and ``SubscribeToTask`` read the run from the store (``troupe.api.a2a_tasks``), so a
  restarted server answers them as before; ``ListTasks`` lists the caller's ``input-required`` tasks.
- ``CancelTask`` cancels the run through ``Agent.cancel_run`` as the caller (``troupe.api.a2a_cancel``):
  the task is ``canceled`` from then on, for ``GetTask`` too (its status message says who cancelled it
  and why, from the run or, once it is gone, the audit log), and a client following it sees it end so.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from a2a.helpers.proto_helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from fastapi import Request
from troupe.actors.a2a.pending import AnswerError, DecisionItem
from troupe.api.a2a_cancel import cancel_task, not_answerable
from troupe.api.a2a_messages import (
    context_of_message,
    decisions_of,
    page_number,
    prompt_of,
    resource_of,
    struct_dict,
)
from troupe.api.a2a_tasks import (
    cancelled_task,
    context_of,
    ended_task,
    finished_task,
    paused_task,
    status_message,
    working_task,
)
from troupe.api.agui_interrupts import checked, open_pauses_of
from troupe.api.errors import AuthenticationError
from troupe.api.identity import held
from troupe.api.service import Service
from troupe.core.deciding.cancelling import STOPPED, outcome
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DecisionRejectedError,
    SnapshotNotFoundError,
    ToolCallNotSuspendedError,
    TroupeError,
)
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.pause_shapes import suspended_run
from troupe.core.vocabulary.results import ResultBuilder, RunResult
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.stream import AgentStream
from troupe.supervisor.agent import Agent

# Where the route leaves who is calling which agent, for the handler to find in the call's context.
CALL_KEY = "troupe.a2a.call"
_MAX_PAGE = 100

Event = Task | TaskStatusUpdateEvent


@dataclass(frozen=True)
class A2ACall:
    """One A2A request: the service, the agent it is for, who calls, and where the inbox page is."""

    service: Service
    agent_id: str
    caller: Principal
    inbox: str | None = None
    request: Request | None = None  # whose credential must still hold while a run's events are sent

    @property
    def agent(self) -> Agent:
        return self.service.agent(self.agent_id)

    def reading(self, stream: AgentStream, context_id: str) -> _Reading:
        """``stream`` read for this caller, while its credential holds (``troupe.api.identity.held``)."""
        if self.request is not None:
            stream = held(stream, self.request, self.caller)
        return _Reading(stream, context_id)


def _call(context: ServerCallContext) -> A2ACall:
    call = context.state.get(CALL_KEY)
    if not isinstance(call, A2ACall):
        raise RuntimeError("an A2A request reached Troupe's handler without its caller (see a2a_http)")
    return call


@contextlib.contextmanager
def _as_a2a_errors() -> Iterator[None]:
    """Troupe's errors as A2A's: an unknown (or someone else's) run is an unknown task; a request the
    caller got wrong is invalid params; a credential that ended while a task streamed, an invalid request."""
    try:
        yield
    except SnapshotNotFoundError as exc:
        raise TaskNotFoundError(exc.message) from exc
    except AuthenticationError as exc:  # the caller's key revoked (or token expired) while a task streamed
        raise InvalidRequestError(f"{exc.code}: {exc.message}") from exc
    except TroupeError as exc:
        if exc.http_status < 500:
            raise InvalidParamsError(f"{exc.code}: {exc.message}") from exc
        raise


class AgentsOverA2A(RequestHandler):
    """The A2A request handler of a Troupe front door (one for every agent; the route says which)."""

    # ---- messages ---------------------------------------------------------------------------------------

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        last: Task | None = None
        async for event in self._send(params, context):
            if isinstance(event, Task):
                last = event
        assert last is not None, "every message is answered with the task it leaves"
        return last

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        async for event in self._send(params, context):
            yield event

    async def _send(self, params: SendMessageRequest, context: ServerCallContext) -> AsyncIterator[Event]:
        call = _call(context)
        message = params.message
        with _as_a2a_errors():
            events = self._answer(call, message) if message.task_id else self._start(call, params)
            async for event in events:
                yield event

    async def _start(self, call: A2ACall, params: SendMessageRequest) -> AsyncIterator[Event]:
        message = params.message
        prompt = prompt_of(message)
        metadata = {**struct_dict(params.metadata), **struct_dict(message.metadata)}
        options: dict[str, Any] = {"resource_id": resource_of(call.caller, metadata.get("resourceId"))}
        context_id = context_of_message(message)
        if context_id is None:
            # A task started without a context is a context of its own, named by its id and stored as
            # its run's thread, so that ListTasks(contextId=...) finds it by the context it was told.
            context_id = options["run_id"] = str(uuid.uuid4())
        options["thread_id"] = context_id
        stream: AgentStream = await call.service.start_run(
            call.agent_id, prompt, options, call.caller, "stream"
        )
        yield working_task(stream.run_id, context_id)
        reading = call.reading(stream, context_id)
        async for event in reading.events():
            yield event
        yield await self._view(call, stream.run_id, context_id, reading)

    async def _answer(self, call: A2ACall, message: Message) -> AsyncIterator[Event]:
        seen = await _visible(call, message.task_id)
        state = seen.state
        if seen.cancelled or state is None:
            raise not_answerable(message.task_id, seen.info)
        context_id = state.thread_id or state.run_id
        if message.context_id and message.context_id != context_id:
            raise InvalidParamsError(
                f"context {message.context_id} is not the context of task {message.task_id}"
            )
        if state.status != "suspended":
            raise UnsupportedOperationError(
                f"task {message.task_id} is working; answer it once it asks for input (input-required)"
            )
        try:
            decisions = decisions_of(message)
        except AnswerError as exc:
            yield paused_task(state, note=DecisionRejectedError(str(exc)), inbox=call.inbox)
            return
        try:
            _check_all(call, state, decisions)
        except TroupeError as exc:  # nothing decided: every call still waits
            yield paused_task(state, note=exc, inbox=call.inbox)
            return
        reading, note = None, None
        taken: list[str] = []
        for item in decisions:
            try:
                stream = await _decide(call, state.run_id, item)
            except TroupeError as exc:  # only deciding finds it (a policy, a race): said with what was taken
                note = exc
                break
            taken.append(item.tool_call_id)
            reading = call.reading(stream, context_id)
            async for event in reading.events():
                yield event
            if reading.result.finish_reason != "suspended":
                break  # the run moved on: any decision after this one finds nothing to decide
        yield await self._view(call, state.run_id, context_id, reading, note, taken)

    async def _view(
        self,
        call: A2ACall,
        run_id: str,
        context_id: str,
        reading: _Reading | None,
        note: TroupeError | None = None,
        taken: list[str] | None = None,
    ) -> Task:
        """The task once the request's work is done: the run's end if it ended here, else where the
        store says the run stands."""
        result = reading.result if reading is not None else None
        if reading is not None and result is not None and result.finish_reason in STOPPED:
            stopped = result.finish_reason != "cancelled"
            return cancelled_task(run_id, context_id, reading.cancelled, stopped=stopped)
        if result is not None and result.finish_reason not in (None, "suspended"):
            return finished_task(run_id, context_id, result)
        stored = await call.service.runtime.store().load_run(run_id)
        if stored is None:  # it ended elsewhere (its end went to another reader): the audit says if cancelled
            info = await call.service.runtime.run_info(call.agent_id, run_id)
            if info is not None and info.get("status") == "cancelled":
                return cancelled_task(run_id, context_id, info.get("cancelled"))
            return ended_task(run_id, context_id)
        state = stored.state
        if state.cancel is not None:  # cancelled, and being ended
            stopped = state.cancel.finish_reason != "cancelled"
            return cancelled_task(run_id, context_id, outcome(state.cancel)["cancelled"], stopped=stopped)
        if state.status == "suspended":
            return paused_task(state, note=note, inbox=call.inbox, taken=taken)
        return working_task(run_id, context_id)

    # ---- reading tasks ----------------------------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        call = _call(context)
        with _as_a2a_errors():
            return await self._now(call, params.id)

    async def _now(self, call: A2ACall, task_id: str) -> Task:
        """The task as it stands now: ``canceled`` (who, why) however long ago its run was cancelled."""
        seen = await _visible(call, task_id)
        if seen.cancelled:
            return cancelled_task(task_id, seen.context_id, seen.info.get("cancelled"))
        if seen.state is None:
            return ended_task(task_id, task_id)
        return await self._view(call, task_id, seen.context_id, None)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        call = _call(context)
        with _as_a2a_errors():
            seen = await _visible(call, params.id)
            state = seen.state
            if seen.cancelled or state is None:
                raise not_answerable(params.id, seen.info, "there is nothing to follow")
            context_id = seen.context_id
            if state.status == "suspended":
                yield paused_task(state, inbox=call.inbox)
                return
            yield working_task(state.run_id, context_id)
            try:
                stream = await call.service.runtime.observe(call.agent_id, state.run_id)
            except SnapshotNotFoundError:  # it ended (or was cancelled) between the look and the follow
                yield await self._now(call, params.id)
                return
            reading = call.reading(stream, context_id)
            async for event in reading.events():
                yield event
            yield await self._view(call, state.run_id, context_id, reading)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's ``input-required`` tasks of this agent (``list_suspended_runs``, one page per
        resource of the caller; ``pageToken`` is the page number)."""
        call = _call(context)
        size = min(params.page_size or _MAX_PAGE, _MAX_PAGE)
        page = page_number(params.page_token)
        wanted = params.status in (TaskState.TASK_STATE_UNSPECIFIED, TaskState.TASK_STATE_INPUT_REQUIRED)
        caller = call.caller
        resources: list[str | None] = [None] if caller.admin else [*sorted(caller.resources)]
        tasks: list[Task] = []
        total, more = 0, False
        for resource in resources if wanted else []:
            with _as_a2a_errors():
                found = await call.agent.list_suspended_runs(
                    thread_id=params.context_id or None, resource_id=resource, page=page, per_page=size
                )
            total += found.total
            more = more or (page + 1) * size < found.total
            tasks += [
                paused_task(await _state(call, run.run_id), inbox=call.inbox)
                for run in found.runs
                if run.agent_id == call.agent_id
            ]
        return ListTasksResponse(
            tasks=tasks, next_page_token=str(page + 1) if more else "", page_size=size, total_size=total
        )

    # ---- cancelling -------------------------------------------------------------------------------------

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """Cancel the run behind the task as the caller (``troupe.api.a2a_cancel``): ``canceled`` once
        the cancel is durable; ``TaskNotCancelableError`` if the caller may not, or the task has ended."""
        call = _call(context)
        with _as_a2a_errors():
            seen = await _visible(call, params.id)
            metadata = struct_dict(params.metadata)
            return await cancel_task(call.agent, call.caller, params.id, seen.context_id, metadata)

    # ---- not supported ----------------------------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(_NO_PUSH)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(_NO_PUSH)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError(_NO_PUSH)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError(_NO_PUSH)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError("this agent has no extended card: its card says everything")


_NO_PUSH = (
    "push notifications are not supported over A2A: Troupe's notifications are configured on the server"
)


# ---- runs as the caller may see them ------------------------------------------------------------------


@dataclass(frozen=True)
class _Seen:
    """A task as its caller may see it: where its run stands (``Runtime.run_info``: status, and who
    cancelled it), and the run's snapshot (None once the run has ended)."""

    info: dict[str, Any]
    state: RunState | None

    @property
    def cancelled(self) -> bool:
        return bool(self.info.get("status") == "cancelled")

    @property
    def context_id(self) -> str:
        """The task's context: its run's thread (the run's own id once its snapshot is gone)."""
        return context_of(self.state) if self.state is not None else str(self.info["run_id"])


async def _visible(call: A2ACall, run_id: str) -> _Seen:
    """The task ``run_id`` if the caller may see it; an unknown task, another resource's, another
    agent's or a subagent's run (decided through its top run) is ``TaskNotFoundError``, all alike."""
    info = await call.service.runtime.run_info(call.agent_id, run_id)
    if info is None or not call.caller.may(info["resource_id"]):
        raise TaskNotFoundError(f"task {run_id} not found for agent {call.agent_id!r}")
    stored = await call.service.runtime.store().load_run(run_id)
    if stored is not None and stored.state.parent is not None:
        raise TaskNotFoundError(f"task {run_id} not found for agent {call.agent_id!r}")
    return _Seen(info, stored.state if stored is not None else None)


async def _state(call: A2ACall, run_id: str) -> RunState:
    stored = await call.service.runtime.store().load_run(run_id)
    if stored is None:
        raise TaskNotFoundError(f"task {run_id} has finished since it was listed")
    return stored.state


# ---- driving a run ------------------------------------------------------------------------------------


def _check_all(call: A2ACall, state: RunState, decisions: list[DecisionItem]) -> None:
    """Every decision of an answer checked against the calls the run waits on (which call, its
    fingerprint, the kind of pause, the schema, the edits), as AG-UI checks a resume, before any is
    applied: an answer refused here decides nothing.

    Raises:
        ToolCallNotSuspendedError: a decision names no call that waits.
        DecisionConflictError: its fingerprint is not the call's as it waits now.
        DecisionRejectedError: two decisions for one call, or one that does not fit its call.
    """
    pauses = open_pauses_of(suspended_run(state), call.service, call.agent)
    seen: set[tuple[str, str | None]] = set()
    for item in decisions:
        key = (item.tool_call_id, item.fingerprint)
        if key in seen:
            raise DecisionRejectedError(f"the answer decides tool call {item.tool_call_id!r} twice")
        seen.add(key)
        named = [p for p in pauses if p.call.tool_call_id == item.tool_call_id]
        if not named:
            raise ToolCallNotSuspendedError(
                f"tool call {item.tool_call_id!r} is not paused in run {state.run_id} (it waits on "
                f"{', '.join(sorted({p.call.tool_call_id for p in pauses}))}); nothing was decided",
                run_id=state.run_id,
                tool_call_id=item.tool_call_id,
            )
        fits = [p for p in named if item.fingerprint in (None, p.call.fingerprint)]
        if not fits:
            raise DecisionConflictError(
                f"tool call {item.tool_call_id!r} of run {state.run_id} no longer matches fingerprint "
                f"{item.fingerprint}; nothing was decided",
                run_id=state.run_id,
                tool_call_id=item.tool_call_id,
            )
        action: Literal["approve", "decline", "resume"] = (
            "resume" if item.approved is None else ("approve" if item.approved else "decline")
        )
        # Without a fingerprint the agent decides the call's newest pause.
        checked(fits[-1], action, reason=item.reason, edited_args=item.edited_args, data=item.resume_data)


async def _decide(call: A2ACall, run_id: str, item: DecisionItem) -> AgentStream:
    """Open the decision ``item`` on the run, as the caller, through the agent's own methods."""
    agent = call.agent
    options: dict[str, Any] = {
        "run_id": run_id,
        "tool_call_id": item.tool_call_id,
        "fingerprint": item.fingerprint,
        "decided_by": call.caller,
        "surface": "a2a",
    }
    if item.approved is True:
        return await agent.approve_tool_call(edited_args=item.edited_args, **options)
    if item.approved is False:
        return await agent.decline_tool_call(reason=item.reason, **options)
    return await agent.resume_stream(item.resume_data, **options)


class _Reading:
    """Reads an operation's stream to its end, folding it into ``result``; ``events`` yields a
    ``working`` update (with the step's text) at each step that goes on. Where the run stands at the
    end is read by the caller from the result and the store."""

    def __init__(self, stream: AgentStream, context_id: str) -> None:
        self.stream = stream
        self.context_id = context_id
        self._builder = ResultBuilder(stream.run_id)
        # Who stopped the run, why and when, if its finish says it was stopped.
        self.cancelled: dict[str, Any] | None = None

    @property
    def result(self) -> RunResult:
        return self._builder.result

    async def events(self) -> AsyncIterator[TaskStatusUpdateEvent]:
        async for chunk in self.stream.full_stream:
            self._builder.feed((chunk,))
            if chunk.type == "finish" and chunk.run_id == self.stream.run_id:
                self.cancelled = chunk.payload.get("cancelled") or self.cancelled
            update = self._progress(chunk)
            if update is not None:
                yield update

    def _progress(self, chunk: Chunk) -> TaskStatusUpdateEvent | None:
        if chunk.type != "step-finish" or chunk.payload.get("finish_reason") != "tool-calls":
            return None
        steps = self.result.steps
        text = steps[-1].text if steps else ""
        status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
        if text:
            status.message.CopyFrom(status_message(chunk.run_id, self.context_id, [new_text_part(text)]))
        status.timestamp.GetCurrentTime()
        return TaskStatusUpdateEvent(task_id=chunk.run_id, context_id=self.context_id, status=status)


__all__ = ["CALL_KEY", "A2ACall", "AgentsOverA2A"]
