"""Request bodies of the HTTP routes: camelCase JSON, validated by pydantic before anything runs.

The shapes follow Mastra's server (so ``@mastra/client-js`` works unchanged): fields Troupe does not know
(``clientTools``, ``format``, ``model``...) are ignored; ``threadId``/``resourceId`` may also come as
Mastra's ``memory: {thread, resource}``. ``requireToolApproval`` is only a bool over HTTP (a policy function
cannot be sent). Every string must be valid Unicode, so what is stored can always be written.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel
from troupe.api.errors import InvalidRequestError
from troupe.core.vocabulary.seconds import MAX_SECONDS

# The longest id a body carries (a thread, a resource, a run, a tool call).
MAX_ID_CHARS = 256
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
# The longest text a body carries (a message, a decline's reason).
MAX_TEXT_CHARS = 100_000
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
# Long enough for any human, short enough that a deadline stays a valid date (the Python API's bound).
MAX_APPROVAL_TIMEOUT_S = MAX_SECONDS


class _Part(BaseModel):
    """A piece of a body: unknown fields are ignored (Mastra clients send more than Troupe uses)."""

    model_config = ConfigDict(extra="ignore")


class _Body(_Part):
    """A whole request body: camelCase keys; strings that cannot be encoded (lone surrogates) are refused."""

    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=False)

    @model_validator(mode="after")
    def _encodable(self) -> Any:
        try:
            json.dumps(self.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
        except (UnicodeEncodeError, ValueError) as exc:
            raise ValueError(f"the body holds text that is not valid Unicode: {exc}") from None
        return self


# ---- messages (OpenAI chat format, as the agent loop keeps them) ----------------------------------------


class FunctionCall(_Part):
    name: Id
    arguments: Text = "{}"


class ToolCallSpec(_Part):
    id: Id
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Part):
    role: Literal["system", "user", "assistant", "tool"]
    content: Text | list[dict[str, Any]] | None
    tool_calls: list[ToolCallSpec] | None = None
    tool_call_id: Id | None = None
    name: Id | None = None

    @model_validator(mode="after")
    def _answers_a_call(self) -> Any:
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return self


class ThreadRef(_Part):
    id: Id


class MemoryRef(_Part):
    """Mastra's ``memory`` option: which thread (and resource) a run belongs to."""

    thread: Id | ThreadRef
    resource: Id | None = None


# ---- starting runs ------------------------------------------------------------------------------------


class RunBody(_Body):
    """``POST /stream`` and ``/generate``."""

    messages: Text | Annotated[list[Message], Field(min_length=1, max_length=1000)]
    require_tool_approval: bool | None = None
    auto_resume_suspended_tools: bool | None = None
    thread_id: Id | None = None
    resource_id: Id | None = None
    memory: MemoryRef | None = None
    request_context: dict[str, Any] | None = None
    max_steps: Annotated[int, Field(ge=1, le=1000)] | None = None
    run_id: Id | None = None
    approval_timeout: Annotated[float, Field(gt=0, le=MAX_APPROVAL_TIMEOUT_S, allow_inf_nan=False)] | None = (
        None
    )
    max_duration_s: Annotated[float, Field(gt=0, le=MAX_APPROVAL_TIMEOUT_S, allow_inf_nan=False)] | None = (
        None
    )
    duration_counts_waiting: bool | None = None

    def thread(self) -> str | None:
        from_memory = None
        if self.memory is not None:
            ref = self.memory.thread
            from_memory = ref if isinstance(ref, str) else ref.id
        return _one("threadId", self.thread_id, from_memory)

    def resource(self) -> str | None:
        return _one("resourceId", self.resource_id, self.memory.resource if self.memory else None)

    def python_messages(self) -> str | list[dict[str, Any]]:
        if isinstance(self.messages, str):
            return self.messages
        return [m.model_dump(exclude_unset=True) for m in self.messages]

    def options(self, resource_id: str | None) -> dict[str, Any]:
        """Keyword arguments for ``Agent.stream``/``generate`` (omitted options stay omitted)."""
        given = {
            "require_tool_approval": self.require_tool_approval,
            "auto_resume_suspended_tools": self.auto_resume_suspended_tools,
            "thread_id": self.thread(),
            "resource_id": resource_id,
            "request_context": self.request_context,
            "max_steps": self.max_steps,
            "run_id": self.run_id,
            "approval_timeout": self.approval_timeout,
            "max_duration_s": self.max_duration_s,
            "duration_counts_waiting": self.duration_counts_waiting,
        }
        return {k: v for k, v in given.items() if v is not None}


def _one(name: str, direct: str | None, from_memory: str | None) -> str | None:
    if direct is not None and from_memory is not None and direct != from_memory:
        raise InvalidRequestError(
            f"{name} and memory disagree ({direct!r} vs {from_memory!r}); send one of them", field=name
        )
    return direct if direct is not None else from_memory


# ---- deciding -----------------------------------------------------------------------------------------


class ApproveBody(_Body):
    """``POST /approve-tool-call`` and ``/approve-tool-call-generate``. Without ``toolCallId`` (which
    Mastra's clients always send) the run's most recently paused call is decided, as in Python."""

    run_id: Id
    tool_call_id: Id | None = None
    edited_args: dict[str, Any] | None = None
    fingerprint: Id | None = None


class DeclineBody(_Body):
    """``POST /decline-tool-call`` and ``/decline-tool-call-generate`` (``toolCallId`` as for approving)."""

    run_id: Id
    tool_call_id: Id | None = None
    reason: Text | None = None
    fingerprint: Id | None = None


class ResumeBody(_Body):
    """``POST /resume-stream`` and ``/resume-generate``: answer a tool that paused itself."""

    run_id: Id
    resume_data: Any = Field(description="The answer, validated against the tool's resume schema")
    tool_call_id: Id | None = None
    fingerprint: Id | None = None


class CancelBody(_Body):
    """``POST /cancel-run``: cancel a run. With ``toolCallId`` and ``fingerprint`` (what the inbox's
    card sends) only while that call still waits as it was shown: against an approval of it, one wins."""

    run_id: Id
    reason: Text | None = None
    tool_call_id: Id | None = None
    fingerprint: Id | None = None


class ToolApprovalBody(_Body):
    """``POST /send-tool-approval``: decide the paused call of the run suspended on a thread."""

    thread_id: Id
    resource_id: Id | None = None
    approved: bool
    tool_call_id: Id | None = None
    reason: Text | None = None
    resume_data: Any = None

    @model_validator(mode="after")
    def _resume_data_only_approves(self) -> Any:
        if self.resume_data is not None and not self.approved:
            raise ValueError(
                "resumeData answers a paused tool and cannot come with approved: false; "
                "to decline, send approved: false without resumeData"
            )
        return self


__all__ = [
    "ApproveBody",
    "CancelBody",
    "DeclineBody",
    "MemoryRef",
    "Message",
    "ResumeBody",
    "RunBody",
    "ToolApprovalBody",
]
