"""Troupe served over MCP: each agent of the runtime is a tool (``prompt``, and optionally ``resourceId``
and ``threadId``) that runs the agent to its end.

When the run pauses, a client that can be asked (it declared elicitation) gets an elicitation for each
pause in turn (``troupe.api.mcp_pauses``) and its answers decide the calls; a client that cannot, or a
person who cancels, gets a result saying the run is paused, with its run id and where to decide it. The
caller is a ``Principal``: over HTTP the API key of the request (``troupe.api.mcp_http``), over stdio the
one ``troupe mcp`` was started as. It starts runs and decides them exactly as over the HTTP routes
(``Service``): only in its own resources, and through the agents' own decision methods. A client that
cancels its tool call (``notifications/cancelled``) cancels the run it started, as itself. A key revoked
(or a token expired) while the run went on gets neither its result nor its questions: the tool call is
answered with a JSON-RPC error (``-32600``, ``UNAUTHENTICATED: ...``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from troupe.api.auth import Principal, own_resource
from troupe.api.bodies import MAX_ID_CHARS, MAX_TEXT_CHARS
from troupe.api.errors import AuthenticationError, InvalidRequestError
from troupe.api.identity import caller_now
from troupe.api.mcp_pauses import PausedCall, Questions, finished_result, paused_result, waiting_call
from troupe.api.service import Service
from troupe.core.vocabulary.errors import DecisionRejectedError, TroupeError
from troupe.core.vocabulary.results import RunResult
from troupe.supervisor.agent import Agent

log = logging.getLogger(__name__)

# A run paused again and again is handed back after this many questions rather than asking forever.
MAX_QUESTIONS = 20
# The reason a run is cancelled with when the MCP client cancels the tool call that started it.
CLIENT_CANCELLED = "the MCP client cancelled the tool call that started the run"
PRINCIPAL_KEY = "troupe.principal"

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": "The task for the agent"},
        "resourceId": {
            "type": "string",
            "description": "The resource the run belongs to, one of your key's (optional if it has only one)",
        },
        "threadId": {"type": "string", "description": "A conversation thread, for agents with memory"},
    },
    "required": ["prompt"],
    "additionalProperties": False,
}


class AgentsOverMCP:
    """The MCP tools of ``service``'s runtime. ``principal`` is the caller where the transport has no
    key of its own (stdio); ``base_url`` is where people reach the HTTP front door (for the paused
    result)."""

    def __init__(self, service: Service, principal: Principal | None = None, base_url: str | None = None):
        self.service = service
        self.principal = principal
        self.base_url = base_url
        self.questions = Questions()

    def server(self) -> Any:
        from mcp.server.lowlevel import Server

        return Server(
            "troupe",
            version="0.1.0",
            instructions="Each tool runs one Troupe agent; a tool call that needs a person asks you.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    def _tools(self) -> list[dict[str, Any]]:
        return [
            {
                "name": agent.id,
                "description": agent.description or f"Run the {agent.name} agent",
                "inputSchema": INPUT_SCHEMA,
                "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
            }
            for agent in sorted(self.service.runtime.list_agents(), key=lambda a: a.id)
        ]

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ListToolsResult

        return ListToolsResult.model_validate({"tools": self._tools()})

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        from mcp_types import CallToolResult, InputRequiredResult

        try:
            if params.request_state is not None:
                answer = await self.answered(ctx, params)
            else:
                answer = await self.call(ctx, params.name, params.arguments or {})
        except TroupeError as exc:
            answer = _error(f"{exc.code}: {exc.message}")
        if isinstance(answer, InputRequiredResult):
            return answer
        return CallToolResult.model_validate(answer)

    def caller(self, ctx: Any) -> Principal:
        request = getattr(ctx, "request", None)
        scope = getattr(request, "scope", None)
        found = scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None
        principal = found or self.principal
        if principal is None:
            raise TroupeError("no caller: this MCP transport carries no credential")
        return principal

    async def call(self, ctx: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run agent ``name`` for the caller, then ask about each pause while the client can be asked."""
        caller = self.caller(ctx)
        prompt = arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return _error("'prompt' must be a non-empty string")
        if len(prompt) > MAX_TEXT_CHARS:  # the same bound as a message to /api
            return _error(f"'prompt' is longer than {MAX_TEXT_CHARS:,} characters")
        agent = self.service.agent(name)
        options = _options(caller, arguments)
        run_id = str(uuid.uuid4())
        async with _cancelled_with(agent, run_id, caller):
            result = await agent.generate(prompt, started_by=caller, run_id=run_id, **options)
            return await self._ask_about_pauses(ctx, caller, agent, result)

    async def _ask_about_pauses(self, ctx: Any, caller: Principal, agent: Agent, result: RunResult) -> Any:
        """Ask about each pause in turn, while the client can be asked; the result, or the question for
        a client that answers by calling again (MCP 2026's input-required results)."""
        note = None
        for questions in itertools.count():
            await self._still_held(ctx, caller)  # before the run's result or its next question goes out
            if result.finish_reason != "suspended":
                return finished_result(result)
            call = await waiting_call(self.service, caller, agent, result.run_id)
            if questions == MAX_QUESTIONS or not _can_elicit(ctx):
                break
            if not ctx.session.can_send_request:
                return self.questions.ask(call)
            message, schema = call.question()
            answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
            if answer.action == "cancel":
                break
            try:
                result = await call.decide(agent, caller, answer.action, answer.content)
            except TroupeError as exc:
                note = _not_taken(exc)
                break
        return self._paused(ctx, call, note)

    async def _still_held(self, ctx: Any, caller: Principal) -> None:
        """Nothing more of a run goes to a caller whose key was revoked (or token expired) while it ran:
        its tool call is answered with a JSON-RPC error instead (``troupe.api.identity.caller_now``, as
        every surface that sends a run's output asks). Over stdio the caller is the one ``troupe mcp``
        was started as, for as long as it runs."""
        request = getattr(ctx, "request", None)
        if not isinstance(request, Request) or request.scope.get(PRINCIPAL_KEY) is None:
            return
        try:
            await caller_now(request, caller)
        except AuthenticationError as exc:
            from mcp.shared.exceptions import MCPError
            from mcp_types import INVALID_REQUEST

            # MCP has no code of its own for it: the request is no longer one this server answers.
            raise MCPError(INVALID_REQUEST, f"{exc.code}: {exc.message}", {"code": exc.code}) from None

    async def answered(self, ctx: Any, params: Any) -> Any:
        """A client's call again with its answer to the question an input-required result asked."""
        caller = self.caller(ctx)
        asked, action, content = self.questions.answer(params)
        agent = self.service.agent(asked.agent_id)
        call = await waiting_call(self.service, caller, agent, asked.run_id, asked)
        if action == "cancel":
            return self._paused(ctx, call, None)
        async with _cancelled_with(agent, call.run_id, caller):
            try:
                result = await call.decide(agent, caller, action, content)
            except DecisionRejectedError as exc:  # e.g. an answer that does not fit: still paused
                return self._paused(ctx, call, _not_taken(exc))
            return await self._ask_about_pauses(ctx, caller, agent, result)

    def _paused(self, ctx: Any, call: PausedCall, note: str | None) -> dict[str, Any]:
        return paused_result(call, call.where_to_decide(_base_url(ctx, self.base_url)), note)


