"""``create_app(runtime)``: the FastAPI front door, Mastra-compatible routes under ``/api``.

    app = create_app(runtime, keys={"k-acme": {"name": "acme", "resources": ["acme"]},
                                    "k-ops": {"name": "ops", "admin": True}})
    app = create_app(runtime, open_mode=True)   # local use only: no key needed, everything visible

``GET /inbox`` serves the approval inbox page (see ``troupe.api.inbox``).

Every error is JSON ``{"error": "<message>", "code", "details"}`` with the error's ``http_status``: a
caller's mistake is a 4xx (a body that does not validate, or is not JSON, is 422), never a 500. The app
does not own the runtime: whoever created the runtime shuts it down (``troupe serve`` does).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, nullcontext
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from troupe.api import catalog, decision_links, deliveries, inbox, runs, suspended
from troupe.api.auth import Gate, KeyRing, keyring
from troupe.api.errors import AuthenticationError, HttpError, InvalidRequestError, error_body
from troupe.api.guards import DEFAULT_MAX_BODY_BYTES, BodyLimit, HostCheck, allowed_hosts
from troupe.api.mcp_http import mcp_endpoint
from troupe.api.service import Service
from troupe.api.streams import MIN_INTERVAL_S
from troupe.core.vocabulary.errors import TroupeError
from troupe.supervisor.runtime import Runtime

log = logging.getLogger("troupe.api")

DESCRIPTION = """Troupe's HTTP front door: Mastra-compatible agent routes (stream, generate, approve and
decline tool calls, resume, list suspended runs), server-sent events, API keys per resource."""


def create_app(
    runtime: Runtime,
    *,
    keys: KeyRing | Mapping[str, Any] | None = None,
    open_mode: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    hosts: Iterable[str] | None = None,
    min_event_interval_s: float = MIN_INTERVAL_S,
) -> FastAPI:
    """The app serving ``runtime``. ``keys``: a ``KeyRing`` or ``{key: {"name", "resources": [...]} |
    {"admin": true}}``. Without ``open_mode`` a request without a valid key gets 401. A body over
    ``max_body_bytes`` gets 413 before anything else. In open mode only requests whose ``Host`` is a
    loopback name (or one of ``hosts``) are answered. An inbox event stream re-reads the store at most
    every ``min_event_interval_s`` seconds, whatever interval it asks for."""
    service = Service(runtime, Gate(keyring(keys), open_mode), min_event_interval_s=min_event_interval_s)
    # /mcp: the agents as MCP tools, behind the same keys (troupe.api.mcp_http).
    mcp = mcp_endpoint(service, allowed_hosts("127.0.0.1", hosts or ()))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.running() if mcp is not None else nullcontext():
            yield
            await service.drain()

    app = FastAPI(title="Troupe", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.troupe = service
    for module in (catalog, runs, suspended, inbox, deliveries):
        app.include_router(module.router, prefix="/api")
    app.include_router(inbox.page_router)  # GET /inbox: the approval inbox page
    app.include_router(decision_links.router)  # GET/POST /decide/{token}: decision links
    if mcp is not None:
        app.router.routes.append(Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]))
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, decision_links.RedactLinks) for f in access.filters):
        access.addFilter(decision_links.RedactLinks())
    app.add_exception_handler(TroupeError, _on_troupe_error)
    app.add_exception_handler(RequestValidationError, _on_invalid_request)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    if open_mode:
        app.add_middleware(HostCheck, hosts=allowed_hosts("127.0.0.1", hosts or ()))
    return app


def error_response(error: TroupeError, status: int | None = None) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, AuthenticationError) else None
    return Response(
        error_body(error),
        status_code=status or error.http_status,
        media_type="application/json",
        headers=headers,
    )


async def _on_troupe_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TroupeError)
    return error_response(exc)


async def _on_invalid_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {
            "loc": [str(part) for part in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type")),
        }
        for e in exc.errors()
    ]
    summary = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:3])
    return error_response(InvalidRequestError(f"invalid request: {summary}", errors=errors))


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # FastAPI's own "error parsing the body" (e.g. bytes that are not UTF-8)
        return error_response(InvalidRequestError(f"invalid request: {exc.detail}"))
    response = error_response(HttpError(str(exc.detail), status=exc.status_code), exc.status_code)
    response.headers.update(exc.headers or {})  # a 405's Allow: the methods the path does take
    return response


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(TroupeError("internal server error", type=type(exc).__name__), 500)


__all__ = ["create_app", "error_response"]
