"""A step's tool calls: recorded from the model's turn (invalid ones fail at once, gated ones pause, the
rest are claimed to run), then executed together, tools in this process and delegations in their
subagent, each ending as a result, an error or a pause of the call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, assert_never

from pydantic import BaseModel, ValidationError
from troupe.core.deciding.approvers import ApproverPolicies
from troupe.core.deciding.decisions import parse_resume_data
from troupe.core.deciding.policy import governed, requires_approval
from troupe.core.run.agent import AgentSpec
from troupe.core.run.delegation import Delegation
from troupe.core.run.flow import ActiveRun, ChildFailed, ChildFinished, ChildOutcome, ChildPaused, Plan
from troupe.core.run.outcomes import record_result
from troupe.core.run.pauses import Pauses
from troupe.core.tracing import span
from troupe.core.vocabulary.hooks import ToolCallOverride
from troupe.core.vocabulary.model import ToolCallPart
from troupe.core.vocabulary.state import CallStatus, RunState, ToolCallState, utcnow
from troupe.core.vocabulary.storable import RefusedArgs, result_problem
from troupe.core.vocabulary.tool_threads import ToolThreads
from troupe.core.vocabulary.tools import (
    AgentContext,
    SuspendSignal,
    Tool,
    ToolContext,
    ToolInterrupted,
)

if TYPE_CHECKING:
    from troupe.core.run.late_results import LateOutcomes

log = logging.getLogger(__name__)


class Calls:
    """Plans and executes the tool calls of one agent's steps."""

    def __init__(
        self,
        spec: AgentSpec,
        tools: Mapping[str, Tool],
        delegations: Mapping[str, Delegation],
        pauses: Pauses,
        threads: ToolThreads,
        policies: ApproverPolicies | None = None,
        late: LateOutcomes | None = None,
    ) -> None:
        self.spec = spec
        # Where a sync tool's outcome goes when it comes after its call was given up (troupe.core.run
        # .late_results); None: it is dropped.
        self.late = late
        # Calls these govern always pause, whatever the run's options say (troupe.core.deciding.policy).
        self.policies = policies
        self.tools = tools
        self.delegations = delegations
        self.pauses = pauses
        self.threads = threads

    # ---- planning ------------------------------------------------------------------------------------

    async def plan(self, run: ActiveRun, parts: list[ToolCallPart]) -> tuple[str, ...]:
        """Record the step's calls in the run; returns the ones to execute now."""
        state = run.state
        state.calls = []
        todo: list[str] = []
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
                done(run, call, {"error": parsed}, is_error=True)
                continue
            assert tool is not None
            ctx = self.context(state, call, tool)
            path = [*(state.parent.agent_path if state.parent is not None else ()), self.spec.id]
            call.requires_approval = await requires_approval(
                tool, part.name, call.args, parsed, ctx, run.policy, governed(self.policies, part.name, path)
            )
            if call.requires_approval:
                call.status = CallStatus.AWAITING_APPROVAL
                call.pauses = [self.pauses.own(state, call, tool, "approval")]
            else:
                call.started_at = utcnow()
                todo.append(call.tool_call_id)
        return tuple(todo)

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

    # ---- executing -----------------------------------------------------------------------------------

    async def execute(self, run: ActiveRun, plan: Plan) -> tuple[str, ...]:
        """Execute the plan's calls at once. Returns the finished subagent runs whose outcome this run
        took (to delete once the run's next checkpoint holds it)."""
        calls = [c for c in (run.state.call(i) for i in plan.calls) if c is not None]
        if len(calls) == 1:  # most steps: no task and gather for it (issue 42: a cycle's loop turns)
            consumed = [await self._execute(run, calls[0], plan)]
        else:
            consumed = await asyncio.gather(*(self._execute(run, call, plan) for call in calls))
        return tuple(child for child in consumed if child is not None)

    async def _execute(self, run: ActiveRun, call: ToolCallState, plan: Plan) -> str | None:
        consumed = None
        with span(
            "troupe.tool",
            troupe__tool=call.tool_name,
            troupe__tool_call_id=call.tool_call_id,
            troupe__run_id=run.state.run_id,
        ) as current:
            delegation = self.delegations.get(call.tool_name)
            if delegation is not None:
                outcome = await delegation.run(
                    run,
                    call,
                    parent_agent=self.spec.id,
                    source=plan.child_streams.get(call.tool_call_id),
                    reattach=call.tool_call_id in plan.reattach,
                )
                consumed = self._take_child(run, call, outcome)
            else:
                await self._execute_tool(run, call)
            outcome_name = "error" if call.is_error else call.status.value
            current.set_attribute("troupe.outcome", "declined" if call.declined else outcome_name)
        return consumed

    def _take_child(self, run: ActiveRun, call: ToolCallState, outcome: ChildOutcome) -> str | None:
        """The delegation call's outcome from its subagent's; the subagent's run id once it has ended."""
        call.child = outcome.link
        match outcome:
            case ChildPaused(pauses=events):
                call.pauses = [self.pauses.lift(run.state, call, event) for event in events]
                latest = call.pauses[-1]
                approval = latest.kind == "approval"
                call.status = CallStatus.AWAITING_APPROVAL if approval else CallStatus.SUSPENDED
                return None
            case ChildFailed(message=message):
                done(run, call, {"error": message}, is_error=True)
            case ChildFinished(text=text):
                done(run, call, text)
            case _:
                assert_never(outcome)
        return outcome.link.run_id

    async def _execute_tool(self, run: ActiveRun, call: ToolCallState) -> None:
        tool = self.tools[call.tool_name]
        ctx = self.context(run.state, call, tool)
        _answer(ctx, tool, call)
        hooks = self.spec.hooks
        # Why a sync tool's outcome came too late, should it (its thread runs on when its call is given up).
        why = ["the run was stopped while it ran"]
        late = self.late.later(run.state, call, lambda: why[0]) if self.late is not None else None
        limit: asyncio.Timeout | None = None
        try:
            if await self._overridden(run, call, tool, ctx):
                return
            async with asyncio.timeout(tool.timeout_s) as limit:
                output = await tool.run(call.effective_args, ctx, self.threads, late)
        except TimeoutError as exc:
            if limit is None or not limit.expired():
                # The tool's own TimeoutError (a socket read, its own wait_for) is its error like any
                # other. Re-raising it here would not reach the `except Exception` below (one try's
                # clauses do not catch each other's raises): it would fail the whole run instead.
                _failed(run, call, exc)
                return
            why[0] = f"the call had timed out after {tool.timeout_s:g} s"
            done(
                run,
                call,
                {"error": _timed_out(call.tool_name, tool.timeout_s)},
                is_error=True,
                timed_out=True,
            )
            return
        except SuspendSignal as signal:
            call.status = CallStatus.SUSPENDED
            pause = self.pauses.own(run.state, call, tool, "suspend", signal.payload, signal.resume_schema)
            call.pauses = [pause]
            return
        except ToolInterrupted as exc:
            done(run, call, {"error": f"interrupted: {exc}"}, is_error=True, interrupted=True)
            return
        except Exception as exc:
            _failed(run, call, exc)
            return
        run.ran.append(call)
        problem = result_problem(output)
        if problem is not None:
            # The tool ran (its effects stand); what it returned cannot be kept, so the model is told so.
            done(
                run,
                call,
                {"error": f"the tool ran, but its result cannot be kept ({problem})"},
                is_error=True,
            )
            return
        done(run, call, output)
        if hooks.after_tool_call is not None:
            try:
                await _maybe_await(hooks.after_tool_call(call.tool_name, call.effective_args, output, ctx))
            except Exception:
                log.warning("after_tool_call hook failed for %s", call.tool_call_id, exc_info=True)

    async def _overridden(self, run: ActiveRun, call: ToolCallState, tool: Tool, ctx: ToolContext) -> bool:
        """Whether a ``before_tool_call`` hook blocked the call (its output is the call's then)."""
        before = self.spec.hooks.before_tool_call
        if before is None:
            return False
        override = await _maybe_await(before(call.tool_name, tool.parse_input(call.effective_args), ctx))
        if isinstance(override, ToolCallOverride) and not override.proceed:
            done(run, call, override.output, overridden=True)
            return True
        return False


