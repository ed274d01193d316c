"""The host app's identity: a FastAPI dependency of the app that serves Troupe's routes, returning
Troupe's ``Principal`` for the request (or None: then Troupe's own keys and tokens are asked).

    async def troupe_user(user: Annotated[User, Depends(current_user)]) -> Principal:
        return Principal(user.id, "https://login.example.com", user.name,
                         resources=frozenset(user.teams), roles=frozenset(user.roles))

    app.include_router(troupe_router(runtime, identity=troupe_user), prefix="/troupe")

The dependency is solved by FastAPI with the app's own dependencies (sessions, cookies, its
middleware's state) once per request, for every route of Troupe's router, so the app's login guards
Troupe's routes as it guards its own: where one of its sub-dependencies refuses (``current_user`` raising
401), that refusal is the answer. Where the dependency itself returns None (or raises a 401/403), the
routes that need a caller ask Troupe's gate next (``Authorization: Bearer`` with an API key or token),
and answer 401 if that has nothing either; a decision link goes on without a caller (its anonymous
holder decides only calls no approver policy governs). A plain async function of the request
(``async def who(request)``) is a dependency too.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, HTTPException, Request
from fastapi.dependencies.utils import get_dependant, solve_dependencies
from starlette.concurrency import run_in_threadpool
from troupe.api.errors import AuthenticationError
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.stream import AgentStream

HostIdentity = Callable[..., Any]


@dataclass(frozen=True)
class Binding:
    """What Troupe's routes find on a request: the service, and the host app's principal if it named one."""

    service: Any  # troupe.api.service.Service (typed there; this module sits below it)
    host: Principal | None = None
    # The host app's dependency solved again for this request (``caller_now``): its principal now.
    host_now: Callable[[Request], Awaitable[Principal | None]] | None = None


def binder(service: Any, identity: HostIdentity | None) -> Callable[..., Any]:
    """The dependency every route of a Troupe router runs first: it binds the router's service to the
    request, with the host app's principal when ``identity`` is given."""
    if identity is None:

        async def bind(request: Request) -> None:
            request.state.troupe = Binding(service)

        return bind
    host = _tolerant(identity)
    again = _solved_again(host)

    # ``host`` is local: a default, not an annotation, so FastAPI sees it without evaluating a string.
    async def bind_host(request: Request, found: Any = Depends(host)) -> None:
        request.state.troupe = Binding(service, found, again)

    return bind_host


def _solved_again(host: Callable[..., Any]) -> Callable[[Request], Awaitable[Principal | None]]:
    """``host`` (the host app's dependency, made tolerant) solved again for a request already answered,
    as FastAPI solved it then: its sub-dependencies (the app's session, from its cookie) are asked anew,
    so a session the app ended since names nobody. What a dependency with ``yield`` opens (a database
    session) is closed as soon as the principal is known, not held for the life of a stream. A
    sub-dependency that refuses (401/403) names nobody; any other failure is raised."""
    dependant = get_dependant(path="", call=host)

    async def again(request: Request) -> Principal | None:
        async with contextlib.AsyncExitStack() as stack:
            # FastAPI keeps what a ``yield`` dependency opens on the request's stacks: these are ours.
            scope = {**request.scope, "fastapi_inner_astack": stack, "fastapi_function_astack": stack}
            try:
                solved = await solve_dependencies(
                    request=Request(scope),
                    dependant=dependant,
                    dependency_overrides_provider=scope.get("app"),
                    async_exit_stack=stack,
                    embed_body_fields=False,
                )
            except HTTPException as exc:
                if exc.status_code in (401, 403):
                    return None
                raise
            if solved.errors:  # what the app's login reads (a cookie, a header) is not there
                return None
            found: Principal | None = await host(**solved.values)
            return found

    return again


