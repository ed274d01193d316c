"""OpenAIModel: chat completions over the official ``openai`` client, streamed.

Works with OpenAI and any OpenAI-compatible server. ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` are read
when the model is created (in the caller's process), so an agent shipped to a Ray actor carries them
and does not depend on the worker's environment.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from troupe.core.vocabulary.errors import ModelError
from troupe.core.vocabulary.model import (
    Model,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallPart,
    TurnEnd,
    Usage,
)

_FINISH = {"tool_calls": "tool-calls", "function_call": "tool-calls", "content_filter": "content-filter"}


class OpenAIModel(Model):
    """A model served by OpenAI or any OpenAI-compatible server, streamed (``model="openai/<name>"``).

    Args:
        model: The model's name on the server (``"gpt-4o-mini"``, say).
        base_url: The server's URL (default: ``OPENAI_BASE_URL``, else OpenAI's).
        api_key: The API key (default: ``OPENAI_API_KEY``); read in the caller's process, so an agent
            shipped to a Ray actor carries it.
        temperature: The sampling temperature (default: the server's).

    Example:
        >>> agent = Agent("helper", model=OpenAIModel("gpt-4o-mini", temperature=0))
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
    ) -> None:
        self.model = model
        self.id = f"openai/{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.temperature = temperature
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None  # an HTTP client is per process
        state["_client_loop"] = None
        return state

    def _client_for_process(self) -> Any:
        # Its pooled connections belong to the event loop that opened them: a script calling
        # asyncio.run() once per step needs a fresh client in each new loop.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from openai import AsyncOpenAI

            if not self.api_key:
                raise ModelError(f"{self.id}: no API key (set OPENAI_API_KEY or pass api_key=)")
            self._client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key)
            self._client_loop = loop
        return self._client

    async def _create(self, params: dict[str, Any]) -> Any:
        from openai import APIConnectionError

        client = self._client_for_process()
        try:
            return await client.chat.completions.create(**params)
        except APIConnectionError as exc:
            # The operator needs to know which server: a wrong OPENAI_BASE_URL is the usual cause.
            where = str(client.base_url).rstrip("/")
            raise ModelError(f"{self.id}: cannot reach the model server at {where}: {exc}") from exc

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one assistant turn from the server's chat completions.

        Args:
            request: The conversation and the tools' specs.

        Raises:
            ModelError: No API key, the server cannot be reached or fails, or its stream ends before the
                turn does (no ``finish_reason``).
        """
        stream = await self._create(self._params(request))
        calls = _Calls()
        finish: str | None = None
        usage = Usage()
        async for chunk in stream:
            if chunk.usage is not None:
                usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            for choice in chunk.choices:
                delta = choice.delta
                if delta is not None and delta.content:
                    yield TextDelta(delta.content)
                for piece in (delta.tool_calls if delta is not None else None) or []:
                    calls.add(piece)
                if choice.finish_reason:
                    finish = choice.finish_reason
        if finish is None:
            # A stream delimited by the connection's close ends cleanly when the server or a proxy drops
            # it half way: the text is cut short, and a call whose arguments never came would run with
            # none. Only a finish_reason says the turn is complete.
            raise ModelError(
                f"{self.id}: the model server's stream ended before the turn did (no finish_reason); "
                "the turn is incomplete and nothing it asked for was run"
            )
        for n, slot in enumerate(calls.slots):
            yield ToolCallPart(
                id=slot["id"] or f"call-{n}", name=slot["name"], args=_decode_args(slot["arguments"])
            )
        yield TurnEnd(_FINISH.get(finish, finish), usage)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = request.tools
        if request.response_schema is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.response_schema},
            }
        if self.temperature is not None:
            params["temperature"] = self.temperature
        return params


class _Calls:
    """The turn's tool calls, put together from their streamed pieces (an id, parts of a name or of the
    arguments), in the order they began."""

    def __init__(self) -> None:
        self.slots: list[dict[str, str]] = []
        self._at: dict[int, dict[str, str]] = {}  # the call each stream index is building now

    def add(self, piece: Any) -> None:
        slot = self._at.get(piece.index)
        # A new id at an index already in use is a new call (some servers send every call at index 0):
        # merged into the earlier one, two calls would run as one with both names and arguments run together.
        if slot is None or (piece.id and slot["id"] and piece.id != slot["id"]):
            slot = self._at[piece.index] = {"id": "", "name": "", "arguments": ""}
            self.slots.append(slot)
        if piece.id:
            slot["id"] = piece.id
        if piece.function is not None:
            slot["name"] += piece.function.name or ""
            slot["arguments"] += piece.function.arguments or ""


def _decode_args(raw: str) -> dict[str, Any] | str:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        # Not JSON, or JSON that Python will not hold (an integer of thousands of digits, nesting past
        # the recursion limit): the raw text goes on, and is refused at the boundary with a tool error
        # to the model (troupe.core.vocabulary.storable), never a failed run.
        return raw
    return value if isinstance(value, dict) else raw


__all__ = ["OpenAIModel"]
