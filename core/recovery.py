"""Picking up a run after a crash, and describing a run that is not in flight.

A run whose host died is ``running`` in the store at its last checkpoint. Calls it had claimed to run
(``RUNNING``, no output) were interrupted, and what happened to them is unknown, so they are never
simply run again: an ``idempotent`` tool is re-run, a gated tool goes back to its human (marked
interrupted), anything else is reported to the model as interrupted. A delegation is re-attached to its
subagent's run, which recovers on its own terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from troupe.core.chunks import Chunk
from troupe.core.state import CallStatus, RunState

if TYPE_CHECKING:
    from troupe.core.loop import ActiveRun, RunLoop

INTERRUPTED = (
    "interrupted: the process running this tool call stopped before it finished; it may or may not have "
    "taken effect, and it was not run again"
)


def prepare_recovery(loop: RunLoop, run: ActiveRun) -> list[Chunk]:
    """Settle the interrupted calls of ``run`` (mutates its state and todo); returns chunks to report."""
    state = run.state
    notes: list[Chunk] = []
    for call in state.calls:
        if call.status is not CallStatus.RUNNING:
            continue
        tool = loop.tools.get(call.tool_name)
        if call.tool_name in loop.delegations:
            run.reattach.add(call.tool_call_id)
            run.todo.append(call.tool_call_id)
        elif tool is not None and tool.idempotent:
            run.todo.append(call.tool_call_id)
        elif call.requires_approval and tool is not None:
            call.status = CallStatus.AWAITING_APPROVAL
            call.decision = None
            pause = loop.own_pause(state, call, tool, "approval")
            pause.interrupted = True
            call.pauses = [pause]
        else:
            call.status = CallStatus.DONE
            call.output = {"error": INTERRUPTED}
            call.is_error = True
            notes.append(
                Chunk(
                    "tool-error",
                    state.run_id,
                    {
                        "tool_call_id": call.tool_call_id,
                        "tool_name": call.tool_name,
                        "args": call.effective_args,
                        "result": call.output,
                        "interrupted": True,
                    },
                )
            )
    return notes


def replay(loop: RunLoop, state: RunState) -> list[Chunk]:
    """The chunks that tell a late reader where a run not in flight stands: its open pauses, or its
    recorded outcome."""
    from troupe.core.loop import pause_chunk

    chunks = [Chunk("start", state.run_id, {"id": loop.spec.id, "agent_id": loop.spec.id, "replayed": True})]
    usage = {
        "input_tokens": state.input_tokens,
        "output_tokens": state.output_tokens,
        "total_tokens": state.input_tokens + state.output_tokens,
    }
    if state.status == "suspended":
        chunks.extend(pause_chunk(state.run_id, call, pause) for call, pause in state.open_pauses())
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
    chunks.append(
        Chunk("finish", state.run_id, {"finish_reason": outcome.get("finish_reason", "stop"), "usage": usage})
    )
    return chunks


__all__ = ["INTERRUPTED", "prepare_recovery", "replay"]