def _tolerant(identity: HostIdentity) -> Callable[..., Any]:
    """``identity`` as a dependency that answers None where it refuses the request, so that routes
    which need no caller (the inbox page, a decision link) still work and others can ask the gate."""
    if inspect.isgeneratorfunction(identity) or inspect.isasyncgenfunction(identity):
        raise TypeError("identity must return a Principal (or None), not yield one")
    signature = inspect.signature(identity, eval_str=True)
    params = list(signature.parameters.values())
    if len(params) == 1 and params[0].annotation is inspect.Parameter.empty:
        # ``async def who(request)``: a callable on the request, not yet a dependency.
        params = [params[0].replace(annotation=Request)]
    is_async = inspect.iscoroutinefunction(identity) or inspect.iscoroutinefunction(
        getattr(identity, "__call__", None)  # noqa: B004 - an instance with an async __call__
    )

    async def host(**given: Any) -> Principal | None:
        try:
            found = await identity(**given) if is_async else await run_in_threadpool(identity, **given)
        except HTTPException as exc:
            if exc.status_code in (401, 403):
                return None
            raise
        except AuthenticationError:
            return None
        if found is not None and not isinstance(found, Principal):
            raise TypeError(f"identity returned {type(found).__name__}; it must return a troupe Principal")
        return found

    host.__signature__ = signature.replace(parameters=params, return_annotation=Any)  # type: ignore[attr-defined]
    return host


def binding(request: Request) -> Binding:
    found = getattr(request.state, "troupe", None)
    if not isinstance(found, Binding):
        raise RuntimeError("a Troupe route was reached outside a Troupe router (see troupe_router)")
    return found


async def caller_of(request: Request) -> Principal:
    """The request's principal: the host app's, else Troupe's gate's (401 when there is none)."""
    bound = binding(request)
    if bound.host is not None:
        return bound.host
    principal: Principal = await bound.service.gate.authenticate(request.headers.get("authorization"))
    return principal


async def caller_now(request: Request, caller: Principal) -> Principal:
    """``caller``, as the request's credential stands now: what a response that outlives its start (an
    event stream) asks before each thing it sends. A key removed from the keys file or a token past its
    ``exp`` since raises ``AuthenticationError``, and so does a credential that now stands for someone
    else; otherwise the principal as it is now (its resources and roles may have changed). Under the host
    app's login, its dependency is solved again (the app's own session lookup, each time): a session the
    app ended since (signed out, expired) raises too."""
    bound = binding(request)
    if bound.host is not None and bound.host_now is not None:
        found = await bound.host_now(request)
        if found is None:
            raise AuthenticationError(
                f"the app's login no longer names {caller.display!r} (signed out, or the session ended)"
            )
        now = found
    else:
        now = await caller_of(request)
    if now.id != caller.id:
        raise AuthenticationError(
            f"the credential this stream was opened with no longer stands for {caller.display!r}"
        )
    return now


def held(stream: AgentStream, request: Request, caller: Principal) -> AgentStream:
    """``stream``, read for ``caller`` only while the request's credential still stands for it: every
    surface that sends a run's chunks to a caller reads them through this. A key revoked or a token expired
    while the run goes on (a slow tool, many steps) makes the stream's readers raise
    ``AuthenticationError`` before the next chunks, which each surface ends its response with, as its
    protocol says a failure. Checked once per batch of chunks from the run (``caller_now``: the keys file
    is read again only when it changed, the issuer's keys are kept), never once per byte sent."""

    async def still_held() -> None:
        await caller_now(request, caller)

    return stream.checked_by(still_held)


async def optional_caller(request: Request) -> Principal | None:
    """The request's principal if it names one (a bad credential is still a 401), else None."""
    bound = binding(request)
    if bound.host is not None:
        return bound.host
    if not request.headers.get("authorization"):
        return None
    return await caller_of(request)


__all__ = [
    "Binding",
    "HostIdentity",
    "binder",
    "binding",
    "caller_now",
    "caller_of",
    "held",
    "optional_caller",
]
