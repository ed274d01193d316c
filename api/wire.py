"""The JSON shapes of results over HTTP, both ways: the server writes them, the Python client reads them.

Keys are camelCase like Mastra's; user data inside (tool args and results, suspend payloads, resume
schemas) keeps its own keys (see ``troupe.core.chunks.camelize``). A listed suspended run has Mastra's fields
(``runId``, ``status``, ``threadId``, ``resourceId``, ``suspendedAt``, ``toolCalls[]`` with ``toolCallId``,
``toolName``, ``args``, ``requiresApproval``, ``suspendPayload``) and Troupe's (``agentId``, and per call
``agentPath``, ``fingerprint``, ``resumeSchema``, ``pausedAt``, ``expiresAt``, ``interrupted``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from troupe.core.chunks import camelize, snakify
from troupe.core.model_output import args_problem
from troupe.core.results import RunResult, StepResult
from troupe.core.suspended import PendingToolCall, SuspendedRun, SuspendedRunList

# The run a stream belongs to, known before its first chunk (percent-encoded: run ids are any text).
RUN_ID_HEADER = "X-Troupe-Run-Id"


# ---- RunResult ----------------------------------------------------------------------------------------


def run_result_json(result: RunResult) -> dict[str, Any]:
    return {
        "runId": result.run_id,
        "text": result.text,
        "finishReason": result.finish_reason,
        "suspendPayload": _camel(result.suspend_payload),
        "pendingToolCalls": [camelize(p) for p in result.pending_tool_calls],
        "toolCalls": [camelize(c) for c in result.tool_calls],
        "toolResults": [camelize(r) for r in result.tool_results],
        "steps": [
            {
                "step": s.step,
                "text": s.text,
                "toolCalls": [camelize(c) for c in s.tool_calls],
                "toolResults": [camelize(r) for r in s.tool_results],
                "finishReason": s.finish_reason,
            }
            for s in result.steps
        ],
        "usage": camelize(result.usage),
        "error": result.error,
    }


def run_result_from_json(data: dict[str, Any]) -> RunResult:
    return RunResult(
        run_id=data.get("runId", ""),
        text=data.get("text", ""),
        finish_reason=data.get("finishReason"),
        suspend_payload=_snake(data.get("suspendPayload")),
        pending_tool_calls=[snakify(p) for p in data.get("pendingToolCalls") or []],
        tool_calls=[snakify(c) for c in data.get("toolCalls") or []],
        tool_results=[snakify(r) for r in data.get("toolResults") or []],
        steps=[
            StepResult(
                step=s.get("step", i + 1),
                text=s.get("text", ""),
                tool_calls=[snakify(c) for c in s.get("toolCalls") or []],
                tool_results=[snakify(r) for r in s.get("toolResults") or []],
                finish_reason=s.get("finishReason"),
            )
            for i, s in enumerate(data.get("steps") or [])
        ],
        usage=snakify(data.get("usage") or {}),
        error=data.get("error"),
    )


def _camel(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if payload is None else camelize(payload)


def _snake(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if payload is None else snakify(payload)


# ---- suspended runs -----------------------------------------------------------------------------------


def suspended_runs_json(found: SuspendedRunList) -> dict[str, Any]:
    return {"runs": [_run_json(r) for r in found.runs], "total": found.total}


def shown(value: Any) -> Any:
    """``value`` as a listing shows it: what could not be rendered (a run stored before model output
    was checked, nested too deep or holding invalid text) becomes a placeholder saying so, so one such
    run never takes a whole listing down."""
    problem = args_problem(value)
    return value if problem is None else {"unrenderable": f"cannot be shown: {problem}"}


def _run_json(run: SuspendedRun) -> dict[str, Any]:
    return {
        "runId": run.run_id,
        "agentId": run.agent_id,
        "status": "suspended",
        "threadId": run.thread_id,
        "resourceId": run.resource_id,
        "suspendedAt": _iso(run.suspended_at),
        "toolCalls": [
            {
                "toolCallId": p.tool_call_id,
                "toolName": p.tool_name,
                "args": shown(p.args),
                "requiresApproval": p.requires_approval,
                "suspendPayload": shown(p.suspend_payload),
                "agentPath": p.agent_path,
                "fingerprint": p.fingerprint,
                "resumeSchema": p.resume_schema,
                "pausedAt": _iso(p.paused_at),
                "expiresAt": _iso(p.expires_at),
                "interrupted": p.interrupted,
            }
            for p in run.pending
        ],
    }


def suspended_runs_from_json(data: dict[str, Any]) -> SuspendedRunList:
    runs = [
        SuspendedRun(
            run_id=r["runId"],
            agent_id=r.get("agentId", ""),
            thread_id=r.get("threadId"),
            resource_id=r.get("resourceId"),
            suspended_at=_date(r.get("suspendedAt")),
            pending=[
                PendingToolCall(
                    tool_call_id=p.get("toolCallId", ""),
                    tool_name=p.get("toolName", ""),
                    args=p.get("args") or {},
                    requires_approval=bool(p.get("requiresApproval")),
                    suspend_payload=p.get("suspendPayload"),
                    agent_path=list(p.get("agentPath") or []),
                    fingerprint=p.get("fingerprint", ""),
                    resume_schema=p.get("resumeSchema"),
                    paused_at=_date(p.get("pausedAt")) or datetime.min,
                    interrupted=bool(p.get("interrupted")),
                    expires_at=_date(p.get("expiresAt")),
                )
                for p in r.get("toolCalls") or []
            ],
        )
        for r in data.get("runs") or []
    ]
    return SuspendedRunList(runs, int(data.get("total", len(runs))))


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _date(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text)


__all__ = [
    "RUN_ID_HEADER",
    "run_result_from_json",
    "run_result_json",
    "suspended_runs_from_json",
    "suspended_runs_json",
]
