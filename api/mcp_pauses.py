"""A paused run as an MCP client sees it: the elicitation that asks the person, how their answer
decides the call, and the result that says where to decide it when the client cannot be asked.

An approval pause asks ``{approved: boolean, reason?: string}``; a ``suspend()`` pause asks for its
resume schema. Accept decides (approve, decline with the reason, or resume with the data), decline
declines, cancel leaves the run paused. Every decision goes through the agent's own decision methods
with the caller's principal (its name and roles): the same claim, fingerprint check, approver policies
and audit as the HTTP routes and the inbox.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from typing import Any

from troupe.api.auth import Principal
from troupe.api.errors import InvalidRequestError
from troupe.core.vocabulary.results import RunResult
from troupe.supervisor.agent import Agent

APPROVAL_QUESTION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve", "description": "Let the tool call run"},
        "reason": {
            "type": "string",
            "title": "Reason",
            "description": "Why not (the agent's model is told), when declining",
        },
    },
    "required": ["approved"],
}


@dataclass(frozen=True)
class PausedCall:
    """The call a paused run waits on (the latest pause of its result)."""

    agent_id: str
    run_id: str
    payload: dict[str, Any]

    @property
    def is_approval(self) -> bool:
        return "suspend_payload" not in self.payload

    @property
    def tool_call_id(self) -> str:
        return str(self.payload["tool_call_id"])

    def question(self) -> tuple[str, dict[str, Any]]:
        """The elicitation: its message and requested schema."""
        path = " > ".join(self.payload.get("agent_path") or [self.agent_id])
        args = json.dumps(self.payload.get("args"), ensure_ascii=False)[:2000]
        tool = self.payload.get("tool_name")
        if self.is_approval:
            return f"{path} wants to call {tool} with {args}. Approve?", APPROVAL_QUESTION
        asked = json.dumps(self.payload.get("suspend_payload"), ensure_ascii=False)[:2000]
        schema = self.payload.get("resume_schema") or {"type": "object", "properties": {}}
        return f"{path}: {tool} ({args}) asks: {asked}", schema

    async def decide(self, agent: Agent, caller: Principal, action: str, content: Any) -> RunResult:
        """Decide the call as the person answered; raises what a refused decision raises."""
        options: dict[str, Any] = {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "fingerprint": self.payload.get("fingerprint"),
            "decided_by": caller,
            "surface": "mcp",
        }
        if action == "decline":
            return await agent.decline_tool_call_generate(**options)
        if not self.is_approval:
            return await agent.resume_generate(content, **options)
        content = content if isinstance(content, dict) else {}
        if content.get("approved") is True:
            return await agent.approve_tool_call_generate(**options)
        reason = content.get("reason")
        return await agent.decline_tool_call_generate(
            reason=reason if isinstance(reason, str) else None, **options
        )

    def where_to_decide(self, base_url: str | None) -> dict[str, Any]:
        """Every other way to decide this call: the inbox, HTTP, the CLI. Never a decision link: links go
        to approvers through the notification targets, and a paused result goes back to the requester
        (or its model), who must not be handed a way to approve its own call."""
        base = (base_url or "").rstrip("/")
        route = f"{base}/api/agents/{self.agent_id}"
        body = {"runId": self.run_id, "toolCallId": self.tool_call_id}
        return {
            "inbox": f"{base}/inbox",
            "http": (
                {"approve": f"POST {route}/approve-tool-call", "decline": f"POST {route}/decline-tool-call"}
                if self.is_approval
                else {"resume": f"POST {route}/resume-stream", "decline": f"POST {route}/decline-tool-call"}
            ),
            "body": body,
            "cli": f"troupe {'approve' if self.is_approval else 'resume'} {self.run_id} {self.tool_call_id}",
        }


class Questions:
    """Questions asked the MCP 2026 way: an input-required result carrying the elicitation, and the
    call it is about in ``requestState``, signed (a key of this process's own), so a client can only
    echo it, not make one up. A state this process did not make (another server process, a restart)
    is refused with where to decide the run instead."""

    KEY = "decide"

    def __init__(self) -> None:
        self._secret = os.urandom(32)

    def _mac(self, body: str) -> str:
        return hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()

    def ask(self, call: PausedCall) -> Any:
        from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

        message, schema = call.question()
        state = {"agent_id": call.agent_id, "run_id": call.run_id, "payload": _kept(call.payload)}
        body = base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()
        request = ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
        return InputRequiredResult(
            input_requests={self.KEY: request}, request_state=f"{body}.{self._mac(body)}"
        )

    def answer(self, params: Any) -> tuple[PausedCall, str, Any]:
        """The call a client's retry answers, and its answer (action, content)."""
        body, _, mac = str(params.request_state).partition(".")
        if not hmac.compare_digest(mac, self._mac(body)):
            raise InvalidRequestError(
                "requestState was not made by this server process (restarted, or another replica): the run "
                "is still paused; decide it in the inbox or over HTTP"
            )
        state = json.loads(base64.urlsafe_b64decode(body))
        response = (params.input_responses or {}).get(self.KEY)
        action = getattr(response, "action", "cancel")
        if params.name != state["agent_id"]:
            raise InvalidRequestError("requestState belongs to a call of another tool")
        return (
            PausedCall(state["agent_id"], state["run_id"], state["payload"]),
            action,
            response.content if response else None,
        )


def _kept(payload: dict[str, Any]) -> dict[str, Any]:
    """What deciding and describing a pause needs of its payload (the rest stays in the store)."""
    keep = ("tool_call_id", "tool_name", "args", "fingerprint", "agent_path", "expires_at", "suspend_payload")
    return {key: payload[key] for key in keep if key in payload}


def paused_result(call: PausedCall, ways: dict[str, Any], note: str | None = None) -> dict[str, Any]:
    """The tool result for a paused run: text for the model and the person, and structured content."""
    kind = "approval" if call.is_approval else "an answer"
    text = (
        f"The run {call.run_id} of agent {call.agent_id!r} is paused: tool call {call.tool_call_id} "
        f"({call.payload.get('tool_name')}) waits for {kind}. Decide it in the inbox ({ways['inbox']}), "
        f"over HTTP ({' / '.join(ways['http'].values())} with {json.dumps(ways['body'])}), or with "
        f"`{ways['cli']}`."
    )
    if note:
        text = f"{note}\n{text}"
    structured = {
        "status": "paused",
        "runId": call.run_id,
        "agentId": call.agent_id,
        "toolCallId": call.tool_call_id,
        "kind": "approval" if call.is_approval else "suspend",
        "toolName": call.payload.get("tool_name"),
        "args": call.payload.get("args"),
        "decide": ways,
    }
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def finished_result(result: RunResult) -> dict[str, Any]:
    structured = {"status": result.finish_reason or "stop", "runId": result.run_id, "text": result.text}
    return {
        "content": [{"type": "text", "text": result.text}],
        "structuredContent": structured,
        "isError": False,
    }


__all__ = ["APPROVAL_QUESTION", "PausedCall", "Questions", "finished_result", "paused_result"]
