"""``GET /api/agents/{agentId}/suspended-runs``: runs waiting for a human, from storage (so they are found
after a restart and from any server), newest pause first, with Mastra's query (``threadId``,
``resourceId``, ``fromDate``, ``toDate``, 0-based ``page``, ``perPage``) and ``cursor``: the
``nextCursor`` of the page before, which every answer carries (null on the last page). One page is read
from the store's indexes (``Store.list_paused``); a request that asks for no page gets the first 100.

A key that is not an admin sees only its own resources: a ``resourceId`` of another is refused (403), and
without one the key's resources are listed together, one index each, merged in the store (total and
pages over all of them). A ``threadId`` on an agent without memory is refused (403), as Mastra does:
there are no threads to own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import StringConstraints
from troupe.api.auth import check_resource
from troupe.api.errors import ERRORS, PermissionDeniedError
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, ServiceDep
from troupe.api.wire import suspended_runs_json
from troupe.core.vocabulary.listing import DEFAULT_PER_PAGE, PausedQuery, page_window
from troupe.core.vocabulary.pause_shapes import suspended_list

router = APIRouter(tags=["runs"], route_class=TroupeRoute)

Id = Annotated[str, StringConstraints(min_length=1, max_length=256)]


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
    cursor: Annotated[
        str | None, Query(max_length=2048, description="the nextCursor of the page before (same filters)")
    ] = None,
) -> dict[str, Any]:
    agent = service.agent(agentId)
    if thread_id is not None and agent.memory is None:
        raise PermissionDeniedError(
            f"Access denied: agent {agent.id!r} has no memory configured to validate thread ownership",
            agent_id=agent.id,
        )
    if caller.admin or resource_id is not None:
        check_resource(caller, resource_id, "resource")
        resources: tuple[str, ...] | None = None if resource_id is None else (resource_id,)
    else:
        resources = tuple(sorted(caller.resources))
    limit, offset = page_window(page, per_page or DEFAULT_PER_PAGE, cursor)
    query = PausedQuery(
        agents=(agent.id,),
        resources=resources,
        thread_id=thread_id,
        from_date=_utc(from_date),
        to_date=_utc(to_date),
        order="newest",
        limit=limit or DEFAULT_PER_PAGE,
        offset=offset,
        cursor=cursor,
    )
    return suspended_runs_json(suspended_list(await service.runtime.store().list_paused(query)))


def _utc(at: datetime | None) -> datetime | None:
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


__all__ = ["router"]
