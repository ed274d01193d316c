"""Run state: the versioned JSON snapshot a run is resumed from.

A run between two model turns is fully described by ``RunState``: the conversation so far and, while a
step is in progress, the state of each of its tool calls. A paused run is this snapshot in the store and
nothing else; no coroutine waits for the human.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from troupe.core.vocabulary.errors import SnapshotVersionError
from troupe.core.vocabulary.identity import Approval, Identity

SCHEMA_VERSION = 1


def utcnow() -> datetime:
    return datetime.now(UTC)


# What a pause's deadline is measured against. Injectable (``Runtime(clock=...)``) so expiry can be tested
# without racing the wall clock or the heartbeat; it must be picklable to reach Ray actors.
Clock = Callable[[], datetime]


def fingerprint(tool_call_id: str, tool_name: str, args: Any, *inner: str) -> str:
    """Digest binding a decision to the exact call a human saw (id, tool and arguments)."""
    canonical = json.dumps([tool_call_id, tool_name, args, *inner], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class CallStatus(StrEnum):
    AWAITING_APPROVAL = "awaiting-approval"  # gated; no decision yet
    SUSPENDED = "suspended"  # the tool (or a subagent below) paused itself and waits for resume data
    RUNNING = "running"  # claimed to execute; a crash here leaves it interrupted
    DONE = "done"  # output recorded (result, error, decline or override)


PAUSED = frozenset({CallStatus.AWAITING_APPROVAL, CallStatus.SUSPENDED})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Decision(_Model):
    kind: Literal["approved", "declined", "resumed", "expired", "cancelled"]
    reason: str | None = None
    edited_args: dict[str, Any] | None = None
    resume_data: Any = None
    decided_at: datetime = Field(default_factory=utcnow)
    decided_by: str | None = None
    # Who decided: subject, issuer and the surface they used (None in snapshots from before identities).
    decider: Identity | None = None
    # For a delegated call: the subagent's call and pause it targets. The claim at this level is the
    # durable hand-off: a subagent that missed the routed decision (its actor died) applies it from here.
    inner_tool_call_id: str | None = None
    inner_fingerprint: str | None = None
    # For a cancel routed down a delegation (``kind="cancelled"``): the run below that is cancelled.
    cancel_target: str | None = None


class InDoubt(_Model):
    """A call whose host lost the run while the call ran, and may still be running it: it is not run
    again, nor declined, before ``deadline`` (the tool's ``timeout_s`` from when it started, plus a
    margin) unless that host's outcome arrives first (``troupe.core.run.in_doubt``)."""

    owner: str | None
    # The owner's last sign of life the run holds: its last write of the run (the call's start, or later).
    last_seen: datetime | None = None
    deadline: datetime


class Cancellation(_Model):
    """Why and by whom a run ends early. Written into the run before the cancel is acknowledged; from
    then on nothing resumes the run, and whichever host holds it ends it
    (``troupe.core.deciding.cancelling``)."""

    reason: str
    # Who cancelled: None for the process itself (the Python API without a name).
    by: Identity | None = None
    at: datetime = Field(default_factory=utcnow)
    # "cancelled" (someone asked), or "max-duration" (the run's max_duration_s ran out).
    finish_reason: Literal["cancelled", "max-duration"] = "cancelled"

    @property
    def who(self) -> str | None:
        return self.by.display if self.by is not None else None


class Pause(_Model):
    """What a human is asked about a call, as this agent announces it.

    For a pause that comes from a subagent, ``tool_name``/``args`` are the leaf tool's, ``agent_path`` runs
    from this agent to the leaf agent and ``inner_tool_call_id`` is the subagent's call it routes to.
    """

    kind: Literal["approval", "suspend"]
    tool_name: str
    args: dict[str, Any]
    suspend_payload: Any = None
    resume_schema: dict[str, Any] | None = None
    agent_path: list[str]
    fingerprint: str
    inner_tool_call_id: str | None = None
    inner_fingerprint: str | None = None
    paused_at: datetime = Field(default_factory=utcnow)
    seq: int = 0
    interrupted: bool = False
    expires_at: datetime | None = None
    # Approvals so far, while an approver policy's quorum is not yet reached: who, and for which args.
    approvals: list[Approval] = Field(default_factory=list)
    # Where the leaf tool comes from (``Tool.origin``: e.g. its MCP server and annotations).
    tool_origin: dict[str, Any] | None = None
    # Set on a call asked about again after a takeover while its first host may still be running it.
    in_doubt: InDoubt | None = None
    # The roles the approver policy governing the call named when it paused (approvals of top-level runs):
    # what a listing by role reads (troupe.core.vocabulary.listing). A decision is checked against the
    # policy as it is then, not against this.
    roles: list[str] | None = None

    @field_validator("approvals", mode="before")
    @classmethod
    def _named_approvals(cls, value: Any) -> Any:
        # Snapshots from before identities recorded approvers by name only.
        if isinstance(value, list):
            return [Identity.legacy(v).model_dump() if isinstance(v, str) else v for v in value]
        return value


