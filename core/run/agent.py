"""The agent definition: instructions, model, tools, subagents and defaults. Ray-free and picklable.

It stands above the vocabulary it is made of because a model may be given by name
(``troupe.core.models.names``): the definition knows the models, the vocabulary knows none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from troupe.core.models.names import resolve_model
from troupe.core.run.memory import Memory
from troupe.core.vocabulary.hooks import Hooks
from troupe.core.vocabulary.mcp_servers import MCPServer, check_mcp_servers
from troupe.core.vocabulary.model import Model
from troupe.core.vocabulary.names import name_problem
from troupe.core.vocabulary.options import check_defaults
from troupe.core.vocabulary.tools import Tool, check_tool_name

DELEGATION_PREFIX = "agent-"


class AgentSpec:
    """What an agent is. ``supervisor.Agent`` adds the run methods on top of it."""

    def __init__(
        self,
        id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        instructions: str = "",
        model: Model | str,
        tools: Mapping[str, Tool] | Sequence[Tool] | None = None,
        agents: Mapping[str, AgentSpec] | None = None,
        memory: Memory | None = None,
        default_options: dict[str, Any] | None = None,
        hooks: Hooks | None = None,
        mcp_servers: Sequence[MCPServer] | None = None,
    ) -> None:
        if not id or not isinstance(id, str):
            raise ValueError("an agent needs a non-empty string id")
        problem = name_problem(id)
        if problem is not None:
            raise ValueError(
                f"agent id {problem}, as an agent's id is a segment of its URLs "
                "(/api/agents/<id>, /a2a/<id>) and the tool name Troupe's MCP server offers it by"
            )
        self.id = id
        self.name = name or id
        self.description = description
        self.instructions = instructions
        self.model = resolve_model(model)
        self.tools = _tool_map(id, tools)
        if agents is not None and not isinstance(agents, Mapping):
            raise TypeError(
                f"agent {id!r}: agents must be a dict of key -> Agent (each becomes the tool "
                f"'agent-<key>'), got {type(agents).__name__}"
            )
        self.agents: dict[str, AgentSpec] = dict(agents or {})
        for key, sub in self.agents.items():
            if not isinstance(sub, AgentSpec):
                raise TypeError(f"agent {id!r}: subagent {key!r} must be an Agent")
            if not isinstance(key, str):
                raise TypeError(f"agent {id!r}: a subagent's key must be a string, got {key!r}")
            name_ = DELEGATION_PREFIX + key
            check_tool_name(name_, f"agent {id!r}: subagent {key!r}'s tool {name_!r}")
            if name_ in self.tools:
                raise ValueError(f"agent {id!r}: tool name {name_!r} clashes with subagent {key!r}")
        self.memory = memory
        self.default_options = dict(default_options or {})
        check_defaults(self.default_options, f"default_options of agent {id!r}")
        self.hooks = hooks or Hooks()
        # Tool sources each host opens for itself (troupe.actors.mcp): their tools join ``tools`` there.
        self.mcp_servers = check_mcp_servers(id, mcp_servers)

    def tree(self) -> dict[str, AgentSpec]:
        """This agent and every agent below it, by id (each definition once)."""
        found: dict[str, AgentSpec] = {}
        stack: list[AgentSpec] = [self]
        while stack:
            spec = stack.pop()
            seen = found.get(spec.id)
            if seen is spec:
                continue
            if seen is not None:
                raise ValueError(f"two different agents share the id {spec.id!r}")
            found[spec.id] = spec
            stack.extend(spec.agents.values())
        return found

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self.id!r}, tools={sorted(self.tools)}, agents={sorted(self.agents)})"
        )


def _tool_map(agent_id: str, tools: Mapping[str, Tool] | Sequence[Tool] | None) -> dict[str, Tool]:
    if tools is None:
        return {}
    if not isinstance(tools, Mapping | Sequence) or isinstance(tools, str):
        raise TypeError(
            f"agent {agent_id!r}: tools must be a list of Tools or a dict of name -> Tool, "
            f"got {type(tools).__name__}"
        )
    # Each with what names it in an error: its key, or its place in the list (a non-Tool has no id).
    items: list[tuple[str, Any, str]] = (
        [(name, tool, f"tool {name!r}") for name, tool in tools.items()]
        if isinstance(tools, Mapping)
        else [(getattr(tool, "id", ""), tool, f"tools[{i}]") for i, tool in enumerate(tools)]
    )
    out: dict[str, Tool] = {}
    for name, tool, where in items:
        if not isinstance(tool, Tool):
            raise TypeError(
                f"agent {agent_id!r}: {where} is a {type(tool).__name__}, not a Tool "
                "(make one with create_tool)"
            )
        check_tool_name(name, f"agent {agent_id!r}: {where}'s name")
        if name in out:
            raise ValueError(f"agent {agent_id!r}: two tools named {name!r}")
        out[name] = tool
    return out


__all__ = ["DELEGATION_PREFIX", "AgentSpec"]
