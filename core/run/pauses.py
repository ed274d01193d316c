"""Pause bookkeeping: the pauses a run opens, their order and deadlines, and how they are announced.

A run numbers its pauses (``RunState.pause_seq``) so the newest is the default target of a decision;
each pause may carry a deadline (the run's ``approval_timeout``). A pause is the agent's own (its tool
is gated or suspended itself) or lifted from a subagent's ``PauseEvent`` and shown with this agent's
call id, the leaf's tool and args and the path down to the leaf. It is announced as a pause chunk only
once it is durable (``troupe.core.run.loop``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from troupe.core.deciding.approvers import ApproverPolicies
from troupe.core.deciding.decisions import APPROVAL_RESUME_SCHEMA
from troupe.core.vocabulary.chunks import Chunk, PauseEvent
from troupe.core.vocabulary.pause_shapes import pause_event
from troupe.core.vocabulary.state import Clock, InDoubt, Pause, RunState, ToolCallState, fingerprint
from troupe.core.vocabulary.tools import Tool


class Pauses:
    """Opens the pauses of one agent's runs (``agent_id``), with deadlines measured by ``clock``, each
    approval of a top-level run with the roles its approver policy names (``policies``)."""

    def __init__(self, agent_id: str, clock: Clock, policies: ApproverPolicies | None = None) -> None:
        self.agent_id = agent_id
        self.clock = clock
        self.policies = policies

    def own(
        self,
        state: RunState,
        call: ToolCallState,
        tool: Tool,
        kind: Literal["approval", "suspend"],
        payload: Any = None,
        resume_schema: dict[str, Any] | None = None,
    ) -> Pause:
        """A pause of one of this agent's own tools (``resume_schema``: the one its ``suspend()`` gave)."""
        if kind == "approval":
            resume_schema = APPROVAL_RESUME_SCHEMA
        elif tool.resume_schema is not None or resume_schema is None:
            resume_schema = tool.resume_json_schema()
        path = [self.agent_id]
        return Pause(
            kind=kind,
            tool_name=call.tool_name,
            args=call.effective_args,
            suspend_payload=payload,
            # An approval is answered with {approved, reason?} (resume_stream), as in Mastra.
            resume_schema=resume_schema,
            agent_path=path,
            fingerprint=fingerprint(call.tool_call_id, call.tool_name, call.effective_args),
            seq=next_seq(state),
            expires_at=self.deadline(state),
            tool_origin=tool.origin,
            roles=self.roles(state, kind, call.tool_name, path),
        )

    def lift(self, state: RunState, call: ToolCallState, inner: PauseEvent) -> Pause:
        """A subagent's pause, as this agent shows it on its delegation call ``call``."""
        path = [self.agent_id, *inner.agent_path]
        return Pause(
            kind=inner.kind,
            tool_name=inner.tool_name,
            args=inner.args,
            suspend_payload=inner.suspend_payload,
            resume_schema=inner.resume_schema,
            agent_path=path,
            fingerprint=fingerprint(call.tool_call_id, inner.tool_name, inner.args, inner.fingerprint),
            inner_tool_call_id=inner.tool_call_id,
            inner_fingerprint=inner.fingerprint,
            seq=next_seq(state),
            interrupted=inner.interrupted,
            expires_at=self.deadline(state, inner.expires_at),
            tool_origin=inner.tool_origin,
            in_doubt=InDoubt.model_validate(inner.in_doubt) if inner.in_doubt is not None else None,
            roles=self.roles(state, inner.kind, inner.tool_name, path),
        )

    def roles(self, state: RunState, kind: str, tool_name: str, path: list[str]) -> list[str] | None:
        """The roles the approver policy governing this approval names, for listings by role (a
        top-level run's only: approver policies govern the top, where the whole path is known)."""
        if self.policies is None or kind != "approval" or state.parent is not None:
            return None
        policy = self.policies.for_call(tool_name, path)
        return sorted(policy.roles) if policy is not None and policy.roles is not None else None

    def deadline(self, state: RunState, inherited: datetime | None = None) -> datetime | None:
        """A new pause's expiry: this run's approval_timeout from now, else what the subagent set; and
        no later than the run's own end, if its ``max_duration_s`` counts the time it waits."""
        expires = inherited
        if state.approval_timeout is not None:
            expires = self.clock() + timedelta(seconds=state.approval_timeout)
        end = state.duration_deadline() if state.duration_counts_waiting else None
        if end is not None and (expires is None or end < expires):
            return end  # the expiry sweep finds the run then, and stops it (RunEngine.begin_expiry)
        return expires


def next_seq(state: RunState) -> int:
    state.pause_seq += 1
    return state.pause_seq


def pause_chunk(run_id: str, call: ToolCallState, pause: Pause) -> Chunk:
    return Chunk.of_pause(pause_event(run_id, call, pause))


def open_pause_chunks(state: RunState) -> list[Chunk]:
    """Every open pause of the run, oldest first (so the last one announced is the newest)."""
    return [pause_chunk(state.run_id, call, pause) for call, pause in state.open_pauses()]


__all__ = ["Pauses", "next_seq", "open_pause_chunks", "pause_chunk"]
