"""``POST /api/agents/{agentId}/agui``: an agent to any AG-UI front end (the Agent-User Interaction
protocol 1.0, through the official ``ag-ui-protocol`` package's types and SSE encoder).

The body is AG-UI's ``RunAgentInput``; the answer is a ``text/event-stream`` of AG-UI events under the
same keys, tokens, tenancy and approver policies as ``/api``: a wrong key is a 401 before any event, a run
belongs to ``forwardedProps.resourceId`` (``troupe.api.agui_messages``), and every decision goes through
the agent's own decision methods as the caller, audited with surface ``ag-ui``. The AG-UI thread is the
Troupe thread its runs are started on. What one input does depends on what that thread waits on:

- nothing waits: a new run of the input's conversation, streamed (``troupe.api.agui_events``) until it
  finishes or pauses (``RUN_FINISHED`` with the interrupt outcome, one interrupt per open pause:
  ``troupe.api.agui_interrupts``); an input with no messages is answered with an empty run;
- interrupts wait and the input has ``resume``: each entry is checked, then decided in order, and the
  run streams on to its next interrupts or to ``RUN_FINISHED`` success. An entry that cannot be taken
  ends the stream in ``RUN_ERROR`` with a code that says why, and nothing is decided;
- interrupts wait, no ``resume`` and no messages: the interrupts are announced again (a client that lost
  its stream starts a new run with what it kept, as AG-UI's HTTP binding says; this is how it gets them);
- interrupts wait and the input brings new messages without ``resume``: refused (``AGUI_INTERRUPT_OPEN``).

A client that goes away does not stop the run: it carries on, or stays paused, as over ``/api``. AG-UI
has no request that cancels a run (its client only stops listening); a run is cancelled through
Troupe's own ways (``POST /api/agents/{agentId}/cancel-run``, the inbox, ``Agent.cancel_run``). A
cancelled run ends its AG-UI stream, whether it is cancelled while streamed or the client comes back to
it later (a run with nothing new, whose ``state.troupe.runId`` names it): whatever is open is closed,
then ``STATE_SNAPSHOT`` (``troupe.status`` ``cancelled``, ``troupe.cancelled``: who, why, when) and
``RUN_FINISHED`` with the ``cancelled`` outcome. A ``resume`` of an interrupt its run's cancel withdrew
is a ``RUN_ERROR`` with ``AGENT_RUN_CANCELLED`` that decides nothing; a ``cancelled`` resume entry still
means "decline that call".
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from troupe.api.agui_events import EventTranslator
from troupe.api.agui_interrupts import (
    AguiResumeError,
    Answer,
    InterruptOpenError,
    OpenPause,
    answers,
    decided_ids,
    open_pauses_of,
    withdrawn_ids,
)
from troupe.api.agui_messages import chat_messages, resource_of, run_body, thread_of
from troupe.api.auth import Principal
from troupe.api.errors import ERRORS
from troupe.api.identity import held
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, Service, ServiceDep
from troupe.core.vocabulary.errors import (
    RunCancelledError,
    RunFailedError,
    TroupeError,
)
from troupe.core.vocabulary.stream import AgentStream
from troupe.supervisor.agent import Agent

log = logging.getLogger(__name__)

router = APIRouter(tags=["ag-ui"], route_class=TroupeRoute)
SURFACE = "ag-ui"
MEDIA_TYPE = EventEncoder().get_content_type()


@router.post(
    "/agents/{agentId}/agui",
    operation_id="aguiRun",
    response_class=StreamingResponse,
    responses={
        **ERRORS,
        200: {
            "description": "AG-UI events (RUN_STARTED ... RUN_FINISHED or RUN_ERROR) as server-sent events",
            "content": {MEDIA_TYPE: {"schema": {"type": "string"}}},
        },
    },
)
async def agui_run(
    agentId: str, body: RunAgentInput, request: Request, service: ServiceDep, caller: CallerDep
) -> StreamingResponse:
    """Run the agent for an AG-UI client: a new run, a resume of its interrupts, or them again."""
    run = AguiRun(service, service.agent(agentId), caller, body, request)
    events = await run.prepare()
    encoder = EventEncoder()
    return StreamingResponse(
        (encoder.encode(event).encode() async for event in events),
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class AguiRun:
    """One AG-UI run input, answered."""

    def __init__(
        self, service: Service, agent: Agent, caller: Principal, run: RunAgentInput, request: Request
    ) -> None:
        self.service = service
        self.agent = agent
        self.caller = caller
        self.request = request  # whose credential must still hold while the run's events are sent
        self.input = run
        self.thread = thread_of(run)
        self.resource = resource_of(caller, run)
        self.translator = EventTranslator()
        self.troupe_runs: list[str] = []

    async def prepare(self) -> AsyncIterator[BaseEvent]:
        """What to stream. A mistake in the input itself is raised here (an HTTP error status, before
        any event); one about the thread's interrupts is the stream's ``RUN_ERROR``."""
        pauses = await self.open_pauses()
        try:
            if self.input.resume:
                decided, withdrawn = await self.decided(pauses)
                return self._resumed(answers(self.input.resume, pauses, decided, withdrawn))
            messages = chat_messages(self.input, memory=self.agent.memory is not None)
            if pauses and messages:
                raise InterruptOpenError(
                    f"thread {self.thread!r} waits on {len(pauses)} interrupt(s) "
                    f"({', '.join(p.id for p in pauses)}): answer them in resume before sending more",
                    interrupts=[p.id for p in pauses],
                )
        except (AguiResumeError, RunCancelledError) as exc:
            return self._refused(exc)
        if pauses or not messages:
            return self._announced(pauses)
        request = run_body(messages, self.thread, self.resource)
        return self._started(await self.service.start(self.agent.id, request, self.caller, "stream"))

    # ---- what the thread waits on -------------------------------------------------------------------

    async def open_pauses(self) -> list[OpenPause]:
        """Every pause the thread waits on, in the runs of the caller's resource (all, for an admin who
        named none), oldest first per run."""
        found = await self.agent.list_suspended_runs(thread_id=self.thread, resource_id=self.resource)
        return [pause for run in found.runs for pause in open_pauses_of(run, self.service, self.agent)]

    async def decided(self, pauses: Sequence[OpenPause]) -> tuple[set[str], dict[str, RunCancelledError]]:
        """Interrupt ids already decided, and those a cancel of their run withdrew: in the thread's
        waiting runs, and in the run the client's state names (the run a replayed resume answered, or
        that was cancelled, may have finished since)."""
        runs = {p.run.run_id for p in pauses}
        named = self._named_run()
        if named is not None:
            runs.add(named)
        found: set[str] = set()
        withdrawn: dict[str, RunCancelledError] = {}
        for run_id in runs:
            try:
                await self.service.check_run(self.caller, self.agent, run_id)
            except TroupeError:
                continue  # not the caller's to know about
            audit = await self.service.runtime.store().list_audit(run_id)
            found |= decided_ids(audit, self.agent.id)
            withdrawn |= withdrawn_ids(audit, self.agent.id)
        return found, withdrawn

    def _named_run(self) -> str | None:
        """The Troupe run the client's state names (``state.troupe.runId``, as this endpoint left it)."""
        state = self.input.state
        troupe = state.get("troupe") if isinstance(state, dict) else None
        named = troupe.get("runId") if isinstance(troupe, dict) else None
        return named if isinstance(named, str) else None

    # ---- the streams --------------------------------------------------------------------------------

    async def _refused(self, error: TroupeError) -> AsyncIterator[BaseEvent]:
        yield _run_error(error)

    async def _announced(self, pauses: list[OpenPause]) -> AsyncIterator[BaseEvent]:
        self.troupe_runs = sorted({p.run.run_id for p in pauses})
        cancelled = None if pauses else await self._named_cancel()
        yield self._run_started()
        for event in self._cancelled(cancelled) if cancelled is not None else self._finished(pauses):
            yield event

    async def _named_cancel(self) -> dict[str, Any] | None:
        """Who cancelled the run the client's state names, why and when, if it was cancelled (and is
        the caller's to know about): a client coming back to a cancelled run is told so."""
        named = self._named_run()
        if named is None:
            return None
        try:
            await self.service.check_run(self.caller, self.agent, named)
        except TroupeError:
            return None
        info = await self.service.runtime.run_info(self.agent.id, named)
        return info.get("cancelled") if info is not None and info.get("status") == "cancelled" else None

    async def _started(self, stream: AgentStream) -> AsyncIterator[BaseEvent]:
        self.troupe_runs = [stream.run_id]
        yield self._run_started()
        async for event in self._guarded(self._relay([stream])):
            yield event

    async def _resumed(self, checked: list[Answer]) -> AsyncIterator[BaseEvent]:
        self.troupe_runs = sorted({a.pause.run.run_id for a in checked})
        yield self._run_started()
        async for event in self._guarded(self._relay(self._decide(a) for a in checked)):
            yield event

    async def _decide(self, answer: Answer) -> AgentStream:
        """The answer, as the agent's own decision method, as the caller, through this surface."""
        run_id = answer.pause.run.run_id
        agent = await self.service.run_agent(self.caller, self.agent.id, run_id)
        options: Any = {
            "run_id": run_id,
            "tool_call_id": answer.pause.call.tool_call_id,
            "fingerprint": answer.pause.call.fingerprint,
            "decided_by": self.caller,
            "surface": SURFACE,
        }
        if answer.action == "approve":
            return await agent.approve_tool_call(edited_args=answer.edited_args, **options)
        if answer.action == "decline":
            return await agent.decline_tool_call(reason=answer.reason, **options)
        return await agent.resume_stream(answer.data, **options)

    async def _relay(
        self, streams: Iterable[AgentStream | Awaitable[AgentStream]]
    ) -> AsyncIterator[BaseEvent]:
        """Each stream's chunks as events, one stream after the other (a decision is made when its turn
        comes), then how the run ended: its error, its interrupts, or success."""
        for next_stream in streams:
            stream = next_stream if isinstance(next_stream, AgentStream) else await next_stream
            self.translator.paused = False
            # A credential that ends meanwhile raises here: the RUN_ERROR of ``_guarded``.
            async for chunk in held(stream, self.request, self.caller).full_stream:
                for event in self.translator.events(chunk):
                    yield event
            if self.translator.stopped:  # cancelled while it streamed: nothing after this is decided
                for event in self._cancelled((self.translator.finished or {}).get("cancelled") or {}):
                    yield event
                return
            if self.translator.error is not None:
                error = self.translator.error
                message = str(error.get("message") or "the run failed")
                yield RunErrorEvent(message=message, code=str(error.get("code") or RunFailedError.code))
                return
        # What the thread still waits on, not only the runs decided here: a run of the thread that waits
        # on something else keeps the outcome an interrupt.
        for event in self._finished(await self.open_pauses()):
            yield event

    async def _guarded(self, events: AsyncIterator[BaseEvent]) -> AsyncIterator[BaseEvent]:
        """``events``, and a failure after the stream began as its ``RUN_ERROR`` (the status is sent)."""
        try:
            async for event in events:
                yield event
        except Exception as exc:
            if not isinstance(exc, TroupeError):
                log.exception("AG-UI run %s of agent %r failed", self.input.run_id, self.agent.id)
            yield _run_error(
                exc if isinstance(exc, TroupeError) else RunFailedError(f"the run failed: {exc!r}")
            )

    # ---- run events ---------------------------------------------------------------------------------

    def _run_started(self) -> RunStartedEvent:
        return RunStartedEvent(
            thread_id=self.input.thread_id,
            run_id=self.input.run_id,
            protocol_version=PROTOCOL_VERSION,
            metadata={"troupe": {"runIds": self.troupe_runs, "agentId": self.agent.id}},
        )

    def _finished(self, pauses: list[OpenPause]) -> list[BaseEvent]:
        """State, then the run's end: its interrupts, or success."""
        interrupts = [p.interrupt() for p in pauses]
        by_subagent: dict[str, list[str]] = {}
        for interrupt in interrupts:
            if interrupt.subagent_run_id is not None:
                by_subagent.setdefault(interrupt.subagent_run_id, []).append(interrupt.id)
        events = self.translator.close(by_subagent if interrupts else None)
        events.append(StateSnapshotEvent(snapshot=self._state(interrupts)))
        outcome: Any = (
            RunFinishedInterruptOutcome(interrupts=interrupts) if interrupts else RunFinishedSuccessOutcome()
        )
        events.append(
            RunFinishedEvent(
                thread_id=self.input.thread_id,
                run_id=self.input.run_id,
                outcome=outcome,
                result=None if interrupts else self.translator.final_text(),
                usage=self.translator.token_usage(),
            )
        )
        return events

    def _cancelled(self, cancelled: dict[str, Any]) -> list[BaseEvent]:
        """The end of a run that was cancelled: what is open closed (a subagent still working ends in
        ``SUBAGENT_ERROR``), state saying who cancelled it and why, then the ``cancelled`` outcome."""
        events = self.translator.close(cancelled=True)
        told = {
            "cancelledBy": cancelled.get("cancelled_by"),
            "reason": cancelled.get("reason"),
            "cancelledAt": cancelled.get("cancelled_at"),
        }
        events.append(StateSnapshotEvent(snapshot=self._state([], status="cancelled", cancelled=told)))
        events.append(
            RunFinishedEvent(
                thread_id=self.input.thread_id,
                run_id=self.input.run_id,
                outcome=RunFinishedCancelledOutcome(),
                usage=self.translator.token_usage(),
            )
        )
        return events

    def _state(
        self, interrupts: list[Interrupt], status: str | None = None, cancelled: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The client's state with Troupe's part replaced: the runs behind this thread and what waits."""
        given = self.input.state if isinstance(self.input.state, dict) else {}
        troupe: dict[str, Any] = {
            "agentId": self.agent.id,
            # With no run of its own (nothing waited, nothing was asked), the run the state named stays.
            "runId": self.troupe_runs[-1] if self.troupe_runs else self._named_run(),
            "status": status or ("suspended" if interrupts else "finished"),
            "subagents": self.translator.tree,
            "interrupts": [i.id for i in interrupts],
        }
        if cancelled is not None:
            troupe["cancelled"] = cancelled
        return {**given, "troupe": troupe}


def _run_error(error: TroupeError) -> RunErrorEvent:
    return RunErrorEvent(message=error.message, code=error.code)


__all__ = ["SURFACE", "AguiRun", "router"]
