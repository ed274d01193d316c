"""The routes of a protocol whose SDK is not installed (``troupe-runtime[a2a]``, ``[mcp]``) answer 404
naming the extra that serves them, rather than a bare "Not Found" that reads as a mistyped URL."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from troupe.api.routing import http_error


def not_installed(what: str, sdk: str, extra: str) -> HTTPException:
    """What a route of ``what`` raises when ``sdk`` is missing: a 404 naming ``extra`` (Troupe's error
    body, ``HTTP_ERROR``, through ``troupe.api.routing``)."""
    return HTTPException(
        404, f"{what} is not served here: this server has no {sdk} (pip install 'troupe-runtime[{extra}]')"
    )


async def mcp_not_installed(request: Request) -> Response:
    """``/mcp`` on a server without the MCP SDK."""
    return http_error(not_installed("MCP", "MCP SDK", "mcp"))


__all__ = ["mcp_not_installed", "not_installed"]
