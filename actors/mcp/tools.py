"""An MCP server's tools as ``Tool``s: nothing in a run's flow knows a call goes to MCP.

Each listed tool is checked first (a server's listing is hostile input): a name the model could not
call, or an input schema that is no valid JSON schema for an object, keeps that tool out, with the
reason logged and kept for ``AgentHost.stats``. The rest get:
- the input schema as their input model (arguments are validated before anything pauses);
- approval from the server's ``require_approval`` rule, else from the annotations (gated unless
  ``readOnlyHint: true``); ``idempotentHint: true`` makes the call safe to re-run after a crash;
- ``origin``: the server's name and the tool's annotations, which every pause of theirs carries;
- ``resume_on_decline``: a person's decline of an elicitation goes back to the server;
- ``timeout_s``: the server's ``timeout_s``, per stretch of waiting on the server (a person answering an
  elicitation is not waited for inside the tool).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from troupe.actors.mcp.calls import Ask, elicit_answer
from troupe.actors.mcp.connection import MCPConnection
from troupe.actors.mcp.results import tool_output
from troupe.core.vocabulary.json_schemas import json_schema_input, schema_problem
from troupe.core.vocabulary.mcp_servers import MCPServer
from troupe.core.vocabulary.names import name_problem
from troupe.core.vocabulary.tools import ApprovalRule, Tool, ToolContext, ToolInterrupted

log = logging.getLogger(__name__)

_MAX_DESCRIPTION = 8_000

INTERRUPTED_ELICITATION = (
    "the MCP session that asked for this answer is gone (its process stopped, or another replica of the "
    "agent took the decision), so the answer could not be given to it; the call was not run again"
)


def approval_rule(server: MCPServer, name: str, annotations: Mapping[str, Any]) -> ApprovalRule:
    """Whether calls of the server's tool ``name`` pause for a person (see ``MCPStdio``)."""
    rule = server.require_approval
    if isinstance(rule, bool):
        return rule
    if callable(rule):
        predicate = rule

        def ask(parsed: BaseModel, ctx: ToolContext) -> Any:
            return predicate(name, dict(getattr(parsed, "root", {})))

        return ask
    if isinstance(rule, Mapping):
        if name in rule.get("always", ()):
            return True
        if name in rule.get("never", ()):
            return False
    # MCP's own defaults: destructiveHint is true unless a tool says otherwise, so only a tool that
    # says it only reads goes ungated.
    return annotations.get("readOnlyHint") is not True


@dataclass(frozen=True)
class MCPCall:
    """``execute`` of one MCP tool: the call on the host's session, a pause for each elicitation.

    Cancelling the task that awaits it cancels the call at the server too: the server gets MCP's
    ``notifications/cancelled`` for the request before the cancellation completes, and the session
    goes on serving other calls."""

    connection: MCPConnection
    name: str

    @property
    def timeout_s(self) -> float:
        """The server's ``timeout_s``: how long a call waits for the server's next message (its answer,
        or a question for a person) before it fails with a tool error the model sees."""
        return self.connection.server.timeout_s

    async def __call__(self, parsed: BaseModel, ctx: ToolContext) -> Any:
        server = self.connection.server
        key = (ctx.run_id, ctx.tool_call_id)
        agent = ctx.agent
        if agent.resume_data is not None or agent.decline_reason is not None:
            call = self.connection.waiting.pop(key, None)
            if call is None:
                raise ToolInterrupted(INTERRUPTED_ELICITATION)
            call.answer(elicit_answer(agent.resume_data, agent.decline_reason, agent.expired))
        else:
            call = self.connection.start_call(self.name, dict(getattr(parsed, "root", {})), key)
        try:
            event = await call.next(self.timeout_s)
        except asyncio.CancelledError:
            await self.connection.abandon(call)
            raise
        if isinstance(event, Ask):
            self.connection.waiting[key] = call
            await agent.suspend(_question(server.name, event), resume_schema=event.schema)
        if event.error is not None:
            raise event.error
        assert event.result is not None
        return tool_output(server.name, self.name, event.result)


def _question(server: str, ask: Ask) -> dict[str, Any]:
    """The pause's ``suspend_payload``: what the server asks, and of whom (the schema is the pause's
    ``resume_schema``)."""
    return {"mcp_server": server, "elicitation": True, "message": ask.message[:_MAX_DESCRIPTION]}


def build_tools(connection: MCPConnection, listed: list[dict[str, Any]]) -> tuple[dict[str, Tool], list[str]]:
    """The tools to offer, by the name the model sees, and why each refused tool was refused."""
    server = connection.server
    tools: dict[str, Tool] = {}
    refused: list[str] = []
    for entry in listed:
        name = entry.get("name")
        seen = f"{server.prefix}{name}" if isinstance(name, str) else None
        schema = entry.get("inputSchema")
        misnamed = name_problem(name if seen is None else seen)
        problem = f"tool name {misnamed}" if misnamed is not None else schema_problem(schema)
        if problem is None and seen in tools:
            problem = f"the server lists {name!r} twice"
        if problem is not None:
            refused.append(f"{str(name)[:80]!r}: {problem}")
            log.error("MCP server %r: tool %r left out: %s", server.name, str(name)[:80], problem)
            continue
        assert seen is not None and isinstance(name, str)
        tools[seen] = _tool(connection, name, seen, schema, entry)
    return tools, refused


def _tool(connection: MCPConnection, name: str, seen: str, schema: Any, entry: dict[str, Any]) -> Tool:
    annotations = entry.get("annotations") if isinstance(entry.get("annotations"), dict) else {}
    assert isinstance(annotations, dict)
    description = str(entry.get("description") or entry.get("title") or name)[:_MAX_DESCRIPTION]
    return Tool(
        id=seen,
        description=description,
        input_schema=json_schema_input(seen, schema),
        execute=MCPCall(connection, name),
        require_approval=approval_rule(connection.server, name, annotations),
        idempotent=annotations.get("idempotentHint") is True,
        # The server's timeout bounds each stretch of the call spent waiting on the server: up to its
        # answer, or up to a question for a person (an elicitation pauses the run, and the tool is
        # called again with the answer), so the time a person takes does not count.
        timeout_s=connection.server.timeout_s,
        resume_on_decline=True,
        origin={
            "mcp_server": connection.server.name,
            "tool": name,
            "annotations": annotations,
            "description": description,
        },
    )


__all__ = ["INTERRUPTED_ELICITATION", "MCPCall", "approval_rule", "build_tools"]
