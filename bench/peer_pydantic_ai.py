"""Pydantic AI under the shared workloads.

The gated tool is registered with ``requires_approval=True``; the agent's output type includes
``DeferredToolRequests``, so a paused run ends with them as its output. The run's ``conversation``
(messages plus the pending ``deferred_tool_requests``) is what resuming needs:
``agent.run(conversation=..., deferred_tool_results=requests.build_results(approve_all=True))``.
The model is Pydantic AI's own ``FunctionModel`` with an instant function.

Configurations: ``memory`` keeps each paused ``Conversation`` in the process; ``json`` writes it with
``ConversationTypeAdapter`` to a file per paused run and loads it back (W4 does that from a fresh process).
W2 is not available: a tool cannot hand a subagent's ``DeferredToolRequests`` up to the parent run in
this version (see ``W2_NOTE``); only hand-written plumbing could, which would not be the framework's.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

from harness import FINAL_TEXT, JsonFileSystem, System, Unsupported
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.conversation import ConversationTypeAdapter
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

W2_NOTE = (
    "no built-in way for a subagent's approval to pause the parent run: a delegating tool gets the "
    "subagent's DeferredToolRequests as a plain output (nested deferred tool calls are an open feature "
    "request, pydantic/pydantic-ai#4302)"
)


def scripted_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    names = [t.name for t in info.function_tools]
    assert "delete_record" in names, f"tool not offered (offered: {names})"
    returns = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
    if returns:
        assert "deleted" in str(returns[0].content), returns[0]  # the tool ran: not a denial or an error
        return ModelResponse(parts=[TextPart(FINAL_TEXT)])
    return ModelResponse(parts=[ToolCallPart("delete_record", {"id": "abc-123"}, tool_call_id="call-1")])


def delete_record(id: str) -> dict[str, str]:
    """Delete a record"""
    return {"deleted": id}


class PydanticAISystem(JsonFileSystem):
    family = "Pydantic AI"
    prefix = "pydantic-ai"

    def __init__(self, workdir: Path, env: dict[str, Any], mode: str) -> None:
        super().__init__(workdir, env, mode)
        where = "Conversation kept in memory" if mode == "memory" else "Conversation JSON file per paused run"
        self.label = f"Pydantic AI {version('pydantic-ai-slim')} ({where})"

    async def open(self) -> None:
        await super().open()
        self.agent = Agent(
            FunctionModel(scripted_turn),
            instructions="You manage records.",
            output_type=[str, DeferredToolRequests],
        )
        self.agent.tool_plain(requires_approval=True)(delete_record)

    async def pause(self, i: int) -> Any:
        result = await self.agent.run(f"delete record {i}")
        assert isinstance(result.output, DeferredToolRequests), result.output
        return self.keep(result.conversation, ConversationTypeAdapter.dump_json)

    async def approve(self, token: Any) -> None:
        if self.mode == "memory":
            conversation = token
        else:
            conversation = ConversationTypeAdapter.validate_json(token.read_bytes())
        requests = conversation.deferred_tool_requests
        assert requests is not None and requests.approvals, "no pending approval in the conversation"
        result = await self.agent.run(
            conversation=conversation, deferred_tool_results=requests.build_results(approve_all=True)
        )
        assert result.output == FINAL_TEXT, result.output
        self.forget(token)

    async def w2(self) -> None:
        raise Unsupported(W2_NOTE)


def make(key: str, workdir: Path, env: dict[str, Any]) -> System:
    return PydanticAISystem(workdir, env, key.rsplit("-", 1)[1])
