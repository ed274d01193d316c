"""A local OpenAI-compatible chat-completions server for tests, served over real HTTP by uvicorn.

    server = FakeOpenAI([reply(calls=[call("delete_record", {"id": "abc-123"}, id="call_1")]),
                         reply("Deleted.")])
    with serving(server) as base_url:          # "http://127.0.0.1:<port>/v1", also server.base_url
        model = OpenAIModel("gpt-test", base_url=base_url, api_key="sk-test")
        ...
    server.requests[1]["messages"]              # every request body, in order

``POST /v1/chat/completions`` with ``stream: true`` plays the next scripted reply as server-sent events
shaped like OpenAI's ``chat.completion.chunk`` stream: a role chunk, the text split into several content
deltas, each tool call's header (index, id, type, name) followed by its arguments split into fragments
that are interleaved across calls (so a client has to accumulate by ``index``), a finish chunk, a usage
chunk (``choices: []``) when ``stream_options.include_usage`` is set, then ``data: [DONE]``.
Anything the fake cannot answer (a non-streaming request, a script played out) gets an OpenAI-style
400 error, which the ``openai`` client raises at once instead of retrying.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass(frozen=True)
class ScriptedCall:
    id: str
    name: str
    # A dict is sent as its JSON text; a string is sent as it is (for malformed arguments).
    arguments: dict[str, Any] | str


@dataclass(frozen=True)
class Reply:
    text: str = ""
    calls: Sequence[ScriptedCall] = ()
    prompt_tokens: int = 10
    completion_tokens: int = 5
    # OpenAI's value; None means "tool_calls" when the reply has calls, else "stop".
    finish_reason: str | None = None
    # The stream ends cleanly after this many chunks (no finish chunk, no usage, no [DONE]): what a
    # client reads from a connection-delimited response that the server or a proxy dropped half way.
    cut_after: int | None = None
    # Every call at stream index 0, one after the other (as some servers send them), not interleaved.
    one_index: bool = False


def call(name: str, arguments: dict[str, Any] | str, *, id: str) -> ScriptedCall:
    """A tool call the server will stream."""
    return ScriptedCall(id=id, name=name, arguments=arguments)


def reply(
    text: str = "",
    *,
    calls: Sequence[ScriptedCall] = (),
    usage: tuple[int, int] = (10, 5),
    finish_reason: str | None = None,
    cut_after: int | None = None,
    one_index: bool = False,
) -> Reply:
    """One scripted assistant turn: text and/or tool calls; ``usage`` is (prompt, completion) tokens;
    ``cut_after`` ends the stream early, after that many chunks; ``one_index`` sends every call at
    index 0."""
    return Reply(
        text=text,
        calls=tuple(calls),
        prompt_tokens=usage[0],
        completion_tokens=usage[1],
        finish_reason=finish_reason,
        cut_after=cut_after,
        one_index=one_index,
    )


def split(value: str, pieces: int) -> list[str]:
    """``value`` cut into at most ``pieces`` non-empty consecutive fragments (mid-word, mid-JSON)."""
    if not value:
        return []
    size = -(-len(value) // pieces)
    return [value[i : i + size] for i in range(0, len(value), size)]


@dataclass
class FakeOpenAI:
    """The scripted server. ``requests`` and ``headers`` record what every request carried."""

    script: list[Reply] = field(default_factory=list)
    pieces: int = 3
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    played: int = 0
    # Set by ``serving`` while the server runs: "http://127.0.0.1:<port>/v1".
    base_url: str = ""

    def __post_init__(self) -> None:
        self.script = list(self.script)
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._completions, methods=["POST"])])

    def play(self, *replies: Reply) -> None:
        """Queue more replies, answered in order, one per request."""
        self.script.extend(replies)

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if body.get("stream") is not True:
            return _error("this fake server only answers stream=true requests")
        if self.played >= len(self.script):
            return _error(
                f"fake server script exhausted: request {len(self.requests)} but "
                f"{len(self.script)} scripted replies"
            )
        scripted = self.script[self.played]
        self.played += 1
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = self.chunks(scripted, model=body.get("model", ""), include_usage=include_usage)
        if scripted.cut_after is not None:
            return StreamingResponse(
                _sse(chunks[: scripted.cut_after], done=False), media_type="text/event-stream"
            )
        return StreamingResponse(_sse(chunks), media_type="text/event-stream")

    def chunks(self, scripted: Reply, *, model: str, include_usage: bool) -> list[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects streamed for one reply, in order."""
        base = {
            "id": f"chatcmpl-fake-{self.played}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        if include_usage:
            base["usage"] = None

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": piece}) for piece in split(scripted.text, self.pieces)]
        fragments = []
        for position, scripted_call in enumerate(scripted.calls):
            index = 0 if scripted.one_index else position
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": scripted_call.id,
                                "type": "function",
                                "function": {"name": scripted_call.name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            arguments = scripted_call.arguments
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            pieces = [(index, piece) for piece in split(raw, self.pieces)]
            if scripted.one_index:  # at one index, a call's arguments must come before the next call
                out += [
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for _, p in pieces
                ]
            else:
                fragments.append(pieces)
        # Round-robin: fragment 1 of every call, then fragment 2 of every call, ...
        for round_ in zip(*_padded(fragments), strict=True):
            for index, piece in filter(None, round_):
                out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        finish = scripted.finish_reason or ("tool_calls" if scripted.calls else "stop")
        out.append(chunk({}, finish))
        if include_usage:
            out.append(
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": scripted.prompt_tokens,
                        "completion_tokens": scripted.completion_tokens,
                        "total_tokens": scripted.prompt_tokens + scripted.completion_tokens,
                    },
                }
            )
        return out


def _padded(lists: list[list[Any]]) -> list[list[Any]]:
    longest = max((len(items) for items in lists), default=0)
    return [items + [None] * (longest - len(items)) for items in lists]


async def _sse(chunks: list[dict[str, Any]], *, done: bool = True) -> AsyncIterator[str]:
    for item in chunks:
        yield f"data: {json.dumps(item)}\n\n"
    if done:
        yield "data: [DONE]\n\n"


def _error(message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}},
        status_code=400,
    )


@contextmanager
def serving(server: FakeOpenAI, *, startup_timeout: float = 10.0) -> Iterator[str]:
    """Run ``server`` under uvicorn on 127.0.0.1 (a free port) in a background thread; yield its base URL."""
    config = uvicorn.Config(
        server.app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=2,
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, name="fake-openai", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not uv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            uv.should_exit = True
            raise RuntimeError("the fake OpenAI server did not start")
        time.sleep(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    server.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server.base_url
    finally:
        uv.should_exit = True
        thread.join(timeout=10)


__all__ = ["FakeOpenAI", "Reply", "ScriptedCall", "call", "reply", "serving", "split"]
