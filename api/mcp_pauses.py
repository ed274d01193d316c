"""A paused run as an MCP client sees it: the elicitation that asks the person, how their answer
decides the call, and the result that says where to decide it when the client cannot be asked.

The call shown is the run's newest pause as every surface lists it (``pause_shapes.suspended_run``),
read from the run as the store holds it; a question asked the MCP 2026 way names the call (its run, id
and fingerprint) and nothing of the pause, which is read again when the answer comes.

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
import shlex
from dataclasses import dataclass
from typing import Any

from troupe.api.auth import Principal
from troupe.api.errors import InvalidRequestError
from troupe.api.service import Service
from troupe.core.vocabulary.args_preview import args_preview
from troupe.core.vocabulary.errors import DecisionConflictError, NoSuspendedRunError
from troupe.core.vocabulary.hidden_chars import visible
from troupe.core.vocabulary.pause_shapes import suspended_run
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.suspended import PendingToolCall
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
    """A call of run ``run_id`` (of agent ``agent_id``) that waits for a person, as listed."""

    agent_id: str
    run_id: str
    call: PendingToolCall

    @property
    def is_approval(self) -> bool:
        return self.call.requires_approval

    @property
    def tool_call_id(self) -> str:
        return self.call.tool_call_id

    def question(self) -> tuple[str, dict[str, Any]]:
        """The elicitation: its message and requested schema."""
        call = self.call
        path = " > ".join(call.agent_path or [self.agent_id])
        args = args_preview(call.args)
        if self.is_approval:
            return f"{path} wants to call {call.tool_name} with {args}. Approve?", APPROVAL_QUESTION
        asked = args_preview(call.suspend_payload)
        schema = call.resume_schema or {"type": "object", "properties": {}}
        return f"{path}: {call.tool_name} ({args}) asks: {asked}", schema

    async def decide(self, agent: Agent, caller: Principal, action: str, content: Any) -> RunResult:
        """Decide the call as the person answered; raises what a refused decision raises (an accepted
        answer that does not fit the question: ``ResumeDataValidationError``, nothing decided)."""
        options: dict[str, Any] = {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "fingerprint": self.call.fingerprint,
            "decided_by": caller,
            "surface": "mcp",
        }
        if action == "decline":
            return await agent.decline_tool_call_generate(**options)
        # Accepted content is resume data for either kind of pause. The MCP SDKs do not check it against
        # the requested schema, so the agent's own check does: an approval's answer must be exactly
        # {approved: boolean, reason?: string} (``as_decision``), anything else is refused
        # (ResumeDataValidationError) and the call stays paused, never taken as a decline.
        return await agent.resume_generate(content, **options)

    def where_to_decide(self, base_url: str | None) -> dict[str, Any]:
        """Every other way to decide this call: the inbox, HTTP, the CLI. Never a decision link: links go
        to approvers through the notification targets, and a paused result goes back to the requester
        (or its model), who must not be handed a way to approve its own call."""
        base = (base_url or "").rstrip("/")
        route = f"{base}/api/agents/{self.agent_id}"
        body = {"runId": self.run_id, "toolCallId": self.tool_call_id}
        # To be pasted into a shell: the ids (the call's, a model's choice) each one quoted argument.
        cli = ["troupe", "approve" if self.is_approval else "resume", self.run_id, self.tool_call_id]
        return {
            "inbox": f"{base}/inbox",
            "http": (
                {"approve": f"POST {route}/approve-tool-call", "decline": f"POST {route}/decline-tool-call"}
                if self.is_approval
                else {"resume": f"POST {route}/resume-stream", "decline": f"POST {route}/decline-tool-call"}
            ),
            "body": body,
            "cli": shlex.join(cli),
        }


@dataclass(frozen=True)
class Asked:
    """The call a question was about: its run, id and fingerprint (what it shows is read again)."""

    agent_id: str
    run_id: str
    tool_call_id: str
    fingerprint: str


async def waiting_call(
    service: Service, caller: Principal, agent: Agent, run_id: str, asked: Asked | None = None
) -> PausedCall:
    """The newest call of the caller's run ``run_id`` that waits for a person, as listed; with ``asked``,
    that call, still as it was asked about.

    Raises:
        SnapshotNotFoundError: The run is not one of the caller's resources, or is gone.
        NoSuspendedRunError: Nothing in the run waits (its call was decided elsewhere meanwhile).
        DecisionConflictError: The call ``asked`` names no longer waits as it was asked about.
    """
    await service.check_run(caller, agent, run_id)
    stored = await service.runtime.store().load_run(run_id)
    state = stored.state if stored is not None else None
    waiting = suspended_run(state).pending if state is not None and state.agent_id == agent.id else []
    if asked is not None:
        waiting = [
            c for c in waiting if (c.tool_call_id, c.fingerprint) == (asked.tool_call_id, asked.fingerprint)
        ]
        if not waiting:
            raise DecisionConflictError(
                f"tool call {asked.tool_call_id} of run {run_id} no longer waits as it was asked about "
                "(it was decided meanwhile, or the run moved on); nothing was decided",
                run_id=run_id,
                tool_call_id=asked.tool_call_id,
            )
    if not waiting:
        raise NoSuspendedRunError(
            f"run {run_id} of agent {agent.id!r} waits for no decision now (its call was decided "
            "elsewhere meanwhile); it goes on there",
            run_id=run_id,
        )
    return PausedCall(agent.id, run_id, waiting[-1])


class Questions:
    """Questions asked the MCP 2026 way: an input-required result carrying the elicitation, and the
    call it is about in ``requestState`` (``Asked``), signed (a key of this process's own), so a client
    can only echo it, not make one up. A state this process did not make (another server process, a
    restart) is refused with where to decide the run instead."""

    KEY = "decide"

    def __init__(self) -> None:
        self._secret = os.urandom(32)

    def _mac(self, body: str) -> str:
        return hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()

    def ask(self, call: PausedCall) -> Any:
        from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

        message, schema = call.question()
        state = {
            "agent_id": call.agent_id,
            "run_id": call.run_id,
            "tool_call_id": call.tool_call_id,
            "fingerprint": call.call.fingerprint,
        }
        body = base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()
        request = ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
        return InputRequiredResult(
            input_requests={self.KEY: request}, request_state=f"{body}.{self._mac(body)}"
        )

    def answer(self, params: Any) -> tuple[Asked, str, Any]:
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
        return Asked(**state), action, response.content if response else None


def paused_result(call: PausedCall, ways: dict[str, Any], note: str | None = None) -> dict[str, Any]:
    """The tool result for a paused run: text for the model and the person, and structured content."""
    kind = "approval" if call.is_approval else "an answer"
    text = (
        f"The run {call.run_id} of agent {call.agent_id!r} is paused: tool call '{call.tool_call_id}' "
        f"({call.call.tool_name}) waits for {kind}. Decide it in the inbox ({ways['inbox']}), "
        f"over HTTP ({' / '.join(ways['http'].values())} with {json.dumps(ways['body'])}), or with "
        f"`{ways['cli']}`."
    )
    if note:
        text = f"{note}\n{text}"
    text = visible(text, keep="\n")  # ids and names a model chose, shown with their hidden characters marked
    structured = {
        "status": "paused",
        "runId": call.run_id,
        "agentId": call.agent_id,
        "toolCallId": call.tool_call_id,
        "kind": "approval" if call.is_approval else "suspend",
        "toolName": call.call.tool_name,
        "args": call.call.args,
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


__all__ = [
    "APPROVAL_QUESTION",
    "Asked",
    "PausedCall",
    "Questions",
    "finished_result",
    "paused_result",
    "waiting_call",
]