class ChildLink(_Model):
    """The run a delegation call started in a subagent."""

    agent_key: str
    agent_id: str
    run_id: str


class RemoteTask(_Model):
    """The task a proxy run follows at a remote agent (an A2A subagent, ``troupe.actors.a2a``): kept with
    the run, so that any process can follow the task or carry a decision to it after a restart."""

    # Where the remote agent takes messages, and its task (None until the remote agent has named it).
    url: str
    task_id: str | None = None
    context_id: str | None = None
    # The id of the answer sent on the task whose arrival is not yet seen (set before it is sent, so a
    # process that dies meanwhile leaves a record that it may have gone: it is never sent twice).
    answer_id: str | None = None


class ToolCallState(_Model):
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    requires_approval: bool = False
    status: CallStatus
    # Why it waits: one pause for the agent's own tools; a delegation call carries every pause that
    # is open in the subagent below it (each decided on its own, targeted by fingerprint).
    pauses: list[Pause] = Field(default_factory=list)
    decision: Decision | None = None
    # Arguments the tool runs with: the model's, or merged with a human's edits.
    exec_args: dict[str, Any] | None = None
    output: Any = None
    is_error: bool = False
    declined: bool = False
    child: ChildLink | None = None
    # When the call was claimed to run (its deadline counts from here; see InDoubt).
    started_at: datetime | None = None
    # Set while the call, taken over from a host that may still be running it, is in doubt.
    in_doubt: InDoubt | None = None

    @property
    def effective_args(self) -> dict[str, Any]:
        return self.exec_args if self.exec_args is not None else self.args

    @property
    def latest_pause(self) -> Pause | None:
        return max(self.pauses, key=lambda p: p.seq) if self.pauses else None

    def mark_interrupted(self, fingerprint: str | None = None) -> None:
        """Mark the pause whose fingerprint is ``fingerprint`` (every pause: None) as asked about again
        after a decision that may have taken effect, as a call interrupted by a crash is."""
        for pause in self.pauses:
            if fingerprint is None or pause.fingerprint == fingerprint:
                pause.interrupted = True


class ParentLink(_Model):
    """Where a subagent's run was delegated from."""

    run_id: str
    tool_call_id: str
    agent_id: str
    # The agents above this run, from the top one down to the parent (which approver policies govern
    # the subagent's calls depends on the whole path).
    agent_path: list[str] = Field(default_factory=list)


