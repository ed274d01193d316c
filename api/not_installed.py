"""The routes of a protocol whose SDK is not installed (``troupe-runtime[a2a]``, ``[mcp]``) answer 404
naming the extra that serves them, rather than a bare "Not Found" that reads as a mistyped URL; like the
routes they stand for, only to a caller with a credential."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from troupe.api.auth import Gate
from troupe.api.errors import AuthenticationError
from troupe.api.routing import error_response, http_error


def not_installed(what: str, sdk: str, extra: str) -> HTTPException:
    """What a route of ``what`` raises when ``sdk`` is missing: a 404 naming ``extra`` (Troupe's error
    body, ``HTTP_ERROR``, through ``troupe.api.routing``)."""
    return HTTPException(
        404, f"{what} is not served here: this server has no {sdk} (pip install 'troupe-runtime[{extra}]')"
    )


def mcp_not_installed(gate: Gate) -> Callable[[Request], Awaitable[Response]]:
    """``/mcp`` on a server without the MCP SDK, behind ``gate`` as the real endpoint is."""

    async def endpoint(request: Request) -> Response:
        try:
            await gate.authenticate(request.headers.get("authorization"))
        except AuthenticationError as exc:
            return error_response(exc)
        return http_error(not_installed("MCP", "MCP SDK", "mcp"))

    return endpoint


__all__ = ["mcp_not_installed", "not_installed"]
