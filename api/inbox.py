"""The approval inbox: a page at ``GET /inbox`` where a person sees every pause waiting for them and
decides it, ``GET /api/inbox``, the JSON listing, and ``GET /api/inbox/events``, the same listing pushed
as server-sent events whenever it changes (what the page listens to).

``GET /api/inbox`` lists the pending pauses of every agent this app serves, in one call, in the shape of
``GET /api/agents/{agentId}/suspended-runs`` (``{"runs": [...], "total"}``, oldest pause first, each run
with its ``agentId``). Only top-level runs are listed: a pause from a subagent is decided at the top (its
own run is the parent's business), so it shows once, with its ``agentPath``. Each call carries its
``context``: the request that started the run, the model's text before the call, the tool's
description. Each run says who started it (``startedBy``, and ``starter``: subject and issuer), and each
call who has approved it so far (``approvals`` by name, ``approvedBy`` with subjects and any edits). A
caller that is not an admin sees only runs of its own resources; ``page``/``perPage`` page the list as
elsewhere.

The page itself (``api/static/inbox.html`` with its script and style, package data, no build step) holds
no data and needs no key to load: it asks the API for everything, sending the key the person types in
(kept in ``sessionStorage``) as ``Authorization: Bearer`` (an API key or a token), or the host app's
session cookie when Troupe is mounted in one; in open mode it needs none. Decisions use the existing
routes (``approve-tool-call``, ``decline-tool-call``, ``resume-stream``, with the pause's
``fingerprint``) under ``/api/inbox/agents/{agentId}``, which the audit records as the ``inbox`` surface
(troupe.api.runs), so they are checked exactly as any other caller's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse
from troupe.api.auth import Principal
from troupe.api.deliveries import delivery_json
from troupe.api.errors import ERRORS
from troupe.api.inbox_context import call_context
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, ServiceDep
from troupe.api.sse import MEDIA_TYPE
from troupe.api.wire import suspended_runs_json
from troupe.core.vocabulary.errors import TroupeError
from troupe.core.vocabulary.identity import Identity
from troupe.core.vocabulary.pause_shapes import suspended_run
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import DEFAULT_PER_PAGE, SuspendedRunQuery
from troupe.core.vocabulary.suspended import SuspendedRun, SuspendedRunList
from troupe.supervisor.runtime import Runtime

router = APIRouter(tags=["inbox"], route_class=TroupeRoute)
page_router = APIRouter(include_in_schema=False, route_class=TroupeRoute)

_EPOCH = datetime.min.replace(tzinfo=UTC)
KEEPALIVE_S = 15.0

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
    page: Annotated[
        int | None, Query(ge=0, le=1_000_000, description="0-based; perPage per page, 100 if not given")
    ] = None,
    per_page: Annotated[int | None, Query(alias="perPage", ge=1, le=1000)] = None,
) -> dict[str, Any]:
    """Every pause waiting for a human that the caller may decide, across all agents, oldest first,
    each call with its ``context`` (the run's request, the model's text before the call, the tool's
    description)."""
    SuspendedRunQuery.paged(None, page=page, per_page=per_page)  # the same paging rules, same errors
    return await inbox_json(service.runtime, caller, page, per_page)


@router.get("/inbox/events", include_in_schema=False)
async def inbox_events(
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
    interval: Annotated[float, Query(gt=0, le=60)] = 1.0,
) -> StreamingResponse:
    """The inbox listing pushed as server-sent events: one ``data:`` frame now and one whenever it
    changes (the page listens here instead of polling). A store that fails is reported in a frame
    ``{"error": {...}}`` and tried again. A caller keeps a few streams open at most (429 beyond), each
    re-reading at most once a second (or the server's ``min_event_interval_s``). Not in the OpenAPI
    document: the stream does not end."""
    close = service.streams.open(caller.id, caller.display)
    every = max(interval, service.min_event_interval_s)

    async def frames() -> AsyncIterator[str]:
        last, quiet = "", 0.0
        try:
            while not await request.is_disconnected():
                try:
                    body = await inbox_json(service.runtime, caller, None, None)
                except TroupeError as exc:
                    body = {"error": exc.to_dict()}
                frame = json.dumps(body, default=str, separators=(",", ":"))
                if frame != last:
                    last, quiet = frame, 0.0
                    yield f"data: {frame}\n\n"
                elif quiet >= KEEPALIVE_S:
                    quiet = 0.0
                    yield ": keep-alive\n\n"
                await asyncio.sleep(every)
                quiet += every
        finally:
            close()

    return StreamingResponse(frames(), media_type=MEDIA_TYPE, headers={"Cache-Control": "no-store"})


async def inbox_json(
    runtime: Runtime, caller: Principal, page: int | None, per_page: int | None
) -> dict[str, Any]:
    states = await pending_states(runtime, caller)
    total = len(states)
    if page is not None or per_page is not None:
        per_page = per_page or DEFAULT_PER_PAGE
        start = (page or 0) * per_page
        states = states[start : start + per_page]
    runs = [suspended_run(s) for s in states]
    body = suspended_runs_json(SuspendedRunList(runs, total))
    for state, run in zip(states, body["runs"], strict=True):
        context = call_context(runtime, state)
        _add_people(state, run)
        for call in run["toolCalls"]:
            call["context"] = context.get(call["toolCallId"])
    await asyncio.gather(*(_add_reach(runtime, r, j) for r, j in zip(runs, body["runs"], strict=True)))
    return body


def _add_people(state: RunState, shown: dict[str, Any]) -> None:
    """Who started the run and who has approved each call so far (for a quorum), as people and as
    subjects: what a person applying separation of duties by eye needs."""
    starter = state.starter or (Identity.legacy(state.started_by) if state.started_by else None)
    shown["startedBy"] = starter.display if starter is not None else None
    shown["starter"] = _person(starter) if starter is not None else None
    pauses = {(c.tool_call_id, p.fingerprint): p for c, p in state.open_pauses()}
    for call in shown["toolCalls"]:
        pause = pauses.get((call["toolCallId"], call["fingerprint"]))
        approvals = pause.approvals if pause is not None else []
        call["approvedBy"] = [{**_person(a), "editedArgs": a.edited_args} for a in approvals]


def _person(who: Identity) -> dict[str, Any]:
    return {"name": who.display, "subject": who.subject, "issuer": who.issuer, "surface": who.surface or None}


async def _add_reach(runtime: Runtime, run: SuspendedRun, shown: dict[str, Any]) -> None:
    """Quorum progress per paused call (approvals so far, approvals needed) and the run's notifications."""
    policies = runtime.approver_policies
    for call, json_call in zip(run.pending, shown["toolCalls"], strict=True):
        gated = policies is not None and call.requires_approval
        policy = policies.for_call(call.tool_name, call.agent_path) if policies and gated else None
        json_call["approvals"] = call.approvals
        json_call["quorum"] = policy.quorum if policy is not None else 1
    shown["deliveries"] = [delivery_json(d) for d in await runtime.deliveries(run.run_id)]


async def pending_runs(runtime: Runtime, caller: Principal) -> list[SuspendedRun]:
    return [suspended_run(s) for s in await pending_states(runtime, caller)]


async def pending_states(runtime: Runtime, caller: Principal) -> list[RunState]:
    """The top-level suspended runs of the agents ``runtime`` serves that ``caller`` may see, oldest
    pause first. An admin's is one query over every agent; a key's, one per agent and resource (the
    store's indexes), so other tenants' runs are never read."""
    served = [agent.id for agent in runtime.list_agents()]
    if caller.admin:
        queries = [SuspendedRunQuery(agent_id=None)]
    else:
        mine = sorted(caller.resources)
        queries = [SuspendedRunQuery(agent_id=a, resource_id=r) for a in served for r in mine]
    store = runtime.store()
    found = await asyncio.gather(*(store.list_suspended_runs(q) for q in queries))
    states: dict[str, RunState] = {}
    for part, _total in found:
        for state in part:
            if state.parent is None and state.agent_id in served and caller.may(state.resource_id):
                states[state.run_id] = state
    waiting = [s for s in states.values() if s.open_pauses()]
    # Oldest first: a new pause is appended, so nothing moves under a person's pointer.
    waiting.sort(key=lambda s: (s.suspended_at or _EPOCH, s.run_id))
    return waiting


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


__all__ = ["inbox_json", "page_router", "pending_runs", "pending_states", "router"]
