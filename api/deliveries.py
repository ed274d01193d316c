"""Where a run's notifications stand, and sending one again.

``GET /api/agents/{agentId}/runs/{runId}/deliveries`` lists the run's outbox entries (event type, target,
status, attempts, last error), for whoever may see the run; ``POST /api/deliveries/{deliveryId}/redeliver``
(admins) makes one pending again with a fresh retry schedule. Bodies never hold a target's URL or secret.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from troupe.api.errors import ERRORS, PermissionDeniedError
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, ServiceDep
from troupe.core.vocabulary.store import OutboxEntry

router = APIRouter(tags=["notifications"], route_class=TroupeRoute)


@router.get("/agents/{agentId}/runs/{runId}/deliveries", operation_id="listDeliveries", responses=ERRORS)
async def list_deliveries(agentId: str, runId: str, service: ServiceDep, caller: CallerDep) -> dict[str, Any]:
    await service.run_agent(caller, agentId, runId)
    return {"deliveries": [delivery_json(d) for d in await service.runtime.deliveries(runId)]}


@router.post("/deliveries/{deliveryId}/redeliver", operation_id="redeliver", responses=ERRORS)
async def redeliver(deliveryId: str, service: ServiceDep, caller: CallerDep) -> dict[str, Any]:
    if not caller.admin:
        raise PermissionDeniedError(f"{caller.display!r} may not redeliver notifications (admins only)")
    return delivery_json(await service.runtime.redeliver(deliveryId))


def delivery_json(entry: OutboxEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "eventId": entry.event_id,
        "type": entry.body.get("type"),
        "toolCallId": entry.body.get("data", {}).get("toolCallId"),
        "target": entry.target,
        "status": entry.status,
        "attempts": entry.attempts,
        "lastError": entry.last_error,
        "deliveredAt": entry.delivered_at,
        "nextAttemptAt": entry.next_at if entry.status == "pending" else None,
    }


__all__ = ["delivery_json", "router"]
