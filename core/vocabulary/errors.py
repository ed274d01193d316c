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
     │    └── ToolCallInDoubtError        AGENT_TOOL_CALL_IN_DOUBT       (409: its owner may still run it)
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
        return {"code": self.code, "message": self.message, "details": self.details}


def _rebuild(cls: type[TroupeError], message: str, details: dict[str, Any]) -> TroupeError:
    return cls(message, **details)


class SnapshotNotFoundError(TroupeError):
    code = "AGENT_RESUME_NO_SNAPSHOT_FOUND"
    http_status = 404


class ToolCallNotSuspendedError(TroupeError):
    code = "AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED"
    http_status = 409


class DecisionConflictError(TroupeError):
    """The call was already decided (by this or another caller); the decision was not applied."""

    code = "AGENT_DECISION_CONFLICT"
    http_status = 409


class PauseExpiredError(DecisionConflictError):
    """The pause ran out of time before this decision came; it is (being) declined as expired."""

    code = "AGENT_DECISION_EXPIRED"
    http_status = 409


class DecisionRejectedError(TroupeError):
    """The decision itself is invalid (e.g. edited args on a tool that does not allow them).

    Nothing was claimed: the call stays paused and can still be decided.
    """

    code = "AGENT_DECISION_REJECTED"
    http_status = 422


class ResumeDataValidationError(DecisionRejectedError):
    code = "AGENT_RESUME_DATA_INVALID"
    http_status = 422


class AmbiguousSuspendedRunsError(TroupeError):
    code = "AGENT_SUSPENDED_RUNS_AMBIGUOUS"
    http_status = 409


class NoSuspendedRunError(TroupeError):
    code = "AGENT_NO_SUSPENDED_RUN"
    http_status = 404


class ThreadAccessError(TroupeError):
    """The thread belongs to another resource: its conversation is not this caller's to read."""

    code = "AGENT_THREAD_RESOURCE_MISMATCH"
    http_status = 403


class InvalidPaginationError(TroupeError):
    code = "INVALID_PAGINATION"
    http_status = 422


class InvalidOptionError(TroupeError):
    code = "INVALID_OPTION"
    http_status = 422


class DuplicateRunError(TroupeError):
    code = "AGENT_RUN_EXISTS"
    http_status = 409


class DeliveryNotFoundError(TroupeError):
    code = "NOTIFICATION_DELIVERY_NOT_FOUND"
    http_status = 404


class ApprovalPolicyError(TroupeError):
    """The approver policy does not let this principal decide this call (a role it lacks, its own run
    under separation of duties, an approval it already gave). Nothing was changed."""

    code = "AGENT_DECISION_FORBIDDEN"
    http_status = 403


class DecisionLinkError(TroupeError):
    """A decision link that is forged, expired, already used, or for a call that has changed."""

    code = "DECISION_LINK_INVALID"
    http_status = 403


class AgentNotFoundError(TroupeError):
    code = "AGENT_NOT_FOUND"
    http_status = 404


class AgentUnavailableError(TroupeError):
    """An agent's actor could not be reached (it died and did not come back in time)."""

    code = "AGENT_UNAVAILABLE"
    http_status = 503


class RunTakenOverError(TroupeError):
    """The run was taken over by another host (this one's lease ran out, say in a storage outage) while
    a tool ran here. The tool's outcome is not lost: it is in the run's audit log (``outcomes`` says what
    it was), and the host that holds the run now uses it instead of asking about the call again."""

    code = "AGENT_RUN_TAKEN_OVER"
    http_status = 409


class ToolCallCompletedError(DecisionConflictError):
    """The call this decision was for (asked again after a takeover) had completed after all: it is not
    run again, and the run goes on with the result it had (``completed_at``, ``result``)."""

    code = "AGENT_TOOL_CALL_COMPLETED"
    http_status = 409


class RunCancelledError(DecisionConflictError):
    """The run was cancelled (``cancelled_by``, ``reason``, ``cancelled_at`` in the details): a decision
    on one of its calls, or a second cancel, comes too late. Nothing was changed."""

    code = "AGENT_RUN_CANCELLED"
    http_status = 409


class RunNotCancellableError(TroupeError):
    """The run has already finished (its outcome stands), so there is nothing left to cancel."""

    code = "AGENT_RUN_NOT_CANCELLABLE"
    http_status = 409


class CancelForbiddenError(TroupeError):
    """The caller may not cancel this run: only the principal that started it, an admin, and whoever the
    approver policies let decide its calls may. Nothing was changed."""

    code = "AGENT_CANCEL_FORBIDDEN"
    http_status = 403


class ToolCallInDoubtError(DecisionRejectedError):
    """The call was taken over from a host that may still be running it: it cannot be run again or
    declined before its deadline (``deadline`` in the details) unless that host's outcome arrives first,
    in which case the run goes on with it by itself. Nothing was claimed; the call stays paused."""

    code = "AGENT_TOOL_CALL_IN_DOUBT"
    http_status = 409


class DecisionPendingError(AgentUnavailableError):
    """The decision was accepted and is durable, but the subagent it is for cannot be reached yet: it is
    delivered (once) when that agent is back; the run carries on then. Deciding again is a conflict."""

    code = "AGENT_DECISION_PENDING"
    http_status = 503


class RayAuthError(TroupeError):
    """Ray's token authentication refused this process, or no token was found to present."""

    code = "RAY_AUTH_FAILED"
    http_status = 503


class MCPServerError(TroupeError):
    """An MCP server an agent takes tools from could not be started or reached; nothing of any run was
    changed, and the next operation tries again."""

    code = "MCP_SERVER_UNAVAILABLE"
    http_status = 503


class ToolNameConflictError(TroupeError):
    """Two of an agent's tool sources (its own tools, subagents, MCP servers) offer the same tool name."""

    code = "AGENT_TOOL_NAME_CONFLICT"


class ModelError(TroupeError):
    """The model failed or answered something the loop cannot use."""

    code = "MODEL_ERROR"
    http_status = 502


class RunFailedError(TroupeError):
    """A run ended with an error chunk; raised by ``result()``/``generate()`` so it is never silent."""

    code = "AGENT_RUN_FAILED"


class StorageError(TroupeError):
    code = "STORAGE_ERROR"


class StorageUnavailableError(StorageError):
    code = "STORAGE_UNAVAILABLE"
    http_status = 503


class SnapshotVersionError(StorageError):
    """A stored snapshot has a schema version this code does not know."""

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
    """Rebuild an error from ``TroupeError.to_dict()`` (used for error chunks and HTTP bodies)."""
    cls = _error_class(str(data.get("code")))
    return cls(str(data.get("message", "")), **dict(data.get("details") or {}))


__all__ = [
    "AgentNotFoundError",
    "AgentUnavailableError",
    "AmbiguousSuspendedRunsError",
    "ApprovalPolicyError",
    "CancelForbiddenError",
    "DecisionConflictError",
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
