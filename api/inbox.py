"""The approval inbox: a page at ``GET /inbox`` where a person sees every pause waiting for them and
decides it, ``GET /api/inbox``, the JSON listing, and ``GET /api/inbox/events``, the listing's first page
and then its changes, pushed as server-sent events (what the page listens to).

``GET /api/inbox`` lists one page of the pending pauses of every agent this app serves, in the shape of
``GET /api/agents/{agentId}/suspended-runs`` (``{"runs": [...], "total", "nextCursor"}``, oldest pause
first, each run with its ``agentId``), read from the store's indexes (``Runtime.list_pending``): 100 runs
unless ``perPage`` says otherwise, the next page by ``cursor`` (or ``page``), narrowed by ``resourceId``,
``role`` (an approver policy's) and ``fromDate``/``toDate`` (the pause's age). Only top-level runs are
listed: a pause from a subagent is decided at the top (its own run is the parent's business), so it shows
once, with its ``agentPath``. Each call carries its ``context``: the request that started the run, the
model's text before the call, the tool's description. Each run says who started it (``startedBy``, and
``starter``: subject and issuer), and each call who has approved it so far (``approvals`` by name,
``approvedBy`` with subjects and any edits). A caller that is not an admin sees only runs of its own
resources.

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
import functools
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import StringConstraints
from troupe.api.auth import Principal, check_resource
from troupe.api.deliveries import delivery_json
from troupe.api.errors import ERRORS, AuthenticationError
from troupe.api.identity import caller_now
from troupe.api.inbox_context import call_context
from troupe.api.inbox_feed import InboxFeed
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, ServiceDep
from troupe.api.sse import MEDIA_TYPE
from troupe.api.wire import suspended_runs_json
from troupe.core.vocabulary.errors import TroupeError
from troupe.core.vocabulary.identity import Identity
from troupe.core.vocabulary.pause_shapes import suspended_run
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.suspended import SuspendedRun, SuspendedRunList
from troupe.supervisor.runtime import Runtime

router = APIRouter(tags=["inbox"], route_class=TroupeRoute)
page_router = APIRouter(include_in_schema=False, route_class=TroupeRoute)

Id = Annotated[str, StringConstraints(min_length=1, max_length=256)]
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
    cursor: Annotated[
        str | None, Query(max_length=2048, description="the nextCursor of the page before (same filters)")
    ] = None,
    resource_id: Annotated[Id | None, Query(alias="resourceId")] = None,
    role: Annotated[Id | None, Query(description="only calls an approver policy gives this role")] = None,
    from_date: Annotated[datetime | None, Query(alias="fromDate", description="paused at or after")] = None,
    to_date: Annotated[datetime | None, Query(alias="toDate", description="paused at or before")] = None,
) -> dict[str, Any]:
    """One page of every pause waiting for a human that the caller may decide, across all agents, oldest
    first, each call with its ``context`` (the run's request, the model's text before the call, the
    tool's description); ``nextCursor`` asks for the page after it."""
    if resource_id is not None:
        check_resource(caller, resource_id, "resource")
    return await inbox_json(
        service.runtime,
        caller,
        page,
        per_page,
        cursor=cursor,
        resource_ids=None if resource_id is None else [resource_id],
        role=role,
        from_date=_utc(from_date),
        to_date=_utc(to_date),
    )


@router.get("/inbox/events", include_in_schema=False)
async def inbox_events(
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
    interval: Annotated[float, Query(gt=0, le=60)] = 1.0,
    per_page: Annotated[int | None, Query(alias="perPage", ge=1, le=1000)] = None,
) -> StreamingResponse:
    """The inbox pushed as server-sent events: a ``{"type": "page", ...}`` frame now (the listing's first
    page, as ``GET /api/inbox`` gives it), then a ``{"type": "changes", "listed": [runs], "unlisted":
    [run ids], "total"}`` frame whenever runs the caller may see enter, change or leave the listing (read
    from the store's change log: what a look costs grows with the changes, not with the runs waiting;
    ``perPage``: the first page's size). A
    store that fails is reported in a frame ``{"error": {...}}`` and tried again. A caller keeps a few
    streams open at most (429 beyond), each looking at most once a second (or the server's
    ``min_event_interval_s``). The caller's credential is checked again before each look: a key removed
    or a token expired since ends the stream with a frame ``{"error": {"code": "UNAUTHENTICATED", ...}}``,
    and a caller whose resources or roles changed gets its first page again, as it may see it now. Not in
    the OpenAPI document: otherwise the stream does not end."""
    close = service.streams.open(caller.id, caller.display)
    every = max(interval, service.min_event_interval_s)
    feed = InboxFeed(service.runtime, caller, functools.partial(inbox_json, per_page=per_page), run_json)

    async def frames() -> AsyncIterator[str]:
        quiet = 0.0
        try:
            while not await request.is_disconnected():
                try:
                    # A key revoked or a token expired while the stream is open ends it: it would
                    # otherwise go on showing every new pause to someone who may see none.
                    feed.seen_by(await caller_now(request, feed.caller))
                except AuthenticationError as exc:
                    yield _event({"error": exc.to_dict()})
                    return
                try:
                    body = await feed.next()
                except TroupeError as exc:
                    body = {"error": exc.to_dict()}
                if body is not None:
                    quiet = 0.0
                    yield _event(body)
                elif quiet >= KEEPALIVE_S:
                    quiet = 0.0
                    yield ": keep-alive\n\n"
                await asyncio.sleep(every)
                quiet += every
        finally:
            close()

    return StreamingResponse(frames(), media_type=MEDIA_TYPE, headers={"Cache-Control": "no-store"})


def _event(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body, default=str, separators=(',', ':'))}\n\n"


async def inbox_json(
    runtime: Runtime,
    caller: Principal,
    page: int | None = None,
    per_page: int | None = None,
    **filters: Any,
) -> dict[str, Any]:
    """One page of the caller's inbox as ``GET /api/inbox`` answers it (``filters``: those of
    ``Runtime.list_pending``)."""
    found = await runtime.pending_page(caller=caller, page=page, per_page=per_page, **filters)
    runs = await asyncio.gather(*(run_json(runtime, state) for state in found.states))
    return {"runs": list(runs), "total": found.total, "nextCursor": found.next_cursor}


async def run_json(runtime: Runtime, state: RunState) -> dict[str, Any]:
    """One run as the inbox shows it: the suspended-runs shape, with each call's context, who started the
    run and approved so far, quorum progress and the run's notifications."""
    run = suspended_run(state)
    shown = suspended_runs_json(SuspendedRunList([run], 1))["runs"][0]
    context = call_context(runtime, state)
    _add_people(state, shown)
    for call in shown["toolCalls"]:
        call["context"] = context.get(call["toolCallId"])
    await _add_reach(runtime, run, shown)
    return shown


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
    # A runtime that sends no notifications has none to show: a page of runs is not a page of reads.
    sent = await runtime.deliveries(run.run_id) if runtime.notifications is not None else []
    shown["deliveries"] = [delivery_json(d) for d in sent]


def _utc(at: datetime | None) -> datetime | None:
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


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


__all__ = ["inbox_json", "page_router", "router", "run_json"]
