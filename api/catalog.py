"""``GET /api/agents`` and ``GET /api/agents/{agentId}``: what agents the runtime serves, in the shape of
Mastra's serialized agent (tools keyed by the name the model sees, their JSON schemas as superjson
strings, subagents as ``{id, name}``). Every key may read these: they describe definitions, not runs.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel
from troupe.api.errors import ERRORS
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, ServiceDep
from troupe.core.vocabulary.chunks import camelize
from troupe.core.vocabulary.tools import Tool
from troupe.supervisor.agent import Agent

router = APIRouter(tags=["agents"], route_class=TroupeRoute)


@router.get("/agents", operation_id="listAgents", responses=ERRORS)
async def list_agents(
    service: ServiceDep,
    caller: CallerDep,
    partial: Annotated[bool, Query(description="Leave out the tools' JSON schemas")] = False,
) -> dict[str, Any]:
    """Every agent of the runtime (subagents too), keyed by id."""
    return {agent.id: agent_json(agent, partial=partial) for agent in service.runtime.list_agents()}


@router.get("/agents/{agentId}", operation_id="getAgent", responses=ERRORS)
async def get_agent(agentId: str, service: ServiceDep, caller: CallerDep) -> dict[str, Any]:
    return agent_json(service.agent(agentId))


def agent_json(agent: Agent, *, partial: bool = False) -> dict[str, Any]:
    model_id = getattr(agent.model, "id", "") or type(agent.model).__name__
    provider, _, name = model_id.partition("/")
    return {
        "id": agent.id,
        "name": agent.name,
        "description": agent.description,
        "instructions": agent.instructions,
        "tools": {key: tool_json(tool, partial=partial) for key, tool in agent.tools.items()},
        "agents": {key: {"id": sub.id, "name": sub.name} for key, sub in agent.agents.items()},
        "workflows": {},
        "skills": [],
        "workspaceTools": [],
        "browserTools": [],
        "hasBrowser": False,
        "inputProcessors": [],
        "outputProcessors": [],
        "provider": provider if name else None,
        "modelId": name or model_id,
        "supportsMemory": agent.memory is not None,
        # A policy function cannot travel; where options are stored it counts as "approval required".
        "defaultOptions": camelize({k: True if callable(v) else v for k, v in agent.default_options.items()}),
    }


def tool_json(tool: Tool, *, partial: bool = False) -> dict[str, Any]:
    rule = tool.require_approval
    return {
        "id": tool.id,
        "description": tool.description,
        "inputSchema": None if partial else _schema(tool.input_schema),
        "outputSchema": None if partial else _schema(tool.output_schema),
        "suspendSchema": None if partial else _schema(tool.suspend_schema),
        "resumeSchema": None if partial else _schema(tool.resume_schema),
        # A rule function decides per call: the tool may need approval.
        "requireApproval": rule if isinstance(rule, bool) else True,
        "allowEditedArgs": tool.allow_edited_args,
    }


def _schema(model: type[BaseModel] | None) -> str | None:
    # Mastra sends schemas as superjson strings; for plain JSON that is {"json": <value>}.
    return None if model is None else json.dumps({"json": model.model_json_schema()})


__all__ = ["agent_json", "router", "tool_json"]
