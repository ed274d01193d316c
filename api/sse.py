"""Server-sent events: a run's chunks as ``data: {"type", "runId", "from", "payload"}`` frames (the
shape of ``Chunk.to_wire``, Mastra's), ending with ``data: [DONE]``.

The operation was accepted before the response starts, so a caller's mistake (unknown run, call not
paused, conflicting decision) is an HTTP error status, never a 200 stream. Once the stream has started, a
failure is sent as an ``error`` chunk, then ``[DONE]``; so is the end of the caller's credential (a key
revoked, a token expired) while the run goes on, before anything more of the run is sent. A client that
goes away does not stop the run: it carries on (or stays paused) in its host, durable in the store.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import StreamingResponse
from troupe.api.identity import held
from troupe.api.wire import RUN_ID_HEADER
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import RunFailedError, TroupeError
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.stream import AgentStream

MEDIA_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def frame(chunk: Chunk) -> bytes:
    return b"data: " + json.dumps(chunk.to_wire(), separators=(",", ":"), default=str).encode() + b"\n\n"


async def frames(stream: AgentStream) -> AsyncIterator[bytes]:
    try:
        async for chunk in stream.full_stream:
            yield frame(chunk)
    except Exception as exc:  # the link to the run broke after the response started: tell the reader
        error = exc if isinstance(exc, TroupeError) else RunFailedError(f"stream interrupted: {exc!r}")
        yield frame(Chunk("error", stream.run_id, {"error": error.to_dict()}))
    yield DONE


def sse_response(stream: AgentStream, request: Request, caller: Principal) -> StreamingResponse:
    """``stream`` for ``caller``, while the request's credential holds (``troupe.api.identity.held``): a
    key revoked or a token expired meanwhile ends it with an ``UNAUTHENTICATED`` error chunk."""
    return StreamingResponse(
        frames(held(stream, request, caller)),
        media_type=MEDIA_TYPE,
        headers={
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            RUN_ID_HEADER: quote(stream.run_id, safe=""),
        },
    )


__all__ = ["DONE", "MEDIA_TYPE", "frame", "frames", "sse_response"]
