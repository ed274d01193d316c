"""The JSON shape of a cancel over HTTP, both ways: the server writes it, the Python client reads it.

``POST /api/agents/{agentId}/cancel-run`` answers ``{"runId", "agentId", "status": "cancelled",
"reason", "cancelledBy", "cancelledAt", "was"}`` once the cancel is durable (``was``: ``running`` or
``suspended``, where the run stood).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from troupe.core.vocabulary.requests import CancelledRun


def cancelled_run_json(cancelled: CancelledRun) -> dict[str, Any]:
    return {
        "runId": cancelled.run_id,
        "agentId": cancelled.agent_id,
        "status": "cancelled",
        "reason": cancelled.reason,
        "cancelledBy": cancelled.cancelled_by,
        "cancelledAt": cancelled.cancelled_at.isoformat(),
        "was": cancelled.was,
    }


def cancelled_run_from_json(data: dict[str, Any]) -> CancelledRun:
    return CancelledRun(
        run_id=str(data.get("runId", "")),
        agent_id=str(data.get("agentId", "")),
        reason=str(data.get("reason", "")),
        cancelled_by=data.get("cancelledBy"),
        cancelled_at=datetime.fromisoformat(str(data["cancelledAt"])),
        was=str(data.get("was", "")),
    )


__all__ = ["cancelled_run_from_json", "cancelled_run_json"]
