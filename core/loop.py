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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from troupe.core.agent import DELEGATION_PREFIX, AgentSpec
from troupe.core.chunks import Chunk
from troupe.core.decisions import APPROVAL_RESUME_SCHEMA, parse_resume_data
from troupe.core.delegation import Delegation, child_run_id, delegation_tool
from troupe.core.errors import DecisionPendingError, ModelError, StorageError, TroupeError
from troupe.core.handoff import pending_delivery
from troupe.core.hooks import ToolCallOverride
from troupe.core.memory import settled_length, take_unsaved
from troupe.core.messages import assistant_message, tool_message
from troupe.core.model import ModelRequest, TextDelta, ToolCallPart, TurnEnd, Usage
from troupe.core.model_output import (
    MAX_TEXT_CHARS,
    RefusedArgs,
    args_problem,
    id_problem,
    text_problem,
)
from troupe.core.outbox import Event, Notifications, decision_event, pause_event
from troupe.core.policy import RunPolicy, requires_approval
from troupe.core.requests import AgentPort, ChunkBatches
from troupe.core.state import CallStatus, Clock, Pause, RunState, ToolCallState, fingerprint, utcnow
from troupe.core.store import AuditEntry, OutboxEntry, StaleSnapshotError, Store, ThreadAppend
from troupe.core.tools import AgentContext, SuspendSignal, Tool, ToolContext, ToolThreads
from troupe.core.tracing import span

log = logging.getLogger(__name__)

Emit = Callable[[Chunk], None]


@dataclass
class ActiveRun:
    """A run while an operation (start or decision) drives it. Lives only for that operation."""

    state: RunState
    version: int
    policy: RunPolicy
    emit: Emit = lambda chunk: None
    # Calls this operation executes (claimed: RUNNING with no output yet).
    todo: list[str] = field(default_factory=list)
    # Decided delegation calls: the subagent's stream for the decision, opened when it was claimed.
    child_streams: dict[str, ChunkBatches] = field(default_factory=dict)
    # Delegation calls to re-attach to their subagent's run (a recovered parent).
    reattach: set[str] = field(default_factory=set)
    # Audit entries to write with the next checkpoint (a delegated decision, once the subagent took it).
    pending_audit: list[AuditEntry] = field(default_factory=list)
    # Finished subagent runs whose outcome this run has taken: deleted once that is checkpointed here.
    consumed_children: list[str] = field(default_factory=list)

    def chunk(self, type_: Any, **payload: Any) -> None:
        self.emit(Chunk(type_, self.state.run_id, payload))


@dataclass
class Turn:
    text: str
    calls: list[ToolCallPart]
    finish_reason: str


