"""Tools: what an agent can call, and the context a tool runs in.

``create_tool(...)`` builds a ``Tool``. A tool's ``execute(input, ctx)`` gets its validated input model;
it may pause itself with ``return await ctx.agent.suspend(payload)`` and is called again on resume with
``ctx.agent.resume_data`` set.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError

ApprovalRule = bool | Callable[[Any, "ToolContext"], bool | Awaitable[bool]]
Execute = Callable[[Any, "ToolContext"], Any]


class SuspendSignal(BaseException):
    """Raised by ``ctx.agent.suspend``; derives from BaseException so a tool's ``except Exception``
    cannot swallow the pause."""

    def __init__(self, payload: Any) -> None:
        super().__init__("tool suspended")
        self.payload = payload


@dataclass
class AgentContext:
    """``ctx.agent``: how a tool pauses itself and what it is resumed with."""

    resume_data: Any = None
    suspend_schema: type[BaseModel] | None = None

    async def suspend(self, payload: Any = None) -> NoReturn:
        if self.suspend_schema is not None:
            try:
                model = self.suspend_schema.model_validate(payload)
            except ValidationError as exc:
                raise ValueError(f"suspend payload does not match suspend_schema: {exc}") from exc
            payload = model.model_dump(mode="json")
        raise SuspendSignal(payload)


@dataclass
class ToolContext:
    run_id: str
    tool_call_id: str
    agent_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    request_context: dict[str, Any] = field(default_factory=dict)
    agent: AgentContext = field(default_factory=AgentContext)


@dataclass(eq=False)
class Tool:
    id: str
    description: str
    input_schema: type[BaseModel]
    execute: Execute
    output_schema: type[BaseModel] | None = None
    suspend_schema: type[BaseModel] | None = None
    resume_schema: type[BaseModel] | None = None
    require_approval: ApprovalRule = False
    allow_edited_args: bool = False
    idempotent: bool = False

    def spec(self, name: str) -> dict[str, Any]:
        """The OpenAI function spec the model sees, under the name the agent gives this tool."""
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": self.description,
                "parameters": self.input_schema.model_json_schema(),
            },
        }

    def parse_input(self, args: dict[str, Any]) -> BaseModel:
        return self.input_schema.model_validate(args)

    def resume_json_schema(self) -> dict[str, Any] | None:
        return self.resume_schema.model_json_schema() if self.resume_schema else None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Validate, execute (sync or async) and return the JSON-able output."""
        result = self.execute(self.parse_input(args), ctx)
        if inspect.isawaitable(result):
            result = await result
        if self.output_schema is not None:
            result = self.output_schema.model_validate(result)
        return to_jsonable(result)


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def create_tool(
    id: str,
    description: str,
    input_schema: type[BaseModel],
    execute: Execute,
    *,
    output_schema: type[BaseModel] | None = None,
    suspend_schema: type[BaseModel] | None = None,
    resume_schema: type[BaseModel] | None = None,
    require_approval: ApprovalRule = False,
    allow_edited_args: bool = False,
    idempotent: bool = False,
) -> Tool:
    if not (isinstance(input_schema, type) and issubclass(input_schema, BaseModel)):
        raise TypeError(f"tool {id!r}: input_schema must be a pydantic model class")
    for label, schema in (("output", output_schema), ("suspend", suspend_schema), ("resume", resume_schema)):
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError(f"tool {id!r}: {label}_schema must be a pydantic model class")
    if not callable(execute):
        raise TypeError(f"tool {id!r}: execute must be callable")
    if not (isinstance(require_approval, bool) or callable(require_approval)):
        raise TypeError(f"tool {id!r}: require_approval must be a bool or a function (args, ctx) -> bool")
    return Tool(
        id=id,
        description=description,
        input_schema=input_schema,
        execute=execute,
        output_schema=output_schema,
        suspend_schema=suspend_schema,
        resume_schema=resume_schema,
        require_approval=require_approval,
        allow_edited_args=allow_edited_args,
        idempotent=idempotent,
    )


__all__ = ["AgentContext", "SuspendSignal", "Tool", "ToolContext", "create_tool", "to_jsonable"]