def _failed(run: ActiveRun, call: ToolCallState, exc: BaseException) -> None:
    """The tool raised: the model is told what, and the call counts as run (it may have had effects)."""
    done(run, call, {"error": f"{type(exc).__name__}: {exc}"}, is_error=True)
    run.ran.append(call)


def _timed_out(tool_name: str, timeout_s: float | None) -> str:
    return (
        f"tool {tool_name!r} timed out after {timeout_s:g} s (its timeout_s) and was cancelled; it may "
        "or may not have taken effect"
    )


def _answer(ctx: ToolContext, tool: Tool, call: ToolCallState) -> None:
    """What the call's decision gives the tool: resume data, or (for a tool that hears it) a decline."""
    decision = call.decision
    if decision is None:
        return
    if decision.kind == "resumed":
        ctx.agent.resume_data = parse_resume_data(tool, decision.resume_data)
    elif decision.kind in ("declined", "expired"):  # a resume_on_decline tool's suspend() pause
        ctx.agent.decline_reason = decision.reason
        ctx.agent.expired = decision.kind == "expired"


def done(run: ActiveRun, call: ToolCallState, output: Any, *, is_error: bool = False, **extra: Any) -> None:
    """Record the call's output and tell the stream."""
    run.emit(record_result(run.state.run_id, call, output, is_error, **extra))


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value


__all__ = ["Calls", "done"]
