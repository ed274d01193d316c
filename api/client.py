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
``ServerUnreachableError``, naming its URL. The run methods are ``troupe.Agent``'s (both inherit them
from ``troupe.core.vocabulary.run_methods``); over HTTP who acts is the key's principal, and
``require_tool_approval`` is a bool (a function is sent as ``True``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote, unquote

import httpx
from troupe.api.cancelled import cancelled_run_from_json
from troupe.api.errors import HttpError, ServerUnreachableError, error_from_body
from troupe.api.wire import RUN_ID_HEADER, run_result_from_json, suspended_runs_from_json
from troupe.core.vocabulary.agent_api import Messages
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.options import StreamOptions, SuspendedRunFilters
from troupe.core.vocabulary.requests import Approve, CancelledRun, Decline, Resume
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.run_methods import CancelCall, Decision, RunMethods
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRunList

DEFAULT_URL = "http://127.0.0.1:8000"
SSE = "text/event-stream"


class AsyncTroupeClient:
    """A connection to a Troupe server (``troupe serve``, ``create_app``), for async code.

    Use it as an async context manager (or call ``aclose``), and reach an agent with ``get_agent``.

    Args:
        base_url: The server's URL (default ``http://127.0.0.1:8000``).
        api_key: The API key or bearer token sent as ``Authorization: Bearer ...`` (none in open mode).
        timeout: Seconds to wait for a response (default 300: a stream may wait long for its run);
            connecting waits at most 10 s. Or an ``httpx.Timeout``.
        headers: More headers to send with every request.
        http: An ``httpx.AsyncClient`` to send requests with (an app's own, or one with a test
            transport); the caller closes it. Default: one of this client's own.
        api_prefix: Where the server mounts its API (default ``/api``; a host app may mount it
            elsewhere).

    Example:
        >>> async with AsyncTroupeClient("http://127.0.0.1:8000", api_key="k-acme") as client:
        ...     agent = client.get_agent("records-assistant")
        ...     paused = await agent.generate("Delete abc-123", resource_id="acme")
    """

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
        """Close the client's connections (not those of an ``http`` client it was given)."""
        if self._own_http:
            await self._http.aclose()

    def get_agent(self, agent_id: str) -> AsyncAgentClient:
        """One agent of the server, with the run methods of ``troupe.Agent``.

        Nothing is sent: an unknown agent shows at its first call (``AgentNotFoundError``).

        Args:
            agent_id: The agent's id.

        Returns:
            The agent's ``AsyncAgentClient``.
        """
        return AsyncAgentClient(self, agent_id)

    async def list_agents(self) -> dict[str, dict[str, Any]]:
        """Every agent the server runs, keyed by id (``GET /api/agents``).

        Returns:
            Each agent as Mastra serializes it (``name``, ``instructions``, ``tools``, ...), by id.

        Raises:
            AuthenticationError: The server wants a key and got none, or a wrong one.
            ServerUnreachableError: The server did not take the connection.
        """
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
        """One page of the pauses the caller may decide, across all agents, oldest first.

        This is what the inbox page lists (``GET /api/inbox``): a subagent's pause once, under its
        top-level run.

        Args:
            resource_id: Only runs of this resource (among the caller's).
            role: Only pauses whose approver policy names this role.
            page: The page, counted from 0 (with ``per_page``).
            per_page: Runs per page (default 100, at most 1,000).
            cursor: The ``next_cursor`` of the page before: the page after it.

        Returns:
            A ``SuspendedRunList`` (``runs``, ``total``, ``next_cursor``).

        Raises:
            InvalidPaginationError: A page, size or cursor out of range or malformed.
            ServerUnreachableError: The server did not take the connection.
        """
        params = _body(resourceId=resource_id, role=role, page=page, perPage=per_page, cursor=cursor)
        return await self.list_runs("/inbox", params)

    async def list_runs(self, path: str, params: dict[str, Any]) -> SuspendedRunList:
        """A listing of suspended runs at ``path``, checked before it is read: a login page, a proxy or
        another service answering 200 at the server's URL must not read as "nothing is waiting".

        Args:
            path: The listing's route below the API prefix (``/inbox``, an agent's ``suspended-runs``).
            params: Its query parameters.

        Returns:
            The page as a ``SuspendedRunList``.

        Raises:
            HttpError: The answer is not a listing of runs (the URL is not a Troupe server's).
            TroupeError: An error answer, as the ``troupe.errors`` class its ``code`` names.
            ServerUnreachableError: The server did not take the connection.
        """
        data = await self.request("GET", path, params=params)
        runs = data.get("runs") if isinstance(data, dict) else None
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise self._not_troupe("GET", path, "no list of runs")
        return suspended_runs_from_json(data)

    # ---- transport ----------------------------------------------------------------------------------

    async def request(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        """Send one request to the API and return its JSON answer (for routes without a method here).

        Args:
            method: The HTTP method.
            path: The route below the API prefix (``/agents``, ``/inbox``, ...).
            body: A JSON body.
            params: Query parameters.

        Returns:
            The decoded JSON answer.

        Raises:
            TroupeError: An error answer, as the ``troupe.errors`` class its ``code`` names.
            ServerUnreachableError: The server did not take the connection.
        """
        with self._connecting():
            response = await self._http.request(
                method, self._prefix + path, json=body, params=params, headers=self._headers
            )
        if response.is_error:
            raise error_from_body(response.status_code, response.content)
        try:
            return response.json()
        except ValueError as exc:  # a login page, a proxy's: not a Troupe server's answer
            kind = response.headers.get("content-type", "no content type")[:80]
            raise self._not_troupe(method, path, f"{response.status_code}, {kind}, not JSON") from exc

    def _not_troupe(self, method: str, path: str, answer: str) -> HttpError:
        """The error for a 2xx answer a Troupe server would not give: the URL is not one's (or not its
        API's)."""
        return HttpError(
            f"the server at {_shown(self._http.base_url)} did not answer {method} {self._prefix}{path} as a "
            f"Troupe server does ({answer}): is this the URL of a Troupe server (troupe serve, or an app "
            "that mounts it)?",
            status=200,
        )

    @contextlib.contextmanager
    def _connecting(self) -> Iterator[None]:
        """A connection the server did not take is ``ServerUnreachableError``, naming the server's URL
        (as the ``troupe`` command does), rather than httpx's bare ``ConnectError``."""
        try:
            yield
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _unreachable(self._http.base_url, exc) from exc

    async def open_stream(self, path: str, body: dict[str, Any]) -> AgentStream:
        """POST ``body`` to a streaming route and follow the operation's chunks once it is accepted.

        Args:
            path: The route below the API prefix.
            body: The JSON body.

        Returns:
            The operation's ``AgentStream``.

        Raises:
            TroupeError: The server refused the operation (as the class its ``code`` names).
            ServerUnreachableError: The server did not take the connection.
        """
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
    shown = _shown(url)
    reason = str(exc) or type(exc).__name__
    return ServerUnreachableError(
        f"cannot reach the server at {shown}: {reason} (is it running, and at that URL?)", url=shown
    )


def _shown(url: httpx.URL) -> str:
    """A server's URL as an error names it: a password in it masked."""
    if url.password:
        url = url.copy_with(username=url.username, password="***")
    return str(url).rstrip("/")


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


class AsyncAgentClient(RunMethods):
    """One agent of a Troupe server, with the run methods of ``troupe.Agent``, over HTTP.

    Made by ``AsyncTroupeClient.get_agent``. The methods, options and results are the in-process
    Agent's, with these differences: who acts (``decided_by``, ``started_by``, ``cancelled_by``,
    ``roles``, ``surface``) is the principal of the client's key or token, so passing it raises
    ``TypeError``; ``require_tool_approval`` travels as a bool (a function is sent as True). Every
    method also raises ``ServerUnreachableError`` when the server does not take the connection, and
    ``AuthenticationError``/``PermissionDeniedError`` when the credential is missing or not enough.

    Args:
        client: The connection to the server.
        agent_id: The agent's id.
    """

    def __init__(self, client: AsyncTroupeClient, agent_id: str) -> None:
        self.client = client
        self.id = agent_id
        self._base = f"/agents/{quote(agent_id, safe='')}"

    def __repr__(self) -> str:
        return f"AsyncAgentClient({self.id!r})"

    async def details(self) -> dict[str, Any]:
        """The agent as the server describes it (``GET /api/agents/{agentId}``).

        Returns:
            Mastra's serialized agent: ``name``, ``instructions``, ``tools``, ...

        Raises:
            AgentNotFoundError: The server has no such agent.
            ServerUnreachableError: The server did not take the connection.
        """
        found: dict[str, Any] = await self.client.request("GET", self._base)
        return found

    # ---- how the run methods (troupe.core.vocabulary.run_methods) travel over HTTP -------------------

    async def _start(self, messages: Messages, options: StreamOptions) -> AgentStream:
        return await self.client.open_stream(f"{self._base}/stream", run_body(messages, options))

    async def _start_to_result(self, messages: Messages, options: StreamOptions) -> RunResult:
        return await self._result("generate", run_body(messages, options))

    async def _decide(self, run_id: str, decision: Decision) -> AgentStream:
        routes, body = _decision_body(run_id, decision)
        return await self.client.open_stream(f"{self._base}/{routes[0]}", body)

    async def _decide_to_result(self, run_id: str, decision: Decision) -> RunResult:
        routes, body = _decision_body(run_id, decision)
        return await self._result(routes[1], body)

    async def _decide_on_thread(
        self, thread_id: str, resource_id: str | None, decision: Decision
    ) -> AgentStream:
        _only_in_process(decision.acting())
        what = decision.what
        body = _body(
            threadId=thread_id,
            resourceId=resource_id,
            approved=not isinstance(what, Decline),
            toolCallId=decision.tool_call_id,
            reason=what.reason if isinstance(what, Decline) else None,
            resumeData=what.resume_data if isinstance(what, Resume) else None,
        )
        return await self.client.open_stream(f"{self._base}/send-tool-approval", body)

    async def _list_suspended(self, filters: SuspendedRunFilters) -> SuspendedRunList:
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
        return await self.client.list_runs(f"{self._base}/suspended-runs", params)

    async def _cancel(self, run_id: str, cancel: CancelCall) -> CancelledRun:
        _only_in_process(cancel.acting())
        body = _body(
            runId=run_id, reason=cancel.reason, toolCallId=cancel.tool_call_id, fingerprint=cancel.fingerprint
        )
        return cancelled_run_from_json(
            await self.client.request("POST", f"{self._base}/cancel-run", body=body)
        )

    async def _result(self, route: str, body: dict[str, Any]) -> RunResult:
        data = await self.client.request("POST", f"{self._base}/{route}", body=body)
        return run_result_from_json(data).raise_for_error()

    # ---- only over HTTP -----------------------------------------------------------------------------

    async def run_status(self, run_id: str) -> dict[str, Any]:
        """Where a run stands (``GET .../runs/{runId}``).

        Args:
            run_id: The run (top-level or a subagent's).

        Returns:
            The run's record: ``status`` is ``running``, ``suspended``, ``finished`` or ``cancelled``
            (then ``cancelled`` says by whom, why and when).

        Raises:
            SnapshotNotFoundError: No such run of this agent that the caller may see.
            ServerUnreachableError: The server did not take the connection.
        """
        found: dict[str, Any] = await self.client.request(
            "GET", f"{self._base}/runs/{quote(run_id, safe='')}"
        )
        return found


# The routes of each kind of decision: (streamed, to the result).
_DECISION_ROUTES: dict[type, tuple[str, str]] = {
    Approve: ("approve-tool-call", "approve-tool-call-generate"),
    Decline: ("decline-tool-call", "decline-tool-call-generate"),
    Resume: ("resume-stream", "resume-generate"),
}


def _decision_body(run_id: str, decision: Decision) -> tuple[tuple[str, str], dict[str, Any]]:
    """The routes and the JSON body that carry ``decision`` (Mastra's camelCase fields)."""
    _only_in_process(decision.acting())
    what = decision.what
    body = _body(runId=run_id, toolCallId=decision.tool_call_id, fingerprint=decision.fingerprint)
    if isinstance(what, Approve):
        body.update(_body(editedArgs=what.edited_args))
    elif isinstance(what, Decline):
        body.update(_body(reason=what.reason))
    else:
        body["resumeData"] = what.resume_data
    return _DECISION_ROUTES[type(what)], body


def _only_in_process(acting: Mapping[str, Any]) -> None:
    """Who acts is the credential's principal over HTTP: a client never sends a name for it."""
    if acting:
        raise TypeError(
            f"{', '.join(acting)} cannot be given over HTTP: the server takes who acts from the "
            "caller's API key or token"
        )


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
    """The JSON body of a start (``/stream``, ``/generate``): the messages and the options given.

    Args:
        messages: The run's messages.
        options: ``stream``'s options by their Python names (None ones left out).

    Returns:
        Mastra's camelCase body.

    Raises:
        TypeError: An option that cannot travel over HTTP (``started_by``) or is unknown.
    """
    _only_in_process({k: v for k, v in options.items() if k == "started_by" and v is not None})
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
