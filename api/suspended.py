"""``GET /api/agents/{agentId}/suspended-runs``: runs waiting for a human, from storage (so they are found
after a restart and from any server), newest pause first, with Mastra's query (``threadId``,
``resourceId``, ``fromDate``, ``toDate``, 0-based ``page``, ``perPage``).

A key that is not an admin sees only its own resources: a ``resourceId`` of another is refused (403), and
without one the key's resources are each queried and merged (total and pages over all of them). A
``threadId`` on an agent without memory is refused (403), as Mastra does: there are no threads to own.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import StringConstraints
from troupe.api.auth import check_resource
from troupe.api.errors import ERRORS, PermissionDeniedError
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, ServiceDep
from troupe.api.wire import suspended_runs_json
from troupe.core.vocabulary.store import SuspendedRunQuery
from troupe.core.vocabulary.suspended import SuspendedRunList
from troupe.supervisor.agent import Agent

router = APIRouter(tags=["runs"], route_class=TroupeRoute)

Id = Annotated[str, StringConstraints(min_length=1, max_length=256)]
_EPOCH = datetime.min.replace(tzinfo=UTC)


@router.get("/agents/{agentId}/suspended-runs", operation_id="listSuspendedRuns", responses=ERRORS)
async def list_suspended_runs(
    agentId: str,
    service: ServiceDep,
    caller: CallerDep,
    thread_id: Annotated[Id | None, Query(alias="threadId")] = None,
    resource_id: Annotated[Id | None, Query(alias="resourceId")] = None,
    from_date: Annotated[
        datetime | None, Query(alias="fromDate", description="ISO 8601; UTC if naive")
    ] = None,
    to_date: Annotated[datetime | None, Query(alias="toDate", description="ISO 8601; UTC if naive")] = None,
    page: Annotated[
        int | None, Query(ge=0, le=1_000_000, description="0-based; perPage per page, 100 if not given")
    ] = None,
    per_page: Annotated[int | None, Query(alias="perPage", ge=1, le=1000)] = None,
) -> dict[str, Any]:
    agent = service.agent(agentId)
    if thread_id is not None and agent.memory is None:
        raise PermissionDeniedError(
            f"Access denied: agent {agent.id!r} has no memory configured to validate thread ownership",
            agent_id=agent.id,
        )
    filters: dict[str, Any] = {"thread_id": thread_id, "from_date": _utc(from_date), "to_date": _utc(to_date)}
    if caller.admin or resource_id is not None:
        check_resource(caller, resource_id, "resource")
        found = await agent.list_suspended_runs(
            resource_id=resource_id, page=page, per_page=per_page, **filters
        )
    else:
        found = await _merged(agent, sorted(caller.resources), page, per_page, filters)
    return suspended_runs_json(found)


async def _merged(
    agent: Agent, resources: list[str], page: int | None, per_page: int | None, filters: dict[str, Any]
) -> SuspendedRunList:
    """One listing over several resources: the first ``(page + 1) * perPage`` of each, merged."""
    query = SuspendedRunQuery.paged(agent.id, page=page, per_page=per_page)  # the same rules and errors
    per_page = query.limit  # a page asked for without its size has the default size
    want = None if per_page is None else ((page or 0) + 1) * per_page
    parts = await asyncio.gather(
        *(
            agent.list_suspended_runs(
                resource_id=r, page=None if want is None else 0, per_page=want, **filters
            )
            for r in resources
        )
    )
    runs = sorted(
        (r for part in parts for r in part.runs), key=lambda r: r.suspended_at or _EPOCH, reverse=True
    )
    if per_page is not None:
        start = (page or 0) * per_page
        runs = runs[start : start + per_page]
    return SuspendedRunList(runs, sum(part.total for part in parts))


def _utc(at: datetime | None) -> datetime | None:
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


__all__ = ["router"]
