"""The approval inbox: a page at ``GET /inbox`` where a person sees every pause waiting for them and
decides it, and ``GET /api/inbox``, the JSON listing it polls.

``GET /api/inbox`` lists the pending pauses of every agent this app serves, in one call, in the shape of
``GET /api/agents/{agentId}/suspended-runs`` (``{"runs": [...], "total"}``, newest pause first, each run
with its ``agentId``). Only top-level runs are listed: a pause from a subagent is decided at the top (its
own run is the parent's business), so it shows once, with its ``agentPath``. A key that is not an admin
sees only runs of its own resources; ``page``/``perPage`` page the list as elsewhere.

The page itself (``api/static/inbox.html`` with its script and style, package data, no build step) holds
no data and needs no key to load: it asks the API for everything, sending the key the person types in
(kept in ``sessionStorage``) as ``Authorization: Bearer``; in open mode it needs none. Decisions use the
existing routes (``approve-tool-call``, ``decline-tool-call``, ``resume-stream``, with the pause's
``fingerprint``), so they are checked exactly as any other caller's.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response
from troupe.api.auth import Principal
from troupe.api.deliveries import delivery_json
from troupe.api.errors import ERRORS
from troupe.api.service import CallerDep, ServiceDep
from troupe.api.wire import suspended_runs_json
from troupe.core.state import RunState
from troupe.core.store import SuspendedRunQuery
from troupe.core.suspended import SuspendedRun, SuspendedRunList
from troupe.supervisor.runtime import Runtime

router = APIRouter(tags=["inbox"])
page_router = APIRouter(include_in_schema=False)

_EPOCH = datetime.min.replace(tzinfo=UTC)

# The page's files, served from the package (``api/static``), and their types.
ASSETS = {"inbox.js": "text/javascript; charset=utf-8", "inbox.css": "text/css; charset=utf-8"}
# The page loads only its own files and talks only to its own server.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@router.get("/inbox", operation_id="listInbox", responses=ERRORS)
async def list_inbox(
    service: ServiceDep,
    caller: CallerDep,
    page: Annotated[int | None, Query(ge=0, le=1_000_000, description="0-based; needs perPage")] = None,
    per_page: Annotated[int | None, Query(alias="perPage", ge=1, le=1000)] = None,
) -> dict[str, Any]:
    """Every pause waiting for a human that the caller may decide, across all agents, newest first."""
    SuspendedRunQuery.paged(None, page=page, per_page=per_page)  # the same paging rules, same errors
    runs = await pending_runs(service.runtime, caller)
    total = len(runs)
    if per_page is not None:
        start = (page or 0) * per_page
        runs = runs[start : start + per_page]
    listing = suspended_runs_json(SuspendedRunList(runs, total))
    await asyncio.gather(
        *(_add_reach(service.runtime, r, j) for r, j in zip(runs, listing["runs"], strict=True))
    )
    return listing


async def _add_reach(runtime: Runtime, run: SuspendedRun, shown: dict[str, Any]) -> None:
    """Quorum progress per paused call (approvals so far, approvals needed) and the run's notifications."""
    policies = runtime.approver_policies
    for call, json_call in zip(run.pending, shown["toolCalls"], strict=True):
        policy = (
            policies.for_call(call.tool_name, call.agent_path)
            if policies and call.requires_approval
            else None
        )
        json_call["approvals"] = call.approvals
        json_call["quorum"] = policy.quorum if policy is not None else 1
    shown["deliveries"] = [delivery_json(d) for d in await runtime.deliveries(run.run_id)]


async def pending_runs(runtime: Runtime, caller: Principal) -> list[SuspendedRun]:
    """The top-level suspended runs of the agents ``runtime`` serves that ``caller`` may see, newest
    pause first. An admin's is one query over every agent; a key's, one per agent and resource (the
    store's indexes), so other tenants' runs are never read."""
    served = [agent.id for agent in runtime.list_agents()]
    if caller.admin:
        queries = [SuspendedRunQuery(agent_id=None)]
    else:
        mine = sorted(caller.resources or ())
        queries = [SuspendedRunQuery(agent_id=a, resource_id=r) for a in served for r in mine]
    store = runtime.store()
    found = await asyncio.gather(*(store.list_suspended_runs(q) for q in queries))
    states: dict[str, RunState] = {}
    for part, _total in found:
        for state in part:
            if state.parent is None and state.agent_id in served and caller.may(state.resource_id):
                states[state.run_id] = state
    runs = [SuspendedRun.from_state(s) for s in states.values()]
    runs = [r for r in runs if r.pending]
    runs.sort(key=lambda r: r.run_id)
    runs.sort(key=lambda r: r.suspended_at or _EPOCH, reverse=True)
    return runs


# ---- the page -----------------------------------------------------------------------------------------


@page_router.get("/inbox")
async def inbox_page() -> Response:
    """The approval inbox page (no data in it; it asks ``/api/inbox`` with the person's key)."""
    return Response(_static("inbox.html"), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


@page_router.get("/inbox/assets/{name}")
async def inbox_asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(404, f"no inbox asset {name!r}")
    return Response(_static(name), media_type=media_type, headers=PAGE_HEADERS)


@cache
def _static(name: str) -> bytes:
    return resources.files("troupe.api").joinpath("static", name).read_bytes()


__all__ = ["page_router", "pending_runs", "router"]