class RunState(_Model):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    agent_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    request_context: dict[str, Any] = Field(default_factory=dict)
    # running: in flight (or orphaned by a crash); suspended: waits for a human, nothing in flight;
    # finished: only for a subagent's run, kept (with ``outcome``) until its parent has recorded it.
    status: Literal["running", "suspended", "finished"] = "running"
    messages: list[dict[str, Any]] = Field(default_factory=list)
    # The tool calls of the step in progress, in the order the model made them; empty between steps.
    calls: list[ToolCallState] = Field(default_factory=list)
    step: int = 0
    max_steps: int = 10
    # The run's approval policy as it can be stored: a policy function is not persisted, so a run that
    # used one resumes with "on" (fail-safe), unless it came from the agent's own defaults.
    approval: Literal["on", "off", "agent-default"] = "off"
    auto_resume: bool = False
    approval_timeout: float | None = None
    parent: ParentLink | None = None
    pause_seq: int = 0
    # Memory: how many of ``messages`` are already in the thread (loaded history, or saved since).
    memory_saved: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # The host that drives the run while it is running; another host takes over only once this one's
    # heartbeat has expired.
    owner: str | None = None
    # Who started the run, as people see it (the principal's name), and as separation of duties compares
    # it (``starter``: subject and issuer; None in snapshots from before identities, see ``starter_id``).
    started_by: str | None = None
    starter: Identity | None = None
    outcome: dict[str, Any] | None = None
    # The trace context of the run's first operation: later ones (decisions, recovery) continue it.
    trace: dict[str, str] | None = None
    # A proxy run's remote task (a remote A2A agent standing as a subagent); None for Troupe's own runs.
    remote: RemoteTask | None = None
    # Set once the run is cancelled (or ran out of ``max_duration_s``): it never resumes.
    cancel: Cancellation | None = None
    # The run's time budget in seconds (None: none) and the time spent waiting for people so far, which
    # does not count unless ``duration_counts_waiting``.
    max_duration_s: float | None = None
    duration_counts_waiting: bool = False
    waited_s: float = 0.0

    @classmethod
    def from_json(cls, raw: str | bytes) -> RunState:
        # pydantic's own JSON parser takes half the time of json.loads and then validating the dict.
        try:
            state = cls.model_validate_json(raw)
        except ValidationError:
            state = None
        if state is not None and state.schema_version == SCHEMA_VERSION:
            return state
        # Not this version's snapshot: name the version it has, or raise why it does not validate.
        head = json.loads(raw)
        version = head.get("schema_version") if isinstance(head, dict) else None
        if version != SCHEMA_VERSION:
            raise SnapshotVersionError(
                f"snapshot has schema_version {version!r}; this Troupe reads version {SCHEMA_VERSION}",
                schema_version=version,
            )
        return cls.model_validate(head)

    def to_json(self) -> str:
        return self.model_dump_json()

    def stop_waiting(self) -> None:
        """The paused run is taken up again: the time it waited for people is added to ``waited_s``
        (it does not count against ``max_duration_s`` unless ``duration_counts_waiting``)."""
        if self.status == "suspended":
            self.waited_s += max(0.0, (utcnow() - self.updated_at).total_seconds())

    def duration_deadline(self) -> datetime | None:
        """When the run's ``max_duration_s`` runs out, counting from its creation and leaving out the
        time it waited for people (unless ``duration_counts_waiting``)."""
        if self.max_duration_s is None:
            return None
        waited = 0.0 if self.duration_counts_waiting else self.waited_s
        return self.created_at + timedelta(seconds=self.max_duration_s + waited)

    @property
    def starter_id(self) -> str | None:
        """The subject id of whoever started the run (a name alone is of the local issuer)."""
        if self.starter is not None:
            return self.starter.id
        return Identity.legacy(self.started_by).id if self.started_by else None

    def call(self, tool_call_id: str) -> ToolCallState | None:
        return next((c for c in self.calls if c.tool_call_id == tool_call_id), None)

    def paused_calls(self) -> list[ToolCallState]:
        return [c for c in self.calls if c.status in PAUSED]

    def latest_paused(self) -> ToolCallState | None:
        paused = [c for c in self.paused_calls() if c.pauses]
        return max(paused, key=lambda c: c.latest_pause.seq if c.latest_pause else 0) if paused else None

    def open_pauses(self) -> list[tuple[ToolCallState, Pause]]:
        """Every pause waiting for a human, oldest first."""
        pairs = [(c, p) for c in self.paused_calls() for p in c.pauses]
        return sorted(pairs, key=lambda pair: pair[1].seq)

    @property
    def suspended_at(self) -> datetime | None:
        stamps = [p.paused_at for c in self.paused_calls() for p in c.pauses]
        return min(stamps) if stamps else None

    @property
    def expires_at(self) -> datetime | None:
        """When the first of its open pauses runs out of time. Only a top-level run expires its pauses:
        a subagent's deadline travels up with the pause and is enforced from the top, so the decline
        flows down the same way a human's would."""
        if self.parent is not None:
            return None
        stamps = [p.expires_at for c in self.paused_calls() for p in c.pauses if p.expires_at is not None]
        return min(stamps) if stamps else None


# What reading a stored run raises when this Troupe cannot use it (a newer Troupe wrote it, or it is
# damaged): that run's own trouble, never an outage of the store. Whatever looks at many runs in turn
# (recovery, expiry) leaves such a run out rather than stop at it.
UNREADABLE = (SnapshotVersionError, ValueError)


__all__ = [
    "PAUSED",
    "SCHEMA_VERSION",
    "UNREADABLE",
    "CallStatus",
    "Cancellation",
    "ChildLink",
    "Clock",
    "Decision",
    "InDoubt",
    "ParentLink",
    "Pause",
    "RemoteTask",
    "RunState",
    "ToolCallState",
    "fingerprint",
    "utcnow",
]
