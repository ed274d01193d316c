"""A pause and every shape it takes, mapped in one place.

A ``Pause`` (in the run state) is shown to the world as a ``PauseEvent`` (the pause chunk and what a
supervisor lifts from a subagent), a ``PendingToolCall`` (a listed suspended run), an ``AuditEntry`` (the
record of its decision) and a notification's data. Each shape takes the pause's fields it has by name
from ``_fields``, so a field added to ``Pause`` reaches every shape that declares it, and nothing here
copies a pause field by field.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from troupe.core.vocabulary.chunks import PauseEvent, camelize
from troupe.core.vocabulary.listing import PausedPage
from troupe.core.vocabulary.state import Pause, RunState, ToolCallState
from troupe.core.vocabulary.store import AuditEntry
from troupe.core.vocabulary.suspended import DelegatedBy, PendingToolCall, SuspendedRun, SuspendedRunList

# The pause fields every shape may take (``approvals`` by name: the pause's own list keeps counting).
_PAUSE_FIELDS = tuple(name for name in Pause.model_fields if name not in ("seq", "approvals"))
_EVENT_FIELDS = frozenset(f.name for f in fields(PauseEvent))
_PENDING_FIELDS = frozenset(f.name for f in fields(PendingToolCall))
# An audit entry's ``kind`` is the decision's, and it carries approvals only for a quorum's count.
_AUDIT_FIELDS = frozenset({"tool_call_id", "tool_name", "args", "fingerprint", "agent_path"})


def _fields(call: ToolCallState, pause: Pause) -> dict[str, Any]:
    """The pause as the call that waits on it shows it: the call's id and the pause's own fields."""
    out = {name: getattr(pause, name) for name in _PAUSE_FIELDS}
    out["in_doubt"] = pause.in_doubt.model_dump(mode="json") if pause.in_doubt is not None else None
    out["tool_call_id"] = call.tool_call_id
    out["approvals"] = [a.display for a in pause.approvals]
    return out


def _taken(names: frozenset[str], call: ToolCallState, pause: Pause) -> dict[str, Any]:
    return {name: value for name, value in _fields(call, pause).items() if name in names}


def pause_event(run_id: str, call: ToolCallState, pause: Pause) -> PauseEvent:
    """The pause as its chunk announces it (``Chunk.of_pause``)."""
    taken = _taken(_EVENT_FIELDS, call, pause)
    return PauseEvent(run_id=run_id, **{**taken, "agent_path": tuple(pause.agent_path)})


def pending_call(call: ToolCallState, pause: Pause) -> PendingToolCall:
    """The pause as a listed suspended run shows it (Mastra's ``toolCalls[]``)."""
    return PendingToolCall(requires_approval=pause.kind == "approval", **_taken(_PENDING_FIELDS, call, pause))


def suspended_run(state: RunState) -> SuspendedRun:
    """A paused run as ``list_suspended_runs`` lists it: every open pause, oldest first."""
    pending = [pending_call(call, pause) for call, pause in state.open_pauses()]
    parent = state.parent
    above = None if parent is None else DelegatedBy(parent.run_id, parent.agent_id, parent.tool_call_id)
    return SuspendedRun(
        state.run_id, state.agent_id, state.thread_id, state.resource_id, state.suspended_at, pending, above
    )


def suspended_list(page: PausedPage) -> SuspendedRunList:
    """A store's page of paused runs as ``list_suspended_runs`` and ``list_pending`` return it."""
    return SuspendedRunList([suspended_run(state) for state in page.states], page.total, page.next_cursor)


def audit_entry(state: RunState, call: ToolCallState, pause: Pause, **decision: Any) -> AuditEntry:
    """The audit record of a decision (``decision``: kind, who, when, ...) on the pause."""
    taken = _taken(_AUDIT_FIELDS, call, pause)
    return AuditEntry(
        run_id=state.run_id, agent_id=state.agent_id, resource_id=state.resource_id, **taken, **decision
    )


def notification_data(state: RunState, call: ToolCallState, pause: Pause) -> dict[str, Any]:
    """The pause as a notification's ``data`` carries it (camelCase, like the HTTP API)."""
    taken = _fields(call, pause)
    for stamp in ("paused_at", "expires_at"):
        taken[stamp] = taken[stamp].isoformat() if taken[stamp] is not None else None
    del taken["resume_schema"], taken["approvals"], taken["inner_tool_call_id"], taken["inner_fingerprint"]
    del taken["roles"]  # the listing's index, not news: a receiver learns who may decide from its policies
    run = {
        "run_id": state.run_id,
        "agent_id": state.agent_id,
        "thread_id": state.thread_id,
        "resource_id": state.resource_id,
    }
    return camelize({**run, **taken})


__all__ = [
    "audit_entry",
    "notification_data",
    "pause_event",
    "pending_call",
    "suspended_list",
    "suspended_run",
]
