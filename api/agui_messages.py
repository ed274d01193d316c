"""An AG-UI run input as the HTTP front door's run body: the conversation in OpenAI's chat format, the
thread, and the resource the run belongs to.

An AG-UI client sends the whole conversation it holds on every run. Troupe takes the messages its agent
would have seen: user, system (``developer`` too), assistant (with its tool calls) and tool results.
Messages a subagent produced (``subagentRunId`` set) stay out, as do ``activity`` and ``reasoning``
messages, which are the client's display state. For an agent with ``Memory`` the thread already holds
the conversation, so only what came after the last answer is sent. Content parts other than text are
refused (Troupe's models take text).

The resource a run belongs to is ``forwardedProps.resourceId``; a caller with exactly one resource may
leave it out. It is checked as ``/api`` checks ``resourceId``.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import AssistantMessage, Message, RunAgentInput, ToolMessage
from pydantic import ValidationError
from troupe.api.auth import Principal, own_resource
from troupe.api.bodies import MAX_TEXT_CHARS, RunBody
from troupe.api.errors import InvalidRequestError

# As long as any id ``/api`` takes (a thread id, a resource id).
MAX_ID_CHARS = 256
_SKIPPED_ROLES = frozenset({"activity", "reasoning"})


def thread_of(run: RunAgentInput) -> str:
    """The AG-UI thread, which is the Troupe thread of the runs it starts."""
    if not 0 < len(run.thread_id) <= MAX_ID_CHARS:
        raise InvalidRequestError(f"threadId must be 1 to {MAX_ID_CHARS} characters", field="threadId")
    return run.thread_id


def resource_of(caller: Principal, run: RunAgentInput) -> str | None:
    """The resource the run belongs to: ``forwardedProps.resourceId``, or the caller's only one.

    Raises:
        InvalidRequestError: no resource named by a caller with several, or not a short string (422).
        PermissionDeniedError: a resource that is not the caller's (403).
    """
    props = run.forwarded_props if isinstance(run.forwarded_props, dict) else {}
    named = props.get("resourceId")
    if named is not None and (not isinstance(named, str) or not 0 < len(named) <= MAX_ID_CHARS):
        raise InvalidRequestError(
            f"forwardedProps.resourceId must be a string of 1 to {MAX_ID_CHARS} characters",
            field="forwardedProps.resourceId",
        )
    if named is None and not caller.admin:
        if len(caller.resources) != 1:
            raise InvalidRequestError(
                f"{caller.display!r} must name one of its resources in forwardedProps.resourceId",
                resources=sorted(caller.resources),
            )
        (named,) = caller.resources
    return own_resource(caller, named)


def chat_messages(run: RunAgentInput, *, memory: bool) -> list[dict[str, Any]]:
    """The run's conversation as the agent takes it (empty when the input carries nothing new).

    Args:
        run: the AG-UI input.
        memory: the agent keeps the thread itself: only what came after the last answer is taken.

    Returns:
        OpenAI chat-format messages.

    Raises:
        InvalidRequestError: a content part that is not text (422).
    """
    kept = [
        m for m in run.messages if m.role not in _SKIPPED_ROLES and not getattr(m, "subagent_run_id", None)
    ]
    if memory:
        answered = [i for i, m in enumerate(kept) if m.role in ("assistant", "tool")]
        kept = kept[answered[-1] + 1 :] if answered else kept
    return [_chat(m) for m in kept]


def _chat(message: Message) -> dict[str, Any]:
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in message.tool_calls
            ]
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": _text(message)}
    role = "system" if message.role == "developer" else message.role
    return {"role": role, "content": _text(message)}


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        kind = getattr(part, "type", "?")
        if kind != "text":
            raise InvalidRequestError(
                f"message {message.id!r} holds a {kind!r} part; Troupe's agents take text",
                message_id=message.id,
            )
        parts.append(part.text)
    return "\n".join(parts)


def run_body(messages: list[dict[str, Any]], thread: str, resource: str | None) -> RunBody:
    """The ``/api`` run body of these messages, validated as ``/api`` validates one (422 if not)."""
    body: dict[str, Any] = {"messages": messages, "threadId": thread}
    if resource is not None:
        body["resourceId"] = resource
    try:
        return RunBody.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)[:3]
        )
        raise InvalidRequestError(
            f"the conversation cannot be run (at most {MAX_TEXT_CHARS} characters a message): {problems}"
        ) from None


__all__ = ["MAX_ID_CHARS", "chat_messages", "resource_of", "run_body", "thread_of"]
