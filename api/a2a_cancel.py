"""``tasks/cancel`` on Troupe's A2A agents: the run behind the task is cancelled through
``Agent.cancel_run``, as the caller, through the surface ``"a2a"``, exactly as ``POST /cancel-run``
cancels it (who may: the run's starter, an admin, an approver its policies name).

- The answer is the task ``canceled`` once the cancel is durable (``troupe.api.a2a_tasks``); the reason
  is the request's ``metadata.reason`` if it gives one.
- A task that cannot be cancelled is A2A's ``TaskNotCancelableError``, its message starting with
  Troupe's code: a caller who may not cancel it (``AGENT_CANCEL_FORBIDDEN``), a task already cancelled
  (``AGENT_RUN_CANCELLED``, naming who cancelled it; as in the A2A SDK's own handler, a task in a
  terminal state is not cancelable, so a second cancel gets it too) or finished
  (``AGENT_RUN_NOT_CANCELLABLE``). Another tenant's task is unknown (``TaskNotFoundError``), as for
  every other method.
"""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import Task
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, UnsupportedOperationError
from troupe.api.a2a_tasks import cancelled_task
from troupe.api.bodies import MAX_TEXT_CHARS
from troupe.core.vocabulary.errors import CancelForbiddenError, RunCancelledError, RunNotCancellableError
from troupe.core.vocabulary.identity import Principal
from troupe.supervisor.agent import Agent

SURFACE = "a2a"


def reason_of(metadata: dict[str, Any]) -> str | None:
    """The cancel's reason, from the request's ``metadata.reason`` (None: Troupe's default)."""
    reason = metadata.get("reason")
    if reason is None:
        return None
    if not isinstance(reason, str) or len(reason) > MAX_TEXT_CHARS:
        raise InvalidParamsError(f"metadata.reason must be a string of at most {MAX_TEXT_CHARS} characters")
    return reason


async def cancel_task(
    agent: Agent, caller: Principal, task_id: str, context_id: str, metadata: dict[str, Any]
) -> Task:
    """Cancel the run behind ``task_id`` as ``caller``; the task, ``canceled``, once that is durable.

    Args:
        agent: the agent the task is of.
        caller: who asks (the cancel is audited as them, through ``"a2a"``).
        task_id: the task (the run's id), already checked to be one the caller may see.
        context_id: the task's context.
        metadata: the request's metadata (``reason``).

    Returns:
        The task in state ``canceled``, saying who cancelled it and why.

    Raises:
        TaskNotCancelableError: the caller may not cancel it, or it was cancelled or finished already.
        InvalidParamsError: ``metadata.reason`` is not a string.
    """
    try:
        cancelled = await agent.cancel_run(
            task_id, reason=reason_of(metadata), cancelled_by=caller, surface=SURFACE
        )
    except (CancelForbiddenError, RunCancelledError, RunNotCancellableError) as exc:
        raise TaskNotCancelableError(f"{exc.code}: {exc.message}") from exc
    if cancelled.was == "cancelled":  # the same cancel, asked again: the task had ended canceled
        raise TaskNotCancelableError(
            f"{RunCancelledError.code}: task {task_id} was cancelled already"
            + (f" by {cancelled.cancelled_by}" if cancelled.cancelled_by else "")
            + f": {cancelled.reason}"
        )
    told = {
        "reason": cancelled.reason,
        "cancelled_by": cancelled.cancelled_by,
        "cancelled_at": cancelled.cancelled_at,
    }
    return cancelled_task(task_id, context_id, told)


def not_answerable(
    task_id: str, info: dict[str, Any], doing: str = "nothing in it waits for an answer"
) -> Exception:
    """Why a task whose run has ended (or was cancelled) takes no answer and has nothing to follow."""
    cancelled = info.get("cancelled") if info.get("status") == "cancelled" else None
    if cancelled:
        who = f" by {cancelled['cancelled_by']}" if cancelled.get("cancelled_by") else ""
        return UnsupportedOperationError(
            f"task {task_id} was cancelled{who} ({cancelled.get('reason')}): {doing}"
        )
    return UnsupportedOperationError(f"task {task_id} has finished: {doing}")


__all__ = ["SURFACE", "cancel_task", "not_answerable", "reason_of"]
