"""AG-UI interrupts: each open pause of a thread as one canonical ``Interrupt``, and each ``resume`` entry
checked into an answer that the agent's own decision methods carry out.

An interrupt's ``id`` is the paused call's ``tool_call_id`` (the top run's, as every Troupe surface names
it), so it is the same on every reconnect. A pause lifted from a subagent is ``<tool_call_id>~<fingerprint>``
instead: one delegation call can hold several of its subagent's pauses at once, and AG-UI ids are unique in
a run. ``reason`` is AG-UI's core value for the kind (``tool_call`` for an approval, ``input_required`` for
a ``suspend()`` or an MCP elicitation); ``metadata["troupe"]`` carries the rest (kind, tool, args, origin,
agent path, fingerprint, what may be edited).

Every entry of a ``resume`` list is checked before anything is decided: an entry that names no open
interrupt, names one already decided, or carries no or an invalid answer raises the ``AguiResumeError``
that says which, and no entry is decided. An entry for an interrupt that a cancel of its run withdrew
raises that cancel's ``RunCancelledError`` (``AGENT_RUN_CANCELLED``, naming who cancelled it). The
checks are the agent's own (``as_decision``, ``merged_args``, ``validated_resume_data``), so an answer
they let through is one the agent takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ag_ui.core import Interrupt, ResumeEntry
from troupe.api.mcp_pauses import PausedCall
from troupe.api.service import Service
from troupe.core.deciding.cancelling import as_recorded, cancelled_error
from troupe.core.deciding.decisions import Target, as_decision, merged_args, validated_resume_data
from troupe.core.run.delegation import child_run_id
from troupe.core.vocabulary.args_preview import args_preview
from troupe.core.vocabulary.errors import (
    AgentNotFoundError,
    DecisionRejectedError,
    RunCancelledError,
    TroupeError,
)
from troupe.core.vocabulary.json_schemas import instance_errors
from troupe.core.vocabulary.requests import Decline, Resume
from troupe.core.vocabulary.state import CallStatus, Pause, ToolCallState
from troupe.core.vocabulary.store import AuditEntry
from troupe.core.vocabulary.suspended import PendingToolCall, SuspendedRun
from troupe.core.vocabulary.tools import Tool
from troupe.supervisor.agent import Agent

# Audit kinds that mean "this pause was decided" (a quorum's partial approval leaves it open).
DECIDED_KINDS = frozenset({"approved", "declined", "resumed", "expired"})


class AguiResumeError(TroupeError):
    """An AG-UI run input that cannot be taken: it ends in ``RUN_ERROR`` with this ``code``, and nothing
    is decided."""

    code = "AGUI_RESUME_ERROR"
    http_status = 409


class InterruptOpenError(AguiResumeError):
    """A new run (messages, no ``resume``) on a thread whose run waits on interrupts."""

    code = "AGUI_INTERRUPT_OPEN"


class ResumeMissingError(AguiResumeError):
    """A ``resolved`` entry without the ``payload`` that answers it."""

    code = "AGUI_RESUME_MISSING"


class ResumeUnknownError(AguiResumeError):
    """An entry whose ``interruptId`` names no interrupt of this thread."""

    code = "AGUI_RESUME_UNKNOWN"


class ResumeDecidedError(AguiResumeError):
    """An entry for an interrupt that was already decided (a replayed resume)."""

    code = "AGUI_RESUME_ALREADY_DECIDED"


class ResumeInvalidError(AguiResumeError):
    """An entry whose answer does not fit its interrupt (shape, schema, edits), or a second entry for the
    same interrupt."""

    code = "AGUI_RESUME_INVALID"
    http_status = 422


def interrupt_id(run_id: str, tool_call_id: str, agent_path: Sequence[str], fingerprint: str) -> str:
    """The AG-UI id of a pause: its tool call id (qualified by its fingerprint when it is a subagent's)
    and the run it waits in.

    Call ids repeat from run to run (a scripted or local model's ``call-1``), and a thread may hold
    several runs, waiting at once or one after the other: the run in the id keeps a resume, and a
    replay of one, to the pause it names.

    Args:
        run_id: the top run that waits.
        tool_call_id: the top run's tool call that waits (a delegation call for a subagent's pause).
        agent_path: the agents from the top run's down to the one whose tool asks.
        fingerprint: the pause's fingerprint, as the top run records it.

    Returns:
        The id, the same on every announcement of the pause, and no other pause's.

    Example:
        >>> interrupt_id("run-7", "call-1", ["ops"], "ab12")
        'call-1@run-7'
        >>> interrupt_id("run-7", "d1", ["boss", "clerk"], "ab12")
        'd1~ab12@run-7'
    """
    call = tool_call_id if len(agent_path) <= 1 else f"{tool_call_id}~{fingerprint}"
    return f"{call}@{run_id}"


def decided_ids(entries: Iterable[AuditEntry], agent_id: str) -> set[str]:
    """The interrupt ids the audit log says were decided in runs of ``agent_id``."""
    return {
        interrupt_id(e.run_id, e.tool_call_id, e.agent_path, e.fingerprint)
        for e in entries
        if e.agent_id == agent_id and e.kind in DECIDED_KINDS
    }


def withdrawn_ids(entries: Iterable[AuditEntry], agent_id: str) -> dict[str, RunCancelledError]:
    """The interrupt ids the audit log says a cancel of their run withdrew (in runs of ``agent_id``),
    each with the error a resume of it gets: the cancel, naming who cancelled the run and why."""
    entries = [e for e in entries if e.agent_id == agent_id and e.kind == "cancelled"]
    runs = {e.run_id: as_recorded(e) for e in entries if not e.tool_call_id}
    return {
        interrupt_id(e.run_id, e.tool_call_id, e.agent_path, e.fingerprint): cancelled_error(
            e.run_id, runs[e.run_id], "the interrupt was withdrawn and nothing was decided"
        )
        for e in entries
        if e.tool_call_id and e.run_id in runs
    }


@dataclass(frozen=True)
class OpenPause:
    """One pause waiting for a human: its run, the call as listed, and the leaf tool (None when the
    agent's definition does not hold it, e.g. an MCP server's)."""

    run: SuspendedRun
    call: PendingToolCall
    tool: Tool | None

    @property
    def id(self) -> str:
        """Its interrupt id (``interrupt_id``)."""
        call = self.call
        return interrupt_id(self.run.run_id, call.tool_call_id, call.agent_path, call.fingerprint)

    @property
    def is_approval(self) -> bool:
        """Whether it waits for an approval (else for input: a ``suspend()`` or an elicitation)."""
        return self.call.requires_approval

    @property
    def editable(self) -> bool:
        """Whether the person may change the call's arguments (an approval of a tool that allows it)."""
        return self.is_approval and self.tool is not None and self.tool.allow_edited_args

    def interrupt(self) -> Interrupt:
        """The pause as AG-UI's canonical interrupt."""
        call = self.call
        message, schema = PausedCall(self.run.agent_id, self.run.run_id, call).question()
        if self.editable:
            schema = _with_edits(schema, call.args)
        subagent = child_run_id(self.run.run_id, call.tool_call_id) if len(call.agent_path) > 1 else None
        return Interrupt(
            id=self.id,
            reason="tool_call" if self.is_approval else "input_required",
            message=message,
            tool_call_id=call.tool_call_id,
            response_schema=schema,
            expires_at=call.expires_at.isoformat() if call.expires_at is not None else None,
            subagent_run_id=subagent,
            metadata={"troupe": self._details()},
        )

    def _details(self) -> dict[str, Any]:
        call = self.call
        asked = call.suspend_payload
        elicited = isinstance(asked, dict) and asked.get("elicitation") is True
        return {
            "runId": self.run.run_id,
            "agentId": self.run.agent_id,
            "kind": "approval" if self.is_approval else "input",
            "input": None if self.is_approval else ("elicitation" if elicited else "suspend"),
            "toolName": call.tool_name,
            "args": call.args,
            "agentPath": call.agent_path,
            "origin": call.tool_origin,
            "suspendPayload": asked,
            "resumeSchema": call.resume_schema,
            "fingerprint": call.fingerprint,
            "editable": {"args": self.editable},
            "approvals": call.approvals,
            "interrupted": call.interrupted,
        }

    def target(self) -> Target:
        """The call and pause as the agent's own checks take them."""
        call = self.call
        kind: Literal["approval", "suspend"] = "approval" if self.is_approval else "suspend"
        state = ToolCallState(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            requires_approval=self.is_approval,
            status=CallStatus.AWAITING_APPROVAL if self.is_approval else CallStatus.SUSPENDED,
        )
        pause = Pause(
            kind=kind,
            tool_name=call.tool_name,
            args=call.args,
            suspend_payload=call.suspend_payload,
            resume_schema=call.resume_schema,
            agent_path=call.agent_path,
            fingerprint=call.fingerprint,
        )
        return Target(state, pause)


def open_pauses_of(run: SuspendedRun, service: Service, agent: Agent) -> list[OpenPause]:
    """The pauses ``run`` (of ``agent``, as listed) waits on, oldest first, each with its leaf tool as
    ``service``'s runtime defines it (None when no agent of it holds the tool: an MCP server's, a remote
    agent's)."""
    return [
        OpenPause(run, call, _leaf_tool(service, agent, call.agent_path, call.tool_name))
        for call in run.pending
    ]


def _leaf_tool(service: Service, agent: Agent, agent_path: Sequence[str], tool_name: str) -> Tool | None:
    try:
        leaf = service.agent(agent_path[-1]) if agent_path else agent
    except AgentNotFoundError:
        return None
    return leaf.tools.get(tool_name)


def _with_edits(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """An approval's schema with ``editedArgs``: AG-UI's signal that the person may edit the call."""
    edits = {
        "type": "object",
        "title": "Edited arguments",
        "description": "Arguments to run the tool with instead, merged over the proposed ones: "
        + args_preview(args),
    }
    return {**schema, "properties": {**schema.get("properties", {}), "editedArgs": edits}}


@dataclass(frozen=True)
class Answer:
    """A checked resume entry: what to ask of the agent about ``pause``."""

    pause: OpenPause
    action: Literal["approve", "decline", "resume"]
    reason: str | None = None
    edited_args: dict[str, Any] | None = None
    data: Any = None


def answers(
    entries: Sequence[ResumeEntry],
    pauses: Sequence[OpenPause],
    decided: set[str],
    withdrawn: dict[str, RunCancelledError] | None = None,
) -> list[Answer]:
    """Every entry checked against the open pauses, in order, before any is decided.

    Args:
        entries: the input's ``resume`` list.
        pauses: what the thread waits on.
        decided: interrupt ids already decided (``decided_ids``), to tell a replay from a mistake.
        withdrawn: interrupt ids a cancel of their run withdrew (``withdrawn_ids``).

    Returns:
        One answer per entry, in the entries' order.

    Raises:
        AguiResumeError: at the first entry that cannot be taken (a subclass names why); then none is.
        RunCancelledError: at the first entry whose interrupt's run was cancelled; then none is.
    """
    by_id = {pause.id: pause for pause in pauses}
    seen: set[str] = set()
    checked = []
    for entry in entries:
        wanted = entry.interrupt_id
        if wanted in seen:
            raise ResumeInvalidError(
                f"resume answers interrupt {wanted!r} twice; send one entry per interrupt",
                interrupt_id=wanted,
            )
        seen.add(wanted)
        pause = by_id.get(wanted)
        if pause is None:
            raise (withdrawn or {}).get(wanted) or _not_open(wanted, decided, by_id)
        checked.append(_answer(entry, pause))
    return checked


def _not_open(wanted: str, decided: set[str], open_ids: Iterable[str]) -> AguiResumeError:
    if wanted in decided:
        return ResumeDecidedError(
            f"interrupt {wanted!r} was already decided; a resume is taken once (nothing was decided now)",
            interrupt_id=wanted,
        )
    waiting = sorted(open_ids)
    return ResumeUnknownError(
        f"interrupt {wanted!r} is not one this thread waits on"
        + (f" (it waits on {', '.join(waiting)})" if waiting else " (it waits on nothing)"),
        interrupt_id=wanted,
        open=waiting,
    )


def _answer(entry: ResumeEntry, pause: OpenPause) -> Answer:
    if entry.status == "cancelled":
        return Answer(pause, "decline")
    if entry.payload is None:
        expected = (
            "{approved: boolean, reason?: string}" if pause.is_approval else "the answer its schema asks"
        )
        raise ResumeMissingError(
            f"resume entry for interrupt {pause.id!r} is 'resolved' but has no payload: send {expected}, "
            "or status 'cancelled' to decline",
            interrupt_id=pause.id,
        )
    try:
        return checked(pause, "resume", data=entry.payload)
    except DecisionRejectedError as exc:
        raise ResumeInvalidError(
            f"resume entry for interrupt {pause.id!r}: {exc.message}", interrupt_id=pause.id
        ) from exc


def checked(
    pause: OpenPause,
    action: Literal["approve", "decline", "resume"],
    *,
    reason: str | None = None,
    edited_args: dict[str, Any] | None = None,
    data: Any = None,
) -> Answer:
    """A decision on ``pause`` checked as the agent checks it, before anything is decided: what any
    surface that takes several decisions at once checks each of them with, so that none is applied
    unless all can be.

    Args:
        pause: the open pause it decides.
        action: approve (with ``edited_args``), decline (with ``reason``), or resume with ``data``
            (for an approval pause: ``{approved, reason?, editedArgs?}``, decided as approve or decline).

    Returns:
        The answer, for the agent's own decision method.

    Raises:
        DecisionRejectedError: it does not fit the pause (its kind, the resume schema, the edits).
    """
    if action == "decline":
        return Answer(pause, "decline", reason=reason)
    if action == "approve":
        if not pause.is_approval:
            raise DecisionRejectedError(
                f"tool call {pause.call.tool_call_id!r} waits for an answer (resume data), not an approval"
            )
        data = {"approved": True} if edited_args is None else {"approved": True, "editedArgs": edited_args}
    return _approval(data, pause) if pause.is_approval else _input(data, pause)


def _approval(payload: Any, pause: OpenPause) -> Answer:
    """``{approved, reason?, editedArgs?}``: decided as approve or decline, exactly as resume data is."""
    edited = payload.get("editedArgs") if isinstance(payload, dict) else None
    rest = {k: v for k, v in payload.items() if k != "editedArgs"} if isinstance(payload, dict) else payload
    target = pause.target()
    decision = as_decision(target.pause, pause.call.tool_call_id, Resume(rest))
    if isinstance(decision, Decline):
        if edited is not None:
            raise DecisionRejectedError("editedArgs come with an approval only (approved: true)")
        return Answer(pause, "decline", reason=decision.reason)
    if edited is not None:
        if pause.tool is None:
            raise DecisionRejectedError(f"tool {pause.call.tool_name!r} does not accept edited args")
        merged_args(pause.tool, target.call, edited)
    return Answer(pause, "approve", edited_args=edited)


def _input(payload: Any, pause: OpenPause) -> Answer:
    """An answer to a ``suspend()`` or an elicitation, checked as the agent checks resume data."""
    if pause.tool is not None:
        validated_resume_data(pause.tool, pause.target(), payload)
    elif pause.call.resume_schema is not None:
        errors = instance_errors(pause.call.resume_schema, payload)
        if errors:
            raise DecisionRejectedError(
                "the answer does not match the schema it asked for: " + "; ".join(errors)
            )
    return Answer(pause, "resume", data=payload)


__all__ = [
    "DECIDED_KINDS",
    "AguiResumeError",
    "Answer",
    "InterruptOpenError",
    "OpenPause",
    "ResumeDecidedError",
    "ResumeInvalidError",
    "ResumeMissingError",
    "ResumeUnknownError",
    "answers",
    "checked",
    "decided_ids",
    "interrupt_id",
    "open_pauses_of",
    "withdrawn_ids",
]
