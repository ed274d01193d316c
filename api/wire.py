"""The JSON shapes of results over HTTP, both ways: the server writes them, the Python client reads them.

Keys are camelCase like Mastra's; user data inside (tool args and results, suspend payloads, resume schemas)
keeps its own keys (see ``troupe.core.vocabulary.chunks.camelize``). A ``generate`` body has Mastra's fields:
``toolCalls``/``toolResults`` are chunks (``{type, runId, from, payload}``), a pause's ``resumeSchema`` is a
JSON string, ``totalUsage``, ``messages`` (the run's conversation, OpenAI chat format) and ``response``
(``{messages}``: what the run added after the last user message). A listed suspended run has Mastra's fields
(``runId``, ``status``, ``threadId``, ``resourceId``, ``suspendedAt``, ``toolCalls[]`` with ``toolCallId``,
``toolName``, ``args``, ``requiresApproval``, ``suspendPayload``) and Troupe's (``agentId``, ``delegatedBy``
for a subagent's run, and per call ``agentPath``, ``fingerprint``, ``resumeSchema``, ``pausedAt``,
``expiresAt``, ``interrupted``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from troupe.core.vocabulary.chunks import Chunk, camelize, payload_from_wire, snakify, wire_payload
from troupe.core.vocabulary.results import RunResult, StepResult
from troupe.core.vocabulary.storable import args_problem
from troupe.core.vocabulary.suspended import DelegatedBy, PendingToolCall, SuspendedRun, SuspendedRunList

# The run a stream belongs to, known before its first chunk (percent-encoded: run ids are any text).
RUN_ID_HEADER = "X-Troupe-Run-Id"


# ---- RunResult ----------------------------------------------------------------------------------------


def run_result_json(result: RunResult) -> dict[str, Any]:
    usage = camelize(result.usage)
    body: dict[str, Any] = {
        "runId": result.run_id,
        "text": result.text,
        "finishReason": result.finish_reason,
        "suspendPayload": _wire(result.suspend_payload),
        "pendingToolCalls": [wire_payload(p) for p in result.pending_tool_calls],
        "toolCalls": _chunks(result.run_id, "tool-call", result.tool_calls),
        "toolResults": _chunks(result.run_id, "tool-result", result.tool_results),
        "steps": [
            {
                "step": s.step,
                "text": s.text,
                "toolCalls": _chunks(result.run_id, "tool-call", s.tool_calls),
                "toolResults": _chunks(result.run_id, "tool-result", s.tool_results),
                "finishReason": s.finish_reason,
            }
            for s in result.steps
        ],
        "usage": usage,
        "totalUsage": usage,
        "messages": result.messages,
        "response": {"messages": _since_last_user(result.messages)},
        "error": result.error,
    }
    if result.suspend_payload is not None:
        body["resumeSchema"] = body["suspendPayload"].get("resumeSchema")
    return body


def run_result_from_json(data: dict[str, Any]) -> RunResult:
    return RunResult(
        run_id=data.get("runId", ""),
        text=data.get("text", ""),
        finish_reason=data.get("finishReason"),
        suspend_payload=_python(data.get("suspendPayload")),
        pending_tool_calls=[payload_from_wire(p) for p in data.get("pendingToolCalls") or []],
        tool_calls=_payloads(data.get("toolCalls")),
        tool_results=_payloads(data.get("toolResults")),
        steps=[
            StepResult(
                step=s.get("step", i + 1),
                text=s.get("text", ""),
                tool_calls=_payloads(s.get("toolCalls")),
                tool_results=_payloads(s.get("toolResults")),
                finish_reason=s.get("finishReason"),
            )
            for i, s in enumerate(data.get("steps") or [])
        ],
        usage=snakify(data.get("usage") or {}),
        error=data.get("error"),
        messages=list(data.get("messages") or []),
    )


def _chunks(run_id: str, kind: Any, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls and results as Mastra's generate body lists them: as the chunks that carried them."""
    return [Chunk(kind, run_id, p).to_wire() for p in payloads]


def _payloads(chunks: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [Chunk.from_wire(c).payload for c in chunks or []]


def _since_last_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return messages[last + 1 :]


def _wire(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if payload is None else wire_payload(payload)


def _python(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if payload is None else payload_from_wire(payload)


# ---- suspended runs -----------------------------------------------------------------------------------


def suspended_runs_json(found: SuspendedRunList) -> dict[str, Any]:
    """Mastra's ``{runs, total}``, with ``nextCursor``: the page after this one (null on the last)."""
    return {"runs": [_run_json(r) for r in found.runs], "total": found.total, "nextCursor": found.next_cursor}


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
                "toolOrigin": shown(p.tool_origin),
                "inDoubt": _in_doubt(p.in_doubt),
            }
            for p in run.pending
        ],
        "delegatedBy": _delegated_by(run.delegated_by),
    }


def _delegated_by(above: DelegatedBy | None) -> dict[str, Any] | None:
    """A subagent's run: the run that delegated it, where its calls are decided (null at the top)."""
    if above is None:
        return None
    return {"runId": above.run_id, "agentId": above.agent_id, "toolCallId": above.tool_call_id}


def _from_wire_delegated_by(above: Any) -> DelegatedBy | None:
    if not isinstance(above, dict):
        return None
    return DelegatedBy(above.get("runId", ""), above.get("agentId", ""), above.get("toolCallId", ""))


def _from_wire_doubt(doubt: Any) -> dict[str, Any] | None:
    if not isinstance(doubt, dict):
        return None
    return {
        "owner": doubt.get("owner"),
        "last_seen": doubt.get("lastSeen"),
        "deadline": doubt.get("deadline"),
    }


def _in_doubt(doubt: dict[str, Any] | None) -> dict[str, Any] | None:
    """A call in doubt after a takeover: its first host, that host's last write, the call's deadline."""
    if doubt is None:
        return None
    return {
        "owner": doubt.get("owner"),
        "lastSeen": doubt.get("last_seen"),
        "deadline": doubt.get("deadline"),
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
                    tool_origin=p.get("toolOrigin"),
                    in_doubt=_from_wire_doubt(p.get("inDoubt")),
                )
                for p in r.get("toolCalls") or []
            ],
            delegated_by=_from_wire_delegated_by(r.get("delegatedBy")),
        )
        for r in data.get("runs") or []
    ]
    cursor = data.get("nextCursor")
    total = int(data.get("total", len(runs)))
    return SuspendedRunList(runs, total, cursor if isinstance(cursor, str) else None)


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
