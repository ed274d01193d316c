"""Starting runs and deciding paused tool calls, Mastra's routes under ``/api/agents/{agentId}``.

The inbox page decides through the same routes under ``/api/inbox/agents/{agentId}`` (``inbox_router``):
the audit's surface is the route's, ``inbox`` there and ``http`` here.

Streaming routes answer ``text/event-stream`` (see ``troupe.api.sse``); the ``-generate`` routes answer
the folded ``RunResult`` as JSON (see ``troupe.api.wire``). Each route checks the caller first: a new run
must belong to one of the caller's resources, and a decision may touch only a run of one (admins may do
anything).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from troupe.api.auth import own_resource
from troupe.api.bodies import ApproveBody, CancelBody, DeclineBody, ResumeBody, RunBody, ToolApprovalBody
from troupe.api.cancelled import cancelled_run_json
from troupe.api.errors import ERRORS
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, DeciderDep, ServiceDep, surface
from troupe.api.sse import MEDIA_TYPE, sse_response
from troupe.api.wire import run_result_json
from troupe.core.vocabulary.chunks import camelize
from troupe.core.vocabulary.errors import SnapshotNotFoundError

router = APIRouter(tags=["runs"], route_class=TroupeRoute)

STREAM = {
    **ERRORS,
    200: {
        "description": 'Server-sent events: `data: {"type", "runId", "from", "payload"}` frames, '
        "then `data: [DONE]`",
        "content": {MEDIA_TYPE: {"schema": {"type": "string"}}},
    },
}
STREAM_ROUTE: dict[str, Any] = {"response_class": StreamingResponse, "responses": STREAM}
JSON_ROUTE: dict[str, Any] = {"responses": ERRORS}


# ---- starting -----------------------------------------------------------------------------------------


@router.post("/agents/{agentId}/stream", operation_id="stream", **STREAM_ROUTE)
async def stream(
    agentId: str, body: RunBody, request: Request, service: ServiceDep, caller: CallerDep
) -> StreamingResponse:
    """Start a run and stream its chunks until it ends or pauses for a human."""
    return sse_response(await service.start(agentId, body, caller, "stream"), request, caller)


@router.post("/agents/{agentId}/generate", operation_id="generate", **JSON_ROUTE)
async def generate(agentId: str, body: RunBody, service: ServiceDep, caller: CallerDep) -> dict[str, Any]:
    """Run to the end or to the first pause (``finishReason: "suspended"``, ``suspendPayload`` set)."""
    return run_result_json(await service.start(agentId, body, caller, "generate"))


# ---- deciding -----------------------------------------------------------------------------------------


@router.post("/agents/{agentId}/approve-tool-call", operation_id="approveToolCall", **STREAM_ROUTE)
async def approve_tool_call(
    agentId: str,
    body: ApproveBody,
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
    decider: DeciderDep,
) -> StreamingResponse:
    """Approve a paused call: the tool runs (once) and the run carries on."""
    agent = await service.run_agent(caller, agentId, body.run_id)
    stream = await agent.approve_tool_call(**_approval(body), **decider)
    return sse_response(stream, request, caller)


@router.post("/agents/{agentId}/decline-tool-call", operation_id="declineToolCall", **STREAM_ROUTE)
async def decline_tool_call(
    agentId: str,
    body: DeclineBody,
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
    decider: DeciderDep,
) -> StreamingResponse:
    """Decline a paused call: the tool never runs; the model is told ``reason``."""
    agent = await service.run_agent(caller, agentId, body.run_id)
    stream = await agent.decline_tool_call(**_refusal(body), **decider)
    return sse_response(stream, request, caller)


@router.post(
    "/agents/{agentId}/approve-tool-call-generate", operation_id="approveToolCallGenerate", **JSON_ROUTE
)
async def approve_tool_call_generate(
    agentId: str,
    body: ApproveBody,
    service: ServiceDep,
    caller: CallerDep,
    decider: DeciderDep,
) -> dict[str, Any]:
    agent = await service.run_agent(caller, agentId, body.run_id)
    result = await agent.approve_tool_call_generate(**_approval(body), **decider)
    return run_result_json(result)


@router.post(
    "/agents/{agentId}/decline-tool-call-generate", operation_id="declineToolCallGenerate", **JSON_ROUTE
)
async def decline_tool_call_generate(
    agentId: str,
    body: DeclineBody,
    service: ServiceDep,
    caller: CallerDep,
    decider: DeciderDep,
) -> dict[str, Any]:
    agent = await service.run_agent(caller, agentId, body.run_id)
    result = await agent.decline_tool_call_generate(**_refusal(body), **decider)
    return run_result_json(result)


@router.post("/agents/{agentId}/resume-stream", operation_id="resumeStream", **STREAM_ROUTE)
async def resume_stream(
    agentId: str,
    body: ResumeBody,
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
    decider: DeciderDep,
) -> StreamingResponse:
    """Answer a paused call with ``resumeData``, validated against its ``resumeSchema``: a ``suspend()``'s
    answer, or ``{approved, reason?}`` for an approval (decided exactly as approve/decline)."""
    agent = await service.run_agent(caller, agentId, body.run_id)
    stream = await agent.resume_stream(body.resume_data, **_resumption(body), **decider)
    return sse_response(stream, request, caller)


@router.post("/agents/{agentId}/resume-generate", operation_id="resumeGenerate", **JSON_ROUTE)
async def resume_generate(
    agentId: str,
    body: ResumeBody,
    service: ServiceDep,
    caller: CallerDep,
    decider: DeciderDep,
) -> dict[str, Any]:
    """Troupe's addition: ``resume-stream`` answered with the folded result."""
    agent = await service.run_agent(caller, agentId, body.run_id)
    result = await agent.resume_generate(body.resume_data, **_resumption(body), **decider)
    return run_result_json(result)