class RunLoop:
    def __init__(
        self,
        spec: AgentSpec,
        store: Store,
        ports: dict[str, AgentPort],
        notifications: Notifications | None = None,
        clock: Clock = utcnow,
        threads: ToolThreads | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.clock = clock
        self.threads = threads or ToolThreads()
        self.notifications = notifications
        # Called after a write that added outbox entries (the host's dispatcher sends them).
        self.on_outbox: Callable[[], None] = lambda: None
        self.delegations = {
            DELEGATION_PREFIX + key: Delegation(key, sub, ports[key])
            for key, sub in spec.agents.items()
            if key in ports
        }
        self.tools: dict[str, Tool] = {**spec.tools}
        for name, delegation in self.delegations.items():
            self.tools[name] = delegation_tool(delegation)
        self.tool_specs = [tool.spec(name) for name, tool in self.tools.items()]

    # ---- the loop ------------------------------------------------------------------------------------

    async def advance(
        self, run: ActiveRun, backlog: Sequence[Chunk] = (), start_note: dict[str, Any] | None = None
    ) -> None:
        """Drive the run; ``start_note`` (given for a new run or a recovery, not a decision) opens the
        stream with a ``start`` chunk carrying it."""
        state = run.state
        if start_note is not None:
            run.chunk("start", id=self.spec.id, agent_id=self.spec.id, **start_note)
        for chunk in backlog:
            run.emit(chunk)
        while True:
            # One span per step this operation works on: the model turn (unless the step was already
            # planned, e.g. when a decision resumes it), then the step's tool calls.
            resumed = bool(state.calls)
            with span(
                "troupe.step", troupe__step=state.step + (0 if resumed else 1), troupe__resumed=resumed
            ):
                if not await self._step(run):
                    return

    async def _step(self, run: ActiveRun) -> bool:
        """Drive one step; False once the run has finished or paused."""
        state = run.state
        if not state.calls:
            turn = await self._model_turn(run)
            if not turn.calls:
                self._step_finish(run, turn.finish_reason, turn.text)
                await self.finish(run, turn.finish_reason)
                return False
            await self._plan(run, turn.calls)
            if run.todo:
                # Calls about to run are marked running in the store first: a crash mid-tool must be
                # seen as an interrupted call, never silently re-run. (If nothing runs, the pause or
                # the end of the step checkpoints the plan anyway.)
                await self.checkpoint(run)
        await self._run_calls(run)
        if state.paused_calls():
            await self._suspend(run)
            return False
        self._close_step(run)
        if state.step >= state.max_steps:
            await self.finish(run, "tool-calls")
            return False
        await self.checkpoint(run)
        return True

    async def checkpoint(
        self, run: ActiveRun, thread: ThreadAppend | None = None, events: Sequence[Event] = ()
    ) -> None:
        run.state.updated_at = utcnow()
        audit, run.pending_audit = tuple(run.pending_audit), []
        run.version = await self.save(
            run.state, expected_version=run.version, audit=audit, thread=thread, events=events
        )
        await self._drop_consumed_children(run)

    async def save(
        self,
        state: RunState,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        events: Sequence[Event] = (),
    ) -> int:
        """Write the run, with its audit entries and, in the same atomic step, the notifications that
        they and ``events`` make (``troupe.core.outbox``)."""
        outbox = self.outbox(state, audit, events)
        # Only when there is something to send, so a store written to the older protocol keeps working.
        extra: dict[str, tuple[OutboxEntry, ...]] = {"outbox": outbox} if outbox else {}
        version = await self.store.save_run(
            state, expected_version=expected_version, audit=audit, thread=thread, **extra
        )
        if outbox:
            self.on_outbox()
        return version

    def outbox(
        self, state: RunState, audit: Sequence[AuditEntry], events: Sequence[Event] = ()
    ) -> tuple[OutboxEntry, ...]:
        if self.notifications is None or not self.notifications.targets:
            return ()
        # A subagent's decisions are reported by the top-level run that routed them.
        decided = [decision_event(state, entry) for entry in audit] if state.parent is None else []
        return self.notifications.entries([*events, *decided])

    async def finish(self, run: ActiveRun, reason: str) -> None:
        text = _final_text(run.state)
        # The run's conversation (OpenAI chat format), as Mastra's finish carries its messages; taken
        # before _end, which clears a subagent's.
        messages = list(run.state.messages)
        await self._end(run, {"finish_reason": reason, "text": text})
        run.chunk("finish", **self._ending(run.state, reason, text), messages=messages)

    def _ending(self, state: RunState, reason: str, text: str, continued: bool = False) -> dict[str, Any]:
        """A step-finish or finish payload: Troupe's ``finish_reason``/``usage`` and Mastra's
        ``step_result``/``output`` (what Mastra's clients read)."""
        usage = self._usage(state).to_dict()
        return {
            "finish_reason": reason,
            "usage": usage,
            "step_result": {"reason": reason, "is_continued": continued},
            "output": {"text": text, "usage": usage},
        }

    def _step_finish(self, run: ActiveRun, reason: str, text: str) -> None:
        state = run.state
        continued = reason == "tool-calls"
        run.chunk("step-finish", step=state.step, **self._ending(state, reason, text, continued))

    async def _end(self, run: ActiveRun, outcome: dict[str, Any]) -> None:
        """A top-level run's snapshot goes (its last messages join its thread in the same write). A
        subagent's run keeps a small finished record until its parent has checkpointed the outcome, so a
        parent recovering from a crash can still collect it."""
        state = run.state
        # Subagent records this run consumed but had not deleted yet (a crash in between) go first.
        run.consumed_children.extend(self._children_of(state))
        await self._drop_consumed_children(run)
        if state.parent is None:
            if run.pending_audit:
                await self.checkpoint(run)
            thread = take_unsaved(self.spec.memory, state, upto=len(state.messages))
            await self.store.delete_run(state.run_id, expected_version=run.version, thread=thread)
        else:
            state.status, state.outcome, state.calls = "finished", outcome, []
            state.messages = []
            await self.checkpoint(run)

    def _children_of(self, state: RunState) -> list[str]:
        """Run ids of the subagent runs this run delegated to (derived from its conversation)."""
        return [
            child_run_id(state.run_id, call["id"])
            for message in state.messages
            if message.get("role") == "assistant"
            for call in message.get("tool_calls") or ()
            if call["function"]["name"] in self.delegations
        ]

    async def _drop_consumed_children(self, run: ActiveRun) -> None:
        while run.consumed_children:
            await self.store.delete_run(run.consumed_children.pop())

    async def fail(self, run: ActiveRun, error: BaseException) -> None:
        """Report a run that cannot go on.

        A model or tool-infrastructure failure ends the run, so its snapshot goes. A storage failure leaves
        the last durable checkpoint as it is, for recovery once storage is back.
        """
        error = pending_delivery(run.state, self.delegations, error)
        if isinstance(error, TroupeError):
            info = error.to_dict()
        else:
            info = {"code": "AGENT_RUN_FAILED", "message": f"{type(error).__name__}: {error}", "details": {}}
        if not isinstance(error, StorageError | DecisionPendingError):
            try:
                await self._end(run, {"finish_reason": "error", "error": info})
            except StorageError:
                log.warning("could not end the snapshot of failed run %s", run.state.run_id, exc_info=True)
            except StaleSnapshotError:
                log.warning("failed run %s was changed elsewhere; left as it is", run.state.run_id)
        run.chunk("error", error=info)
        run.chunk("finish", **self._ending(run.state, "error", ""))

    # ---- model ---------------------------------------------------------------------------------------

    async def _model_turn(self, run: ActiveRun) -> Turn:
        state = run.state
        run.chunk("step-start", step=state.step + 1)
        system = [{"role": "system", "content": self.spec.instructions}] if self.spec.instructions else []
        request = ModelRequest(messages=system + state.messages, tools=self.tool_specs)
        text: list[str] = []
        calls: list[ToolCallPart] = []
        try:
            with span("troupe.model", troupe__model=self.spec.model.id, troupe__step=state.step + 1):
                end = await self._stream_turn(run, request, text, calls)
        except TroupeError:
            raise
        except Exception as exc:
            raise ModelError(f"model {self.spec.model.id!r} failed: {type(exc).__name__}: {exc}") from exc
        if len({c.id for c in calls}) != len(calls):
            raise ModelError("the model gave two tool calls the same id in one turn")
        state.step += 1
        state.input_tokens += end.usage.input_tokens
        state.output_tokens += end.usage.output_tokens
        state.messages.append(assistant_message("".join(text), calls))
        return Turn("".join(text), calls, "tool-calls" if calls else end.finish_reason)

    async def _stream_turn(
        self, run: ActiveRun, request: ModelRequest, text: list[str], calls: list[ToolCallPart]
    ) -> TurnEnd:
        """Stream the model's turn out as chunks, collecting its text and tool calls."""
        end = TurnEnd()
        # Each stretch of text is one part, wrapped in text-start/text-end as Mastra does.
        part: str | None = None
        parts = 0
        async for event in self.spec.model.stream_turn(request):
            if isinstance(event, TextDelta):
                said = sum(map(len, text))
                _refuse_unless_storable("text", text_problem(event.text, MAX_TEXT_CHARS - said))
                if part is None:
                    parts += 1
                    part = f"text-{run.state.step + 1}-{parts}"
                    run.chunk("text-start", id=part)
                text.append(event.text)
                run.chunk("text-delta", id=part, text=event.text)
                continue
            if part is not None:
                run.chunk("text-end", type="text-end", id=part)
                part = None
            if isinstance(event, ToolCallPart):
                event = _storable_call(event)
                calls.append(event)
                run.chunk("tool-call", tool_call_id=event.id, tool_name=event.name, args=event.args)
            elif isinstance(event, TurnEnd):
                end = event
        if part is not None:
            run.chunk("text-end", type="text-end", id=part)
        return end

    # ---- planning a step -----------------------------------------------------------------------------

    async def _plan(self, run: ActiveRun, parts: list[ToolCallPart]) -> None:
        """Record the step's calls: invalid ones fail at once, gated ones wait, the rest are claimed to
        run (listed in ``run.todo``)."""
        state = run.state
        state.calls = []
        for part in parts:
            call = ToolCallState(
                tool_call_id=part.id,
                tool_name=part.name,
                args=part.args if isinstance(part.args, dict) else {},
                status=CallStatus.RUNNING,
            )
            state.calls.append(call)
            tool = self.tools.get(part.name)
            parsed = self._parse_input(tool, part)
            if isinstance(parsed, str):
                self.done(run, call, {"error": parsed}, is_error=True)
                continue
            assert tool is not None
            ctx = self.context(run.state, call, tool)
            call.requires_approval = await requires_approval(
                tool, part.name, call.args, parsed, ctx, run.policy
            )
            if call.requires_approval:
                call.status = CallStatus.AWAITING_APPROVAL
                call.pauses = [self.own_pause(state, call, tool, "approval")]
            else:
                run.todo.append(call.tool_call_id)

    def _parse_input(self, tool: Tool | None, part: ToolCallPart) -> BaseModel | str:
        """The validated input, or what is wrong with the call (the model is told, nothing runs)."""
        if isinstance(part.args, RefusedArgs):
            return f"the arguments for tool {part.name!r} were refused: {part.args}"
        if tool is None:
            return f"unknown tool {part.name!r}; available tools: {', '.join(sorted(self.tools)) or 'none'}"
        if not isinstance(part.args, dict):
            return f"arguments for tool {part.name!r} are not a JSON object: {part.args!r}"
        try:
            return tool.parse_input(part.args)
        except ValidationError as exc:
            return f"invalid arguments for tool {part.name!r}: {exc.errors(include_url=False)}"

    def own_pause(
        self,
        state: RunState,
        call: ToolCallState,
        tool: Tool,
        kind: Literal["approval", "suspend"],
        payload: Any = None,
    ) -> Pause:
        return Pause(
            kind=kind,
            tool_name=call.tool_name,
            args=call.effective_args,
            suspend_payload=payload,
            # An approval is answered with {approved, reason?} (resume_stream), as in Mastra.
            resume_schema=APPROVAL_RESUME_SCHEMA if kind == "approval" else tool.resume_json_schema(),
            agent_path=[self.spec.id],
            fingerprint=fingerprint(call.tool_call_id, call.tool_name, call.effective_args),
            seq=self.next_seq(state),
            expires_at=self.deadline(state),
        )

    def next_seq(self, state: RunState) -> int:
        state.pause_seq += 1
        return state.pause_seq

    def deadline(self, state: RunState, inherited: datetime | None = None) -> datetime | None:
        """A new pause's expiry: this run's approval_timeout from now, else what the subagent set."""
        if state.approval_timeout is None:
            return inherited
        return self.clock() + timedelta(seconds=state.approval_timeout)

    # ---- executing calls -----------------------------------------------------------------------------

    def context(self, state: RunState, call: ToolCallState, tool: Tool) -> ToolContext:
        return ToolContext(
            run_id=state.run_id,
            tool_call_id=call.tool_call_id,
            agent_id=self.spec.id,
            thread_id=state.thread_id,
            resource_id=state.resource_id,
            request_context=state.request_context,
            agent=AgentContext(suspend_schema=tool.suspend_schema),
        )

    async def _run_calls(self, run: ActiveRun) -> None:
        todo, run.todo = run.todo, []
        calls = [c for c in (run.state.call(i) for i in todo) if c is not None]
        await asyncio.gather(*(self._execute(run, call) for call in calls))

    async def _execute(self, run: ActiveRun, call: ToolCallState) -> None:
        delegation = self.delegations.get(call.tool_name)
        with span(
            "troupe.tool",
            troupe__tool=call.tool_name,
            troupe__tool_call_id=call.tool_call_id,
            troupe__run_id=run.state.run_id,
        ) as current:
            if delegation is not None:
                await delegation.run(self, run, call, reattach=call.tool_call_id in run.reattach)
            else:
                await self._execute_tool(run, call)
            outcome = "error" if call.is_error else call.status.value
            current.set_attribute("troupe.outcome", "declined" if call.declined else outcome)

    async def _execute_tool(self, run: ActiveRun, call: ToolCallState) -> None:
        tool = self.tools[call.tool_name]
        ctx = self.context(run.state, call, tool)
        if call.decision is not None and call.decision.kind == "resumed":
            ctx.agent.resume_data = parse_resume_data(tool, call.decision.resume_data)
        hooks = self.spec.hooks
        try:
            if hooks.before_tool_call is not None:
                override = await _maybe_await(
                    hooks.before_tool_call(call.tool_name, tool.parse_input(call.effective_args), ctx)
                )
                if isinstance(override, ToolCallOverride) and not override.proceed:
                    self.done(run, call, override.output, overridden=True)
                    return
            output = await tool.run(call.effective_args, ctx, self.threads)
        except SuspendSignal as signal:
            call.status = CallStatus.SUSPENDED
            call.pauses = [self.own_pause(run.state, call, tool, "suspend", signal.payload)]
            return
        except Exception as exc:
            self.done(run, call, {"error": f"{type(exc).__name__}: {exc}"}, is_error=True)
            return
        self.done(run, call, output)
        if hooks.after_tool_call is not None:
            try:
                await _maybe_await(hooks.after_tool_call(call.tool_name, call.effective_args, output, ctx))
            except Exception:
                log.warning("after_tool_call hook failed for %s", call.tool_call_id, exc_info=True)

    def done(
        self, run: ActiveRun, call: ToolCallState, output: Any, *, is_error: bool = False, **extra: Any
    ) -> None:
        call.status = CallStatus.DONE
        call.output = output
        call.is_error = is_error
        run.chunk(
            "tool-error" if is_error else "tool-result",
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.effective_args,
            result=output,
            **extra,
        )

    @staticmethod
    def decline_chunk(run_id: str, call: ToolCallState) -> Chunk:
        """Mastra's ``tool-output-denied``: the tool never ran; the model hears ``approval.reason``."""
        return Chunk(
            "tool-output-denied",
            run_id,
            {
                "tool_call_id": call.tool_call_id,
                "tool_name": call.tool_name,
                "args": call.effective_args,
                "approval": {"id": call.tool_call_id, "approved": False, "reason": call.output},
            },
        )

    # ---- closing a step ------------------------------------------------------------------------------

    def _close_step(self, run: ActiveRun) -> None:
        """Every call is resolved: results go to the model in the order the calls were made."""
        state = run.state
        state.messages.extend(tool_message(c.tool_call_id, c.output) for c in state.calls)
        state.calls = []
        self._step_finish(run, "tool-calls", _final_text(state))

    async def _suspend(self, run: ActiveRun) -> None:
        state = run.state
        state.status = "suspended"
        # Only the top-level run announces pauses to people (a subagent's pause bubbles up to it).
        pauses = [pause_event(state, c, p) for c, p in state.open_pauses()] if state.parent is None else []
        thread = take_unsaved(self.spec.memory, state, upto=settled_length(state))
        await self.checkpoint(run, thread, pauses)
        # Durable now: announce every open pause, oldest first, so the last one is the newest.
        for call, pause in state.open_pauses():
            run.emit(pause_chunk(state.run_id, call, pause))

    @staticmethod
    def _usage(state: RunState) -> Usage:
        return Usage(state.input_tokens, state.output_tokens)


def _final_text(state: RunState) -> str:
    """The run's answer: the text of its last assistant turn."""
    for message in reversed(state.messages):
        if message.get("role") == "assistant":
            return str(message.get("content") or "")
    return ""


def _refuse_unless_storable(what: str, problem: str | None) -> None:
    if problem is not None:
        raise ModelError(f"the model's {what} cannot be stored: {problem}")


def _storable_call(part: ToolCallPart) -> ToolCallPart:
    """The call as it may be streamed and stored: arguments that cannot be are replaced by the reason."""
    _refuse_unless_storable("tool call id", id_problem(part.id))
    _refuse_unless_storable("tool name", id_problem(part.name))
    problem = args_problem(part.args)
    if problem is None:
        return part
    return ToolCallPart(part.id, part.name, RefusedArgs(f"they cannot be stored: {problem}"))


def pause_chunk(run_id: str, call: ToolCallState, pause: Pause) -> Chunk:
    payload: dict[str, Any] = {
        "tool_call_id": call.tool_call_id,
        "tool_name": pause.tool_name,
        "args": pause.args,
        "resume_schema": pause.resume_schema,
        "agent_path": pause.agent_path,
        "fingerprint": pause.fingerprint,
    }
    if pause.interrupted:
        payload["interrupted"] = True
    if pause.expires_at is not None:
        payload["expires_at"] = pause.expires_at.isoformat()
    if pause.kind == "suspend":
        payload["suspend_payload"] = pause.suspend_payload
        return Chunk("tool-call-suspended", run_id, payload)
    return Chunk("tool-call-approval", run_id, payload)


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value


__all__ = ["ActiveRun", "Emit", "RunLoop", "pause_chunk"]