@contextlib.asynccontextmanager
async def _cancelled_with(agent: Agent, run_id: str, caller: Principal) -> AsyncIterator[None]:
    """The MCP client cancelled the tool call (``notifications/cancelled``: the SDK cancels its
    handler): the run it started is cancelled too, as the caller, before the cancel goes on up."""
    try:
        yield
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            try:
                await agent.cancel_run(run_id, reason=CLIENT_CANCELLED, cancelled_by=caller, surface="mcp")
            except TroupeError as exc:  # finished or cancelled meanwhile, or never stored
                log.info("run %s was not cancelled with its MCP call: %s", run_id, exc.message)
        raise


def _options(caller: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {"resource_id": own_resource(caller, _text(arguments, "resourceId"))}
    thread = _text(arguments, "threadId")
    if thread is not None:
        options["thread_id"] = thread
    return options


def _text(arguments: dict[str, Any], key: str) -> str | None:
    """The id ``arguments[key]`` names (None if absent or empty), bounded as /api's ids are; anything
    else is refused rather than ignored (a run started in another resource or thread than asked)."""
    value = arguments.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_ID_CHARS:
        raise InvalidRequestError(f"'{key}' must be a string of at most {MAX_ID_CHARS} characters")
    return value


def _not_taken(exc: TroupeError) -> str:
    return f"The answer was not taken ({exc.code}): {exc.message}"


def _base_url(ctx: Any, configured: str | None) -> str | None:
    """Where people reach this server: as configured, else as the HTTP request that asked reached it."""
    if configured:
        return configured
    request = getattr(ctx, "request", None)
    base = getattr(request, "base_url", None)
    return str(base).rstrip("/") if base is not None else None


def _can_elicit(ctx: Any) -> bool:
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def _error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


__all__ = ["INPUT_SCHEMA", "PRINCIPAL_KEY", "AgentsOverMCP"]
