"""Picking up a run after a crash, and describing a run that is not in flight.

A run whose host died is ``running`` in the store at its last checkpoint. Calls it had claimed to run
(``RUNNING``, no output) were interrupted, and what happened to them is unknown, so they are never
simply run again: an ``idempotent`` tool is re-run, a gated tool goes back to its human (marked
interrupted), anything else is reported to the model as interrupted. A delegation is re-attached to its
subagent's run, which recovers on its own terms.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from troupe.core.run import late_results
from troupe.core.run.flow import Plan
from troupe.core.run.outcomes import record_result
from troupe.core.run.pauses import Pauses, open_pause_chunks
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.state import CallStatus, InDoubt, RunState, ToolCallState
from troupe.core.vocabulary.store import AuditEntry
from troupe.core.vocabulary.tools import Tool

# Marks a call taken over from a host that may still be running it.
Doubt = Callable[[ToolCallState, Tool], InDoubt]

INTERRUPTED = (
    "interrupted: the process running this tool call stopped before it finished; it may or may not have "
    "taken effect, and it was not run again"
)


def prepare_recovery(
    state: RunState,
    tools: Mapping[str, Tool],
    delegations: Collection[str],
    pauses: Pauses,
    audit: Sequence[AuditEntry] = (),
    doubt: Doubt | None = None,
) -> Plan:
    """Settle the interrupted calls of the run (mutates ``state``): the plan re-runs or re-attaches
    what may be, and its backlog reports the calls cut short. A call whose tool did complete after all
    (its host recorded the outcome in the run's ``audit`` log, see ``late_results``) takes that outcome.
    ``doubt`` marks a gated call asked about again as in doubt (its last host may still be running it:
    ``troupe.core.run.in_doubt``); None when that host is known gone (this one, restarted)."""
    calls: list[str] = []
    reattach: set[str] = set()
    notes: list[Chunk] = []
    for call in state.calls:
        if call.status is not CallStatus.RUNNING:
            continue
        tool = tools.get(call.tool_name)
        late = late_results.completed(audit, call)
        if late is not None:
            notes.append(late_results.use_completed(state.run_id, call, late))
        elif call.tool_name in delegations:
            reattach.add(call.tool_call_id)
            calls.append(call.tool_call_id)
        elif tool is not None and tool.idempotent:
            calls.append(call.tool_call_id)
        elif call.requires_approval and tool is not None:
            call.status = CallStatus.AWAITING_APPROVAL
            call.decision = None
            pause = pauses.own(state, call, tool, "approval")
            pause.interrupted = True
            if doubt is not None:
                pause.in_doubt = call.in_doubt = doubt(call, tool)
                # An expiry would decline it before it may be declined: not before its deadline.
                if pause.expires_at is not None:
                    pause.expires_at = max(pause.expires_at, pause.in_doubt.deadline)
            call.pauses = [pause]
        else:
            notes.append(_cut_short(state.run_id, call))
    return Plan(calls=tuple(calls), reattach=frozenset(reattach), backlog=tuple(notes))


def _cut_short(run_id: str, call: ToolCallState) -> Chunk:
    """Record the call as interrupted (the model is told so); the chunk that reports it."""
    return record_result(run_id, call, {"error": INTERRUPTED}, True, interrupted=True)


def replay(agent_id: str, state: RunState) -> list[Chunk]:
    """The chunks that tell a late reader where a run not in flight stands: its open pauses, or its
    recorded outcome."""
    chunks = [Chunk("start", state.run_id, {"id": agent_id, "agent_id": agent_id, "replayed": True})]
    usage = {
        "input_tokens": state.input_tokens,
        "output_tokens": state.output_tokens,
        "total_tokens": state.input_tokens + state.output_tokens,
    }
    if state.status == "suspended":
        chunks.extend(open_pause_chunks(state))
        return chunks  # a paused stream ends at its pauses
    outcome = state.outcome or {}
    if outcome.get("error") is not None:
        chunks.append(Chunk("error", state.run_id, {"error": outcome["error"]}))
    elif outcome.get("text"):
        part = {"id": f"text-{state.step}-1"}
        chunks.append(Chunk("step-start", state.run_id, {"step": state.step}))
        chunks.append(Chunk("text-start", state.run_id, part))
        chunks.append(Chunk("text-delta", state.run_id, {**part, "text": outcome["text"]}))
        chunks.append(Chunk("text-end", state.run_id, {"type": "text-end", **part}))
    finish = {"finish_reason": outcome.get("finish_reason", "stop"), "usage": usage}
    if outcome.get("cancelled") is not None:  # a subagent's run that was stopped: who, why, when
        finish["cancelled"] = outcome["cancelled"]
    chunks.append(Chunk("finish", state.run_id, finish))
    return chunks


__all__ = ["INTERRUPTED", "Doubt", "prepare_recovery", "replay"]