@router.post(
    "/agents/{agentId}/send-tool-approval",
    operation_id="sendToolApproval",
    responses={**STREAM, 200: {**STREAM[200], "content": {"application/json": {}, MEDIA_TYPE: {}}}},
)
async def send_tool_approval(
    agentId: str,
    body: ToolApprovalBody,
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
    decider: DeciderDep,
) -> Any:
    """Decide the paused call of the run suspended on a thread, without knowing its run id.

    Answers ``{"accepted": true, "runId", "toolCallId"}`` as Mastra does, while the run carries on; with
    ``Accept: text/event-stream`` it streams the run's chunks instead.
    """
    agent = service.agent(agentId)
    resource_id = own_resource(caller, body.resource_id)
    stream = await agent.send_tool_approval(
        thread_id=body.thread_id,
        resource_id=resource_id,
        approved=body.approved,
        tool_call_id=body.tool_call_id,
        reason=body.reason,
        resume_data=body.resume_data,
        **decider,
    )
    if MEDIA_TYPE in request.headers.get("accept", ""):
        return sse_response(stream, request, caller)
    service.spawn(stream.result())
    accepted: dict[str, Any] = {"accepted": True, "runId": stream.run_id}
    if body.tool_call_id is not None:
        accepted["toolCallId"] = body.tool_call_id
    return JSONResponse(accepted)


# ---- cancelling ---------------------------------------------------------------------------------------


@router.post("/agents/{agentId}/cancel-run", operation_id="cancelRun", **JSON_ROUTE)
async def cancel_run(
    agentId: str,
    body: CancelBody,
    request: Request,
    service: ServiceDep,
    caller: CallerDep,
) -> dict[str, Any]:
    """Cancel a run, wherever it stands (in a model turn, in a tool, or paused); answered once the cancel
    is durable. The run's own principal, an admin, or an approver its approver policies name may (403
    otherwise); a run already cancelled or finished is a 409."""
    agent = await service.run_agent(caller, agentId, body.run_id)
    cancelled = await agent.cancel_run(
        body.run_id,
        reason=body.reason,
        tool_call_id=body.tool_call_id,
        fingerprint=body.fingerprint,
        cancelled_by=caller,
        surface=surface(request),
    )
    return cancelled_run_json(cancelled)


@router.get("/agents/{agentId}/runs/{runId}", operation_id="getRun", **JSON_ROUTE)
async def get_run(agentId: str, runId: str, service: ServiceDep, caller: CallerDep) -> dict[str, Any]:
    """Where a run stands: ``running``, ``suspended``, ``finished`` or ``cancelled`` (then ``cancelled``
    says by whom, why and when), as far as its snapshot or, once it is gone, its audit log tells."""
    agent = await service.run_agent(caller, agentId, runId)
    info = await service.runtime.run_info(agent.id, runId)
    if info is None:
        raise SnapshotNotFoundError(f"snapshot not found for run {runId} of agent {agentId!r}", run_id=runId)
    return {
        "runId": info["run_id"],
        "agentId": info["agent_id"],
        "threadId": info["thread_id"],
        "resourceId": info["resource_id"],
        "status": info["status"],
        "cancelled": camelize(info["cancelled"]) if info.get("cancelled") else None,
    }


class InboxRoute(TroupeRoute):
    """A decision route of the inbox page's own: the audit records its decisions as ``inbox``."""

    surface = "inbox"


# The inbox page decides through these: the same routes under /api/inbox, so that the server, not the
# page, says where a decision came from. Not in the OpenAPI document: they are the page's, not the API's.
inbox_router = APIRouter(tags=["inbox"], route_class=InboxRoute)
for _path, _endpoint, _response in (
    ("approve-tool-call", approve_tool_call, StreamingResponse),
    ("decline-tool-call", decline_tool_call, StreamingResponse),
    ("resume-stream", resume_stream, StreamingResponse),
    ("cancel-run", cancel_run, JSONResponse),
):
    inbox_router.add_api_route(
        f"/inbox/agents/{{agentId}}/{_path}",
        _endpoint,
        methods=["POST"],
        include_in_schema=False,
        response_class=_response,
    )


def _approval(body: ApproveBody) -> dict[str, Any]:
    return {
        "run_id": body.run_id,
        "tool_call_id": body.tool_call_id,
        "edited_args": body.edited_args,
        "fingerprint": body.fingerprint,
    }


def _refusal(body: DeclineBody) -> dict[str, Any]:
    return {
        "run_id": body.run_id,
        "tool_call_id": body.tool_call_id,
        "reason": body.reason,
        "fingerprint": body.fingerprint,
    }


def _resumption(body: ResumeBody) -> dict[str, Any]:
    return {"run_id": body.run_id, "tool_call_id": body.tool_call_id, "fingerprint": body.fingerprint}


__all__ = ["InboxRoute", "inbox_router", "router"]
