"""Every error a Troupe caller can see, in one place.

    TroupeError
     ├── SnapshotNotFoundError        AGENT_RESUME_NO_SNAPSHOT_FOUND
     ├── ToolCallNotSuspendedError    AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED
     ├── DecisionConflictError        AGENT_DECISION_CONFLICT
     │    ├── PauseExpiredError           AGENT_DECISION_EXPIRED
     │    ├── ToolCallCompletedError      AGENT_TOOL_CALL_COMPLETED
     │    └── RunCancelledError           AGENT_RUN_CANCELLED            (409: the run was cancelled)
     ├── DecisionRejectedError        AGENT_DECISION_REJECTED
     │    ├── ResumeDataValidationError   AGENT_RESUME_DATA_INVALID
     │    ├── ToolCallInDoubtError        AGENT_TOOL_CALL_IN_DOUBT       (409: its owner may still run it)
     │    ├── RunInFlightError            AGENT_RUN_IN_FLIGHT            (409: decide once the run pauses)
     │    └── DecisionInterruptedError    AGENT_DECISION_INTERRUPTED     (502: it may have taken effect)
     ├── RunNotCancellableError       AGENT_RUN_NOT_CANCELLABLE      (409: the run has already finished)
     ├── CancelForbiddenError         AGENT_CANCEL_FORBIDDEN         (403: not the caller's run to cancel)
     ├── AmbiguousSuspendedRunsError  AGENT_SUSPENDED_RUNS_AMBIGUOUS
     ├── NoSuspendedRunError          AGENT_NO_SUSPENDED_RUN
     ├── ThreadAccessError            AGENT_THREAD_RESOURCE_MISMATCH
     ├── InvalidPaginationError       INVALID_PAGINATION
     ├── InvalidOptionError           INVALID_OPTION
     ├── DuplicateRunError            AGENT_RUN_EXISTS
     ├── DeliveryNotFoundError        NOTIFICATION_DELIVERY_NOT_FOUND
     ├── ApprovalPolicyError          AGENT_DECISION_FORBIDDEN       (403: the approver policy refuses)
     ├── DecisionLinkError            DECISION_LINK_INVALID          (403: a bad, used or expired link)
     ├── AgentNotFoundError           AGENT_NOT_FOUND
     ├── AgentUnavailableError        AGENT_UNAVAILABLE
     │    └── DecisionPendingError    AGENT_DECISION_PENDING
     ├── RunTakenOverError            AGENT_RUN_TAKEN_OVER
     ├── RayAuthError                 RAY_AUTH_FAILED
     ├── MCPServerError               MCP_SERVER_UNAVAILABLE         (an agent's MCP server did not start)
     ├── ToolNameConflictError        AGENT_TOOL_NAME_CONFLICT       (two tool sources offer one name)
     ├── ModelError                   MODEL_ERROR
     ├── RunFailedError               AGENT_RUN_FAILED
     └── StorageError                 STORAGE_ERROR
          ├── StorageUnavailableError     STORAGE_UNAVAILABLE
          └── SnapshotVersionError        STORAGE_SNAPSHOT_VERSION

Ray pickles exceptions between processes by calling ``cls(*args)``; every error here takes exactly
``(message, **details)`` and carries ``__reduce__`` so it crosses actor boundaries intact.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class TroupeError(Exception):
    """Every error Troupe raises: a message, a stable ``code`` and ``details``.

    ``code`` names the kind of error for programs (the same over HTTP, in the error body's ``code``);
    ``http_status`` is the status the front door answers with; ``details`` holds what the error is
    about (``run_id``, ``tool_call_id``, ...). Errors pickle with all three, so they cross Ray's process
    boundaries intact. Code ``TROUPE_ERROR``, HTTP 500.

    Args:
        message: What went wrong, for a person.
        **details: What it is about, as JSON-able values.

    Attributes:
        message: What went wrong, for a person.
        details: What it is about (``run_id``, ``tool_call_id``, ...).
        code: The kind of error, stable across versions (a class attribute).
        http_status: The status the front door answers with (a class attribute).

    Example:
        >>> try:
        ...     await agent.approve_tool_call(run_id="no-such-run")
        ... except TroupeError as error:
        ...     print(error.code)
        AGENT_RESUME_NO_SNAPSHOT_FOUND
    """

    code = "TROUPE_ERROR"
    # HTTP status the front door maps this error to; caller mistakes are 4xx.
    http_status = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.details))

    def to_dict(self) -> dict[str, Any]:
        """The error as JSON-able data: ``code``, ``message``, ``details`` (``error_from_dict`` reads it)."""
        return {"code": self.code, "message": self.message, "details": self.details}


def _rebuild(cls: type[TroupeError], message: str, details: dict[str, Any]) -> TroupeError:
    return cls(message, **details)


class SnapshotNotFoundError(TroupeError):
    """There is no paused run to decide: the run id is unknown to this agent, or the run has finished.

    Raised by the decision methods (``approve_tool_call``, ``resume_stream``, ...), ``cancel_run`` and
    ``observe_stream``; the message says "snapshot not found" and why. Code
    ``AGENT_RESUME_NO_SNAPSHOT_FOUND``, HTTP 404.
    """

    code = "AGENT_RESUME_NO_SNAPSHOT_FOUND"
    http_status = 404


class ToolCallNotSuspendedError(TroupeError):
    """The run has no such paused call, or the call waits for another kind of decision.

    Raised by the decision methods when ``tool_call_id`` is not paused in the run (or nothing is),
    and by ``approve_tool_call`` on a call that waits for resume data. Nothing changed. Code
    ``AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED``, HTTP 409.
    """

    code = "AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED"
    http_status = 409


class DecisionConflictError(TroupeError):
    """The call was already decided (by this or another caller); this decision was not applied.

    Raised by the decision methods when another decision won the claim, or when ``fingerprint`` no
    longer matches what the call asks. The tool never runs twice. Code ``AGENT_DECISION_CONFLICT``,
    HTTP 409.
    """

    code = "AGENT_DECISION_CONFLICT"
    http_status = 409


class PauseExpiredError(DecisionConflictError):
    """The pause ran out of time (``approval_timeout``) before this decision came.

    Raised by the decision methods; the call is (being) declined as expired. Code
    ``AGENT_DECISION_EXPIRED``, HTTP 409.
    """

    code = "AGENT_DECISION_EXPIRED"
    http_status = 409


class DecisionRejectedError(TroupeError):
    """The decision itself is invalid (edited args on a tool that does not take them, say).

    Raised by the decision methods and ``send_tool_approval`` before anything is claimed: the call
    stays paused and can still be decided. Code ``AGENT_DECISION_REJECTED``, HTTP 422.
    """

    code = "AGENT_DECISION_REJECTED"
    http_status = 422


class ResumeDataValidationError(DecisionRejectedError):
    """The resume data does not fit the tool's ``resume_schema``.

    Raised by ``resume_stream``/``resume_generate`` (and auto-resume); the run stays paused and nothing
    is lost. ``details`` carries the validation errors. Code ``AGENT_RESUME_DATA_INVALID``, HTTP 422.
    """

    code = "AGENT_RESUME_DATA_INVALID"
    http_status = 422


class AmbiguousSuspendedRunsError(TroupeError):
    """Several runs on the thread are paused, and ``send_tool_approval`` was not told which.

    Pass ``tool_call_id`` to name the call. Code ``AGENT_SUSPENDED_RUNS_AMBIGUOUS``, HTTP 409.
    """

    code = "AGENT_SUSPENDED_RUNS_AMBIGUOUS"
    http_status = 409


class NoSuspendedRunError(TroupeError):
    """No run on the thread waits for a decision.

    Raised by ``send_tool_approval``. Code ``AGENT_NO_SUSPENDED_RUN``, HTTP 404.
    """

    code = "AGENT_NO_SUSPENDED_RUN"
    http_status = 404


class ThreadAccessError(TroupeError):
    """The thread belongs to another resource: its conversation is not this caller's to read.

    Raised when a run is started on a thread with a ``resource_id`` other than the thread's. Code
    ``AGENT_THREAD_RESOURCE_MISMATCH``, HTTP 403.
    """

    code = "AGENT_THREAD_RESOURCE_MISMATCH"
    http_status = 403


class InvalidPaginationError(TroupeError):
    """A listing's ``page``, ``per_page`` or ``cursor`` is out of range or malformed.

    Raised by ``list_suspended_runs``, ``Runtime.list_pending`` and the inbox listing. Code
    ``INVALID_PAGINATION``, HTTP 422.
    """

    code = "INVALID_PAGINATION"
    http_status = 422


class InvalidOptionError(TroupeError):
    """An option of a run, an agent or a runtime has a wrong name or value.

    Raised by ``stream``/``generate`` (``max_steps=0``, an unknown option in ``default_options``,
    messages that are not a string or a list of messages) and by ``Runtime`` (``actor_options``).
    ``details`` names the ``option``. Code ``INVALID_OPTION``, HTTP 422.
    """

    code = "INVALID_OPTION"
    http_status = 422


class DuplicateRunError(TroupeError):
    """A run with this ``run_id`` exists already.

    Raised by ``stream``/``generate`` given a ``run_id`` that another run holds. Code
    ``AGENT_RUN_EXISTS``, HTTP 409.
    """

    code = "AGENT_RUN_EXISTS"
    http_status = 409


class DeliveryNotFoundError(TroupeError):
    """No notification delivery has this id.

    Raised by ``Runtime.redeliver``. Code ``NOTIFICATION_DELIVERY_NOT_FOUND``, HTTP 404.
    """

    code = "NOTIFICATION_DELIVERY_NOT_FOUND"
    http_status = 404


class ApprovalPolicyError(TroupeError):
    """The approver policy does not let this principal decide this call.

    A role it lacks, its own run under separation of duties, an approval it already gave. Raised by the
    decision methods; nothing was changed. Code ``AGENT_DECISION_FORBIDDEN``, HTTP 403.
    """

    code = "AGENT_DECISION_FORBIDDEN"
    http_status = 403


class DecisionLinkError(TroupeError):
    """A decision link that is forged, expired, already used, or for a call that has changed.

    Raised when a decision link is opened or used. Code ``DECISION_LINK_INVALID``, HTTP 403.
    """

    code = "DECISION_LINK_INVALID"
    http_status = 403


class AgentNotFoundError(TroupeError):
    """No agent with this id in the runtime (or on the server).

    Raised by ``Runtime.get_agent`` and by every HTTP route for an unknown agent. Code
    ``AGENT_NOT_FOUND``, HTTP 404.
    """

    code = "AGENT_NOT_FOUND"
    http_status = 404


class AgentUnavailableError(TroupeError):
    """An agent's actor could not be reached: it died and did not come back in time.

    Raised by any run method while Ray restarts an actor for longer than ``TROUPE_RESTART_WAIT_S``.
    Code ``AGENT_UNAVAILABLE``, HTTP 503.
    """

    code = "AGENT_UNAVAILABLE"
    http_status = 503


class RunTakenOverError(TroupeError):
    """The run was taken over by another host while a tool ran here.

    This host's lease ran out (in a storage outage, say). The tool's outcome is not lost: it is in the
    run's audit log (``outcomes`` says what it was), and the host that holds the run now uses it
    instead of asking about the call again. Code ``AGENT_RUN_TAKEN_OVER``, HTTP 409.
    """

    code = "AGENT_RUN_TAKEN_OVER"
    http_status = 409


class ToolCallCompletedError(DecisionConflictError):
    """The call this decision was for had completed after all.

    Raised by a decision on a call asked again after a takeover: it is not run again, and the run goes
    on with the result it had (``completed_at``, ``result`` in the details). Code
    ``AGENT_TOOL_CALL_COMPLETED``, HTTP 409.
    """

    code = "AGENT_TOOL_CALL_COMPLETED"
    http_status = 409


class RunCancelledError(DecisionConflictError):
    """The run was cancelled: a decision on one of its calls, or a second cancel, comes too late.

    Raised by the decision methods and ``cancel_run`` (``cancelled_by``, ``reason``, ``cancelled_at``
    in the details). Nothing was changed. Code ``AGENT_RUN_CANCELLED``, HTTP 409.
    """

    code = "AGENT_RUN_CANCELLED"
    http_status = 409


class RunNotCancellableError(TroupeError):
    """The run has already finished (its outcome stands), so there is nothing left to cancel.

    Raised by ``cancel_run``. Code ``AGENT_RUN_NOT_CANCELLABLE``, HTTP 409.
    """

    code = "AGENT_RUN_NOT_CANCELLABLE"
    http_status = 409


class CancelForbiddenError(TroupeError):
    """The caller may not cancel this run.

    Only the principal that started it, an admin, and whoever the approver policies let decide its
    calls may. Raised by ``cancel_run``; nothing was changed. Code ``AGENT_CANCEL_FORBIDDEN``,
    HTTP 403.
    """

    code = "AGENT_CANCEL_FORBIDDEN"
    http_status = 403


class ToolCallInDoubtError(DecisionRejectedError):
    """The call was taken over from a host that may still be running it.

    It cannot be run again or declined before its deadline (``deadline`` in the details) unless that
    host's outcome arrives first, in which case the run goes on with it by itself. Raised by the
    decision methods; nothing was claimed, and the call stays paused. Code
    ``AGENT_TOOL_CALL_IN_DOUBT``, HTTP 409.
    """

    code = "AGENT_TOOL_CALL_IN_DOUBT"
    http_status = 409


class RunInFlightError(DecisionRejectedError):
    """The run's step is still in flight on another host: none of its calls can be decided until it
    has paused.

    A call can wait for a decision while other calls of its step still run (an ungated call, or one
    approved a moment ago) on another host over the same store (another process, a replica). Deciding it
    there and then would close the step without their results, so nothing was claimed and the call
    stays paused. Try again later: the run pauses once the step's other calls have ended, or, if the
    host driving it died, once recovery has taken it over (within seconds); its pauses are listed from
    then on. Raised by the decision methods (``owner`` in the details: the host driving the step).
    Code ``AGENT_RUN_IN_FLIGHT``, HTTP 409.
    """

    code = "AGENT_RUN_IN_FLIGHT"
    http_status = 409


class DecisionInterruptedError(DecisionRejectedError):
    """The agent the decision was handed to failed while it acted on it, and cannot say how far it got.

    A remote A2A agent answered the decision with an internal error of its own, and its task still asks
    the same question: it may have acted on the answer before it failed. Nothing sends the decision a
    second time. The call waits again, marked interrupted at every level, to be decided again knowing
    that. Raised by the decision methods. Code ``AGENT_DECISION_INTERRUPTED``, HTTP 502.
    """

    code = "AGENT_DECISION_INTERRUPTED"
    http_status = 502


class DecisionPendingError(AgentUnavailableError):
    """The decision is durable, but the subagent it is for cannot be reached yet.

    It is delivered (once) when that agent is back, and the run carries on then; deciding again is a
    conflict. Raised by the decision methods. Code ``AGENT_DECISION_PENDING``, HTTP 503.
    """

    code = "AGENT_DECISION_PENDING"
    http_status = 503


class RayAuthError(TroupeError):
    """Ray's token authentication refused this process, or no token was found to present.

    Raised when Troupe starts or joins Ray (``Runtime(ray_address=...)``, ``troupe serve``). Code
    ``RAY_AUTH_FAILED``, HTTP 503.
    """

    code = "RAY_AUTH_FAILED"
    http_status = 503


class MCPServerError(TroupeError):
    """An MCP server an agent takes tools from could not be started or reached.

    Raised by the run methods of an agent with ``mcp_servers``; nothing of any run was changed, and the
    next operation tries again. Code ``MCP_SERVER_UNAVAILABLE``, HTTP 503.
    """

    code = "MCP_SERVER_UNAVAILABLE"
    http_status = 503


class ToolNameConflictError(TroupeError):
    """Two of an agent's tool sources offer the same tool name.

    Its own tools, subagents and MCP servers must not clash; raised when the agent's tools are
    gathered for a run. Code ``AGENT_TOOL_NAME_CONFLICT``, HTTP 500.
    """

    code = "AGENT_TOOL_NAME_CONFLICT"


class ModelError(TroupeError):
    """The model failed, or answered something the loop cannot use.

    No API key, a model server out of reach, two tool calls with one id. It ends the run with an error
    chunk. Code ``MODEL_ERROR``, HTTP 502.
    """

    code = "MODEL_ERROR"
    http_status = 502


class RunFailedError(TroupeError):
    """A run ended with an error chunk.

    Raised by ``result()`` and the ``_generate`` methods so that a failure is never silent; ``details``
    are those of the error the run ended with. Code ``AGENT_RUN_FAILED``, HTTP 500.
    """

    code = "AGENT_RUN_FAILED"


class StorageError(TroupeError):
    """The store failed in a way that is not an outage: a Redis error other than a lost connection.

    Raised by any operation that reads or writes the store; ``details`` name the store (its URL
    without secrets) and the operation. Code ``STORAGE_ERROR``, HTTP 500.
    """

    code = "STORAGE_ERROR"


class StorageUnavailableError(StorageError):
    """The store cannot be reached (Redis down, say); nothing is swallowed.

    Raised by any operation that reads or writes the store; the run is left as it was last written.
    Code ``STORAGE_UNAVAILABLE``, HTTP 503.
    """

    code = "STORAGE_UNAVAILABLE"
    http_status = 503


class SnapshotVersionError(StorageError):
    """A stored snapshot has a schema version this code does not know.

    Raised when a run is loaded that a newer Troupe wrote. Code ``STORAGE_SNAPSHOT_VERSION``, HTTP 500.
    """

    code = "STORAGE_SNAPSHOT_VERSION"


def _error_class(code: str) -> type[TroupeError]:
    """The error class with this code, searched when needed so that classes defined in other layers
    (the front door's) are found too. Breadth first: Ray's wrapper subclasses come after their base."""
    queue: deque[type[TroupeError]] = deque([TroupeError])
    while queue:
        cls = queue.popleft()
        if cls.code == code and not cls.__module__.startswith("ray"):
            return cls
        queue.extend(cls.__subclasses__())
    return TroupeError


def error_from_dict(data: dict[str, Any]) -> TroupeError:
    """Rebuild an error from ``TroupeError.to_dict()`` (error chunks and HTTP bodies carry that form).

    Args:
        data: ``{"code", "message", "details"}``.

    Returns:
        The error class that has ``code`` (a plain ``TroupeError`` for a code no class has).
    """
    cls = _error_class(str(data.get("code")))
    return cls(str(data.get("message", "")), **dict(data.get("details") or {}))


__all__ = [
    "AgentNotFoundError",
    "AgentUnavailableError",
    "AmbiguousSuspendedRunsError",
    "ApprovalPolicyError",
    "CancelForbiddenError",
    "DecisionConflictError",
    "DecisionInterruptedError",
    "DecisionLinkError",
    "DecisionRejectedError",
    "DeliveryNotFoundError",
    "DuplicateRunError",
    "InvalidOptionError",
    "InvalidPaginationError",
    "MCPServerError",
    "ModelError",
    "NoSuspendedRunError",
    "PauseExpiredError",
    "RayAuthError",
    "ResumeDataValidationError",
    "RunCancelledError",
    "RunFailedError",
    "RunInFlightError",
    "RunNotCancellableError",
    "RunTakenOverError",
    "SnapshotNotFoundError",
    "SnapshotVersionError",
    "StorageError",
    "StorageUnavailableError",
    "ThreadAccessError",
    "ToolCallCompletedError",
    "ToolCallInDoubtError",
    "ToolCallNotSuspendedError",
    "ToolNameConflictError",
    "TroupeError",
    "error_from_dict",
]
