"""What ``list_suspended_runs`` returns: runs waiting for a human, and what each waits on."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.state import RunState


@dataclass(frozen=True)
class PendingToolCall:
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    requires_approval: bool
    suspend_payload: Any
    agent_path: list[str]
    fingerprint: str
    resume_schema: dict[str, Any] | None
    paused_at: datetime
    interrupted: bool = False
    expires_at: datetime | None = None


@dataclass(frozen=True)
class SuspendedRun:
    run_id: str
    agent_id: str
    thread_id: str | None
    resource_id: str | None
    suspended_at: datetime | None
    pending: list[PendingToolCall] = field(default_factory=list)

    @classmethod
    def from_state(cls, state: RunState) -> SuspendedRun:
        pending = [
            PendingToolCall(
                tool_call_id=call.tool_call_id,
                tool_name=pause.tool_name,
                args=pause.args,
                requires_approval=pause.kind == "approval",
                suspend_payload=pause.suspend_payload,
                agent_path=pause.agent_path,
                fingerprint=pause.fingerprint,
                resume_schema=pause.resume_schema,
                paused_at=pause.paused_at,
                interrupted=pause.interrupted,
                expires_at=pause.expires_at,
            )
            for call, pause in state.open_pauses()
        ]
        return cls(
            state.run_id, state.agent_id, state.thread_id, state.resource_id, state.suspended_at, pending
        )


@dataclass(frozen=True)
class SuspendedRunList:
    runs: list[SuspendedRun]
    total: int


__all__ = ["PendingToolCall", "SuspendedRun", "SuspendedRunList"]
