"""``create_app(runtime)``: the FastAPI front door, Mastra-compatible routes under ``/api``.

    app = create_app(runtime, keys={"k-acme": {"name": "acme", "resources": ["acme"]},
                                    "k-ops": {"name": "ops", "admin": True}})
    app = create_app(runtime, open_mode=True)   # local use only: no key needed, everything visible

``GET /inbox`` serves the approval inbox page (see ``troupe.api.inbox``).

Every error is JSON ``{"error": "<message>", "code", "details"}`` with the error's ``http_status``: a
caller's mistake is a 4xx (a body that does not validate, or is not JSON, is 422), never a 500. The app
does not own the runtime: whoever created the runtime shuts it down (``troupe serve`` does).

``troupe_router(runtime, identity=...)`` gives the same routes as an ``APIRouter`` to mount in your own
FastAPI app, under your prefix, dependencies and sessions.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, nullcontext
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Route
from troupe.api import agui, catalog, decision_links, deliveries, inbox, runs, suspended
from troupe.api.a2a_http import a2a_router
from troupe.api.auth import Gate, KeyRing, keyring
from troupe.api.cross_site import refuse_simple_cross_site
from troupe.api.guards import DEFAULT_MAX_BODY_BYTES, BodyLimit, HostCheck, allowed_hosts
from troupe.api.identity import HostIdentity, binder
from troupe.api.mcp_http import MCPEndpoint, MCPLimits, mcp_endpoint
from troupe.api.not_installed import mcp_not_installed
from troupe.api.routing import error_response, http_error, invalid_request
from troupe.api.service import Service
from troupe.api.streams import MIN_INTERVAL_S
from troupe.api.tokens import OidcSettings, TokenVerifier
from troupe.core.vocabulary.errors import TroupeError
from troupe.supervisor.runtime import Runtime

log = logging.getLogger("troupe.api")

DESCRIPTION = """Troupe's HTTP front door: Mastra-compatible agent routes (stream, generate, approve and
decline tool calls, resume, list suspended runs), server-sent events, API keys per resource."""


def troupe_router(
    runtime: Runtime,
    *,
    identity: HostIdentity | None = None,
    keys: KeyRing | Mapping[str, Any] | None = None,
    oidc: OidcSettings | None = None,
    open_mode: bool = False,
    min_event_interval_s: float = MIN_INTERVAL_S,
) -> APIRouter:
    """Troupe's routes for ``runtime``, to include in your own FastAPI app under your prefix and
    dependencies (``app.include_router(troupe_router(runtime, identity=...), prefix="/troupe")``):
    ``/api/...`` (Mastra's routes and the inbox listing), ``/inbox`` (the page) and ``/decide/{token}``
    (decision links). ``identity``: your dependency returning Troupe's ``Principal`` (see
    ``troupe.api.identity``); ``keys`` and ``oidc``: Troupe's own API keys and bearer tokens, asked when
    ``identity`` names nobody. The routes answer their own errors (``troupe.api.routing``); the service
    behind them is ``router.troupe_service`` (``await router.troupe_service.drain()`` at shutdown lets
    work a route left running finish). An inbox event stream re-reads the store at most every
    ``min_event_interval_s`` seconds, whatever interval it asks for."""
    tokens = TokenVerifier(oidc) if oidc is not None else None
    gate = Gate(keyring(keys), open_mode, tokens)
    service = Service(runtime, gate, min_event_interval_s=min_event_interval_s)
    router = APIRouter(dependencies=[Depends(binder(service, identity))])
    # The JSON routes refuse a simple request another site could have sent with a visitor's cookies
    # (troupe.api.cross_site); a decision link's form checks its own POST, with the links' origins.
    json_only = [Depends(refuse_simple_cross_site)]
    for module in (catalog, runs, suspended, inbox, deliveries, agui):
        router.include_router(module.router, prefix="/api", dependencies=json_only)
    router.include_router(runs.inbox_router, prefix="/api", dependencies=json_only)  # the inbox's decisions
    router.include_router(inbox.page_router)  # GET /inbox: the approval inbox page
    router.include_router(decision_links.router)  # GET/POST /decide/{token}: decision links
    # /a2a/{agentId}: the agents over A2A (without a2a-sdk, a 404 naming the extra)
    router.include_router(a2a_router(), dependencies=json_only)
    router.troupe_service = service  # type: ignore[attr-defined]
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, decision_links.RedactLinks) for f in access.filters):
        access.addFilter(decision_links.RedactLinks())
    return router


def create_app(
    runtime: Runtime,
    *,
    keys: KeyRing | Mapping[str, Any] | None = None,
    open_mode: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    hosts: Iterable[str] | None = None,
    identity: HostIdentity | None = None,
    oidc: OidcSettings | None = None,
    min_event_interval_s: float = MIN_INTERVAL_S,
    mcp_limits: MCPLimits | None = None,
) -> FastAPI:
    """The app serving ``runtime``. ``keys``: a ``KeyRing`` or a mapping (see ``troupe.api.keys``);
    ``oidc``: bearer tokens of an identity provider (``troupe.api.tokens``); ``identity``: a FastAPI
    dependency returning the ``Principal`` of a request (``troupe.api.identity``). Without ``open_mode`` a
    request without a valid credential gets 401. A body over ``max_body_bytes`` gets 413 before anything
    else. In open mode only requests whose ``Host`` is a loopback name (or one of ``hosts``) are
    answered. ``/mcp`` serves the agents to MCP clients, behind the same credentials
    (``troupe.api.mcp_http``), each principal holding at most ``mcp_limits`` sessions (``MCPLimits``)."""
    router = troupe_router(
        runtime,
        identity=identity,
        keys=keys,
        oidc=oidc,
        open_mode=open_mode,
        min_event_interval_s=min_event_interval_s,
    )
    service: Service = router.troupe_service  # type: ignore[attr-defined]
    mcp = mcp_endpoint(service, allowed_hosts("127.0.0.1", hosts or ()), mcp_limits)
    app = FastAPI(title="Troupe", version="0.1.0", description=DESCRIPTION, lifespan=_lifespan(service, mcp))
    app.state.troupe = service
    app.include_router(router)
    # Without the MCP SDK, /mcp answers 404 naming the extra.
    served = mcp if mcp is not None else mcp_not_installed(service.gate)
    app.router.routes.append(Route("/mcp", served, methods=["GET", "POST", "DELETE"]))
    for error, handler in _HANDLERS:
        app.add_exception_handler(error, handler)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    if open_mode:
        app.add_middleware(HostCheck, hosts=allowed_hosts("127.0.0.1", hosts or ()))
    return app


def _lifespan(service: Service, mcp: MCPEndpoint | None) -> Callable[[FastAPI], Any]:
    """The MCP endpoint's sessions run while the app does; work a route left running finishes after."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.running() if mcp is not None else nullcontext():
            yield
            await service.drain()

    return lifespan


async def _on_troupe_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TroupeError)
    return error_response(exc)


async def _on_invalid_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return invalid_request(exc)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    return http_error(exc)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    path = decision_links.redact_links(request.url.path)  # a link's path holds its token, a credential
    log.exception("unexpected error on %s %s", request.method, path, exc_info=exc)
    return error_response(TroupeError("internal server error", type=type(exc).__name__), 500)


async def _on_disconnect(request: Request, exc: Exception) -> Response:
    """The client went away before its body arrived: nobody to answer, and nothing went wrong here."""
    log.info("client went away during %s %s", request.method, decision_links.redact_links(request.url.path))
    return Response(status_code=400)


_HANDLERS: tuple[tuple[type[Exception], Any], ...] = (
    (TroupeError, _on_troupe_error),
    (RequestValidationError, _on_invalid_request),
    (StarletteHTTPException, _on_http_error),
    (ClientDisconnect, _on_disconnect),
    (Exception, _on_unexpected),
)


__all__ = ["create_app", "error_response", "troupe_router"]
