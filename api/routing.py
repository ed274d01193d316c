"""Troupe's routes answer their own errors, so a router mounted in another app (``troupe_router``) keeps
Troupe's error bodies without that app installing any handler.

Every error is JSON ``{"error": "<message>", "code", "details"}`` with the error's ``http_status``: a
caller's mistake is a 4xx (a body that does not validate, or is not JSON, is 422), never a 500.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from troupe.api.errors import AuthenticationError, HttpError, InvalidRequestError, error_body
from troupe.core.vocabulary.errors import TroupeError


def error_response(error: TroupeError, status: int | None = None) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, AuthenticationError) else None
    return Response(
        error_body(error),
        status_code=status or error.http_status,
        media_type="application/json",
        headers=headers,
    )


def invalid_request(exc: RequestValidationError) -> Response:
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


def http_error(exc: StarletteHTTPException) -> Response:
    if exc.status_code == 400:  # FastAPI's own "error parsing the body" (e.g. bytes that are not UTF-8)
        return error_response(InvalidRequestError(f"invalid request: {exc.detail}"))
    response = error_response(HttpError(str(exc.detail), status=exc.status_code), exc.status_code)
    response.headers.update(exc.headers or {})  # a 405's Allow: the methods the path does take
    return response


class TroupeRoute(APIRoute):
    """A route that turns Troupe's errors, invalid bodies and HTTP errors into Troupe's error bodies."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def answered(request: Request) -> Response:
            try:
                return await handle(request)
            except TroupeError as exc:
                return error_response(exc)
            except RequestValidationError as exc:
                return invalid_request(exc)
            except StarletteHTTPException as exc:
                return http_error(exc)

        return answered


__all__ = ["TroupeRoute", "error_response", "http_error", "invalid_request"]
