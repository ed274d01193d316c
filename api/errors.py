"""Errors of the HTTP front door, and the JSON body every error travels in.

    TroupeError (core.errors)
     ├── AuthenticationError     UNAUTHENTICATED      401  no or unknown API key
     ├── PermissionDeniedError   FORBIDDEN            403  the key may not see that resource
     ├── InvalidRequestError     INVALID_REQUEST      422  the body or query does not validate
     ├── ServerUnreachableError  SERVER_UNREACHABLE       the client cannot connect to the server
     └── ListenError             LISTEN_FAILED            ``troupe serve`` cannot take its port
         (plus HttpError for the framework's own statuses: unknown route 404, wrong method 405)

Every error response is ``{"error": "<message>", "code", "details"}`` with the error's ``http_status``
(Mastra's clients read ``body.error`` as the message; Troupe's statuses stay: 404 for an unknown run, 409
for a conflicting decision);
``error_from_body`` turns such a body back into the matching exception class (the Python client uses it).
This module does not import FastAPI, so the client can use it on its own.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field
from troupe.core.vocabulary.errors import TroupeError, error_from_dict


class AuthenticationError(TroupeError):
    """The server wants a credential and got none, or one it does not know.

    Raised by the Python clients for a 401 answer. Code ``UNAUTHENTICATED``, HTTP 401.
    """

    code = "UNAUTHENTICATED"
    http_status = 401


class PermissionDeniedError(TroupeError):
    """The credential may not reach that resource or run.

    Raised by the Python clients for a 403 answer of the front door itself. Code ``FORBIDDEN``,
    HTTP 403.
    """

    code = "FORBIDDEN"
    http_status = 403


class InvalidRequestError(TroupeError):
    """The request's body or query does not validate.

    Raised by the Python clients for a 422 answer of the front door itself; ``details`` lists the
    problems. Code ``INVALID_REQUEST``, HTTP 422.
    """

    code = "INVALID_REQUEST"
    http_status = 422


class HttpError(TroupeError):
    """A status the web framework answered by itself (no such route, method not allowed).

    Raised by the Python clients for an error answer that is not Troupe's own; ``details`` holds the
    ``status``. Code ``HTTP_ERROR``, HTTP 500 (the answer's own status is in ``details``).
    """

    code = "HTTP_ERROR"


class ServerUnreachableError(TroupeError):
    """The client could not connect to the server (it is down, or not at that URL); nothing was sent.

    Raised by every method of the Python clients. ``details``: ``url``, the server's URL as the client
    was given it (without a password). Code ``SERVER_UNREACHABLE``, HTTP 503.
    """

    code = "SERVER_UNREACHABLE"
    http_status = 503


class ListenError(TroupeError):
    """The front door cannot listen where it was told to (the port is in use, or not its to take).

    Raised by ``troupe serve`` and ``troupe.api.serve.serve`` before anything was started.
    ``details``: ``host``, ``port``. Code ``LISTEN_FAILED``, HTTP 500.
    """

    code = "LISTEN_FAILED"


class ErrorResponse(BaseModel):
    error: str = Field(description="What went wrong, for a person (Mastra's clients show it)")
    code: str = Field(description="Stable error code, e.g. AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED")
    details: dict[str, Any] = Field(default_factory=dict)


# The error statuses a route may answer, for the OpenAPI document.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in (
        (401, "No or unknown API key"),
        (403, "The key may not access that resource or run"),
        (404, "Unknown agent, or no such paused run"),
        (409, "The call is not paused or was already decided, or its run's step is still in flight (retry)"),
        (422, "The body, query or decision is invalid"),
    )
}


def error_body(error: TroupeError) -> bytes:
    """The JSON body of an error response; details that are not JSON are sent as text."""
    body = {"error": error.message, "code": error.code, "details": error.details}
    return json.dumps(body, default=str).encode()


def error_from_body(status: int, body: bytes) -> TroupeError:
    """The exception an error response stands for (a plain TroupeError if the body is not ours)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("error"), str) or "code" not in data:
        text = body.decode(errors="replace").strip()
        return HttpError(f"HTTP {status}: {text or 'no body'}", status=status)
    return error_from_dict({"code": data["code"], "message": data["error"], "details": data.get("details")})


__all__ = [
    "ERRORS",
    "AuthenticationError",
    "ErrorResponse",
    "HttpError",
    "InvalidRequestError",
    "ListenError",
    "PermissionDeniedError",
    "ServerUnreachableError",
    "error_body",
    "error_from_body",
]
