"""The Python ``mcp`` SDK's client against Troupe's ``/mcp``: connect with a key, answer elicitations
with a scripted person."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

Answer = Callable[[str, dict[str, Any]], types.ElicitResult]


@contextlib.asynccontextmanager
async def _transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=None)) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


@contextlib.asynccontextmanager
async def mcp_client(
    base_url: str,
    key: str | None,
    person: Answer | None,
    asked: list[tuple[str, dict[str, Any]]] | None = None,
) -> AsyncIterator[Client]:
    """A client of ``base_url``/mcp; ``person`` answers elicitations (None: the client cannot be asked)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def elicit(context: Any, params: Any) -> Any:
        assert person is not None
        schema = params.requested_schema
        if asked is not None:
            asked.append((params.message, schema))
        return person(params.message, schema)

    async with Client(
        _transport(base_url + "/mcp", headers), elicitation_callback=elicit if person else None, cache=None
    ) as client:
        yield client


def accept(content: dict[str, Any]) -> Answer:
    return lambda message, schema: types.ElicitResult(action="accept", content=content)


def action(name: str) -> Answer:
    return lambda message, schema: types.ElicitResult(action=name)  # type: ignore[arg-type]
