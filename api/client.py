"""The Python client of a Troupe server: the agent methods of the Python API, over HTTP.

    async with AsyncTroupeClient("http://127.0.0.1:8000", api_key="k-acme") as client:
        agent = client.get_agent("records-assistant")
        stream = await agent.stream("Delete abc-123", resource_id="acme")
        async for chunk in stream.full_stream:          # troupe.Chunk, snake_case payloads
            ...
        approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
        print((await approved.result()).text)

Streams come back as ``AgentStream`` (``run_id``, ``full_stream``, ``text_stream``, ``result()``), exactly
as in-process; results as ``RunResult``; listings as ``SuspendedRunList``. An HTTP error is raised as the
matching ``troupe.errors`` class (401/403/422 of the front door itself: ``AuthenticationError``,
``PermissionDeniedError``, ``InvalidRequestError``); a server that does not take the connection as
``ServerUnreachableError``, naming its URL. Over HTTP, ``approve``/``decline`` need the
``tool_call_id``; ``require_tool_approval`` is a bool (a function is sent as ``True``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import Any, Unpack
from urllib.parse import quote, unquote

import httpx
from troupe.api.cancelled import cancelled_run_from_json
from troupe.api.errors import HttpError, ServerUnreachableError, error_from_body
from troupe.api.wire import RUN_ID_HEADER, run_result_from_json, suspended_runs_from_json
from troupe.core.vocabulary.agent_api import Messages
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.options import StreamOptions, SuspendedRunFilters
from troupe.core.vocabulary.requests import CancelledRun
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList

DEFAULT_URL = "http://127.0.0.1:8000"
SSE = "text/event-stream"


class AsyncTroupeClient:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 300.0,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        api_prefix: str = "/api",
    ) -> None:
        sent = dict(headers or {})
        if api_key is not None:
            sent["Authorization"] = f"Bearer {api_key}"
        if not isinstance(timeout, httpx.Timeout):
            timeout = httpx.Timeout(
                timeout, connect=min(timeout, 10.0)
            )  # streams may wait long; connects not
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._headers = sent
        self._prefix = "/" + api_prefix.strip("/") if api_prefix.strip("/") else ""

    async def __aenter__(self) -> AsyncTroupeClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    def get_agent(self, agent_id: str) -> AsyncAgentClient:
        return AsyncAgentClient(self, agent_id)

    async def list_agents(self) -> dict[str, dict[str, Any]]:
        """Every agent the server runs, keyed by id (Mastra's serialized agents)."""
        found: dict[str, dict[str, Any]] = await self.request("GET", "/agents")
        return found

    async def list_inbox(
        self,
        *,
        resource_id: str | None = None,
        role: str | None = None,
        page: int | None = None,
        per_page: int | None = None,
        cursor: str | None = None,
    ) -> SuspendedRunList:
        """One page of the pauses the key may decide, across all agents, oldest first (``GET
        /api/inbox``): a subagent's pause once, under its top-level run. ``next_cursor`` asks for the
        page after it (as ``cursor=``)."""
        params = _body(resourceId=resource_id, role=role, page=page, perPage=per_page, cursor=cursor)
        return suspended_runs_from_json(await self.request("GET", "/inbox", params=params))

    # ---- transport ----------------------------------------------------------------------------------

    async def request(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        with self._connecting():
            response = await self._http.request(
                method, self._prefix + path, json=body, params=params, headers=self._headers
            )
        if response.is_error:
            raise error_from_body(response.status_code, response.content)
        return response.json()

    @contextlib.contextmanager
    def _connecting(self) -> Iterator[None]:
        """A connection the server did not take is ``ServerUnreachableError``, naming the server's URL
        (as the ``troupe`` command does), rather than httpx's bare ``ConnectError``."""
        try:
            yield
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _unreachable(self._http.base_url, exc) from exc

    async def open_stream(self, path: str, body: dict[str, Any]) -> AgentStream:
        """POST ``body``; once the server accepted the operation, follow its chunks."""
        request = self._http.build_request(
            "POST", self._prefix + path, json=body, headers={**self._headers, "Accept": SSE}
        )
        with self._connecting():
            response = await self._http.send(request, stream=True)
        if response.is_error:
            content = await response.aread()
            await response.aclose()
            raise error_from_body(response.status_code, content)
        run_id = unquote(response.headers.get(RUN_ID_HEADER, ""))
        return await AgentStream.open(_chunk_batches(response), run_id)


def _unreachable(url: httpx.URL, exc: Exception) -> ServerUnreachableError:
    """The error for a server that did not take the connection: its URL (a password in it masked),
    why, and what to check."""
    if url.password:
        url = url.copy_with(username=url.username, password="***")
    shown = str(url).rstrip("/")
    reason = str(exc) or type(exc).__name__
    return ServerUnreachableError(
        f"cannot reach the server at {shown}: {reason} (is it running, and at that URL?)", url=shown
    )


async def _chunk_batches(response: httpx.Response) -> AsyncIterator[list[Chunk]]:
    """The chunks of a server-sent-events response, one frame at a time, until ``data: [DONE]``."""
    try:
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
                continue
            if line or not data:
                continue  # comments and other fields, or a blank line between frames
            text, data = "\n".join(data), []
            if text == "[DONE]":
                return
            yield [Chunk.from_wire(json.loads(text))]
        raise HttpError("the server closed the stream before [DONE]", status=response.status_code)
    finally:
        await response.aclose()


class AsyncAgentClient:
    """One agent of the server, with the run methods of ``troupe.Agent``."""

    def __init__(self, client: AsyncTroupeClient, agent_id: str) -> None:
        self.client = client
        self.id = agent_id
        self._base = f"/agents/{quote(agent_id, safe='')}"

    def __repr__(self) -> str:
        return f"AsyncAgentClient({self.id!r})"

    async def details(self) -> dict[str, Any]:
        found: dict[str, Any] = await self.client.request("GET", self._base)
        return found

    # ---- running ------------------------------------------------------------------------------------

    async def stream(self, messages: Messages, **options: Unpack[StreamOptions]) -> AgentStream:
        """Start a run and stream it. Options as ``Agent.stream`` (``require_tool_approval`` as a bool:
        a function cannot cross HTTP)."""
        return await self.client.open_stream(f"{self._base}/stream", run_body(messages, options))

    async def generate(self, messages: Messages, **options: Unpack[StreamOptions]) -> RunResult:
        return await self._result("generate", run_body(messages, options))

    # ---- deciding -----------------------------------------------------------------------------------

    async def approve_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
    ) -> AgentStream:
        body = _body(runId=run_id, toolCallId=tool_call_id, editedArgs=edited_args, fingerprint=fingerprint)
        return await self.client.open_stream(f"{self._base}/approve-tool-call", body)

    async def decline_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        fingerprint: str | None = None,
    ) -> AgentStream:
        body = _body(runId=run_id, toolCallId=tool_call_id, reason=reason, fingerprint=fingerprint)
        return await self.client.open_stream(f"{self._base}/decline-tool-call", body)

    async def approve_tool_call_generate(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        edited_args: dict[str, Any] | None = None,
        fingerprint: str | None = None,
    ) -> RunResult:
        body = _body(runId=run_id, toolCallId=tool_call_id, editedArgs=edited_args, fingerprint=fingerprint)
        return await self._result("approve-tool-call-generate", body)

    async def decline_tool_call_generate(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        fingerprint: str | None = None,
    ) -> RunResult:
        body = _body(runId=run_id, toolCallId=tool_call_id, reason=reason, fingerprint=fingerprint)
        return await self._result("decline-tool-call-generate", body)

    async def resume_stream(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> AgentStream:
        body = {
            "resumeData": resume_data,
            **_body(runId=run_id, toolCallId=tool_call_id, fingerprint=fingerprint),
        }
        return await self.client.open_stream(f"{self._base}/resume-stream", body)

    async def resume_generate(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> RunResult:
        body = {
            "resumeData": resume_data,
            **_body(runId=run_id, toolCallId=tool_call_id, fingerprint=fingerprint),
        }
        return await self._result("resume-generate", body)

    # ---- cancelling ---------------------------------------------------------------------------------

    async def cancel_run(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        tool_call_id: str | None = None,
        fingerprint: str | None = None,
    ) -> CancelledRun:
        """Cancel a run (``POST .../cancel-run``), as ``Agent.cancel_run``: answered once the cancel is
        durable; the canceller is the key's principal."""
        body = _body(runId=run_id, reason=reason, toolCallId=tool_call_id, fingerprint=fingerprint)
        return cancelled_run_from_json(
            await self.client.request("POST", f"{self._base}/cancel-run", body=body)
        )

    async def run_status(self, run_id: str) -> dict[str, Any]:
        """Where a run stands (``GET .../runs/{runId}``): ``status`` is ``running``, ``suspended``,
        ``finished`` or ``cancelled`` (then ``cancelled`` says by whom, why and when)."""
        found: dict[str, Any] = await self.client.request(
            "GET", f"{self._base}/runs/{quote(run_id, safe='')}"
        )
        return found

    # ---- finding paused runs ------------------------------------------------------------------------

    async def list_suspended_runs(self, **filters: Unpack[SuspendedRunFilters]) -> SuspendedRunList:
        unknown = sorted(set(filters) - SuspendedRunFilters.__optional_keys__)
        if unknown:
            raise TypeError(f"list_suspended_runs() got unexpected keyword argument(s): {', '.join(unknown)}")
        from_date, to_date = filters.get("from_date"), filters.get("to_date")
        params = _body(
            threadId=filters.get("thread_id"),
            resourceId=filters.get("resource_id"),
            fromDate=from_date.isoformat() if from_date else None,
            toDate=to_date.isoformat() if to_date else None,
            page=filters.get("page"),
            perPage=filters.get("per_page"),
            cursor=filters.get("cursor"),
        )
        data = await self.client.request("GET", f"{self._base}/suspended-runs", params=params)
        return suspended_runs_from_json(data)

    async def send_tool_approval(
        self,
        *,
        thread_id: str,
        resource_id: str | None,
        approved: bool,
        tool_call_id: str | None = None,
        reason: str | None = None,
        resume_data: Any = None,
    ) -> AgentStream:
        """Decide the paused call of the run suspended on a thread, and follow the run."""
        body = _body(
            threadId=thread_id,
            resourceId=resource_id,
            approved=approved,
            toolCallId=tool_call_id,
            reason=reason,
            resumeData=resume_data,
        )
        return await self.client.open_stream(f"{self._base}/send-tool-approval", body)

    async def _result(self, route: str, body: dict[str, Any]) -> RunResult:
        data = await self.client.request("POST", f"{self._base}/{route}", body=body)
        return run_result_from_json(data).raise_for_error()


_RUN_OPTIONS = {
    "require_tool_approval": "requireToolApproval",
    "auto_resume_suspended_tools": "autoResumeSuspendedTools",
    "thread_id": "threadId",
    "resource_id": "resourceId",
    "request_context": "requestContext",
    "max_steps": "maxSteps",
    "run_id": "runId",
    "approval_timeout": "approvalTimeout",
    "max_duration_s": "maxDurationS",
    "duration_counts_waiting": "durationCountsWaiting",
}


def run_body(messages: Messages, options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(_RUN_OPTIONS))
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(unknown)}; known: {', '.join(_RUN_OPTIONS)}")
    given = dict(options)
    if callable(given.get("require_tool_approval")):
        given["require_tool_approval"] = True  # a policy function cannot travel: approval is required
    return {"messages": messages, **_body(**{_RUN_OPTIONS[k]: v for k, v in given.items()})}


def _body(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


__all__ = ["AsyncAgentClient", "AsyncTroupeClient", "run_body"]
