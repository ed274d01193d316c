"""Pydantic AI under the shared workloads.

The gated tool is registered with ``requires_approval=True``; the agent's output type includes
``DeferredToolRequests``, so a paused run ends with them as its output. The run's ``conversation``
(messages plus the pending ``deferred_tool_requests``) is what resuming needs:
``agent.run(conversation=..., deferred_tool_results=requests.build_results(approve_all=True))``.
The model is Pydantic AI's own ``FunctionModel`` with an instant function and an instant stream
function (the same turn as deltas; in W1-300ms both wait 300 ms first, ``scripted_model``). W1 goes
through the streaming API: ``agent.run_stream(...)``, whose output is the ``DeferredToolRequests``
when the run pauses (this version streams up to a deferred tool call), then ``run_stream(message_history=
..., deferred_tool_results=...)`` with its text read through ``stream_text(delta=True)``; W3/W4 and
``--api generate`` use ``agent.run``.

Configurations: ``memory`` keeps each paused ``Conversation`` in the process; ``json`` writes it with
``ConversationTypeAdapter`` to a file per paused run and loads it back (W4 does that from a fresh process).
W2 is not available: a tool cannot hand a subagent's ``DeferredToolRequests`` up to the parent run in
this version (see ``W2_NOTE``); only hand-written plumbing could, which would not be the framework's.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench_common import model_wait
from harness import FINAL_TEXT, PROMPT, JsonFileSystem, System, Unsupported
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.conversation import Conversation, ConversationTypeAdapter
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

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


async def scripted_stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
    """The same turn streamed: the text as one delta, or the tool call as one delta."""
    for part in scripted_turn(messages, info).parts:
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            call = DeltaToolCall(
                name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id="call-1"
            )
            yield {0: call}


def scripted_model(turn_s: float, waits: str | None) -> FunctionModel:
    """The scripted turns as Pydantic AI's FunctionModel: instant, or (W1-300ms) each turn, plain or
    streamed, waits ``turn_s`` first (bench_common.model_wait, logged to ``waits``)."""
    if not turn_s:
        return FunctionModel(scripted_turn, stream_function=scripted_stream)

    async def slow_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await model_wait(turn_s, waits)
        return scripted_turn(messages, info)

    async def slow_stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        await model_wait(turn_s, waits)
        async for delta in scripted_stream(messages, info):
            yield delta

    return FunctionModel(slow_turn, stream_function=slow_stream)


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
            scripted_model(self.model_turn_s, self.model_waits),
            instructions="You manage records.",
            output_type=[str, DeferredToolRequests],
        )
        self.agent.tool_plain(requires_approval=True)(delete_record)

    async def pause(self, i: int) -> Any:
        result = await self.agent.run(f"delete record {i}")
        assert isinstance(result.output, DeferredToolRequests), result.output
        return self.keep(result.conversation, ConversationTypeAdapter.dump_json)

    def _pending(self, token: Any) -> tuple[Conversation, DeferredToolResults]:
        """The kept conversation and the approval of its pending call."""
        if self.mode == "memory":
            conversation = token
        else:
            conversation = ConversationTypeAdapter.validate_json(token.read_bytes())
        requests = conversation.deferred_tool_requests
        assert requests is not None and requests.approvals, "no pending approval in the conversation"
        return conversation, requests.build_results(approve_all=True)

    async def approve(self, token: Any) -> None:
        conversation, results = self._pending(token)
        result = await self.agent.run(conversation=conversation, deferred_tool_results=results)
        assert result.output == FINAL_TEXT, result.output
        self.forget(token)

    async def w1(self) -> None:
        """Streamed: run_stream's output is the DeferredToolRequests; the conversation is kept as
        ``pause`` keeps it; the resume is streamed and its text read as deltas."""
        if self.api == "generate":
            return await super().w1()
        async with self.agent.run_stream(PROMPT) as paused:
            requests = await paused.get_output()
            assert isinstance(requests, DeferredToolRequests), requests
            conversation = Conversation(
                messages=paused.all_messages(),
                usage=paused.usage,
                conversation_id=paused.conversation_id,
                deferred_tool_requests=requests,
            )
        token = self.keep(conversation, ConversationTypeAdapter.dump_json)
        conversation, results = self._pending(token)
        async with self.agent.run_stream(conversation=conversation, deferred_tool_results=results) as resumed:
            text = [delta async for delta in resumed.stream_text(delta=True)]
        assert "".join(text) == FINAL_TEXT, text
        self.forget(token)

    async def w2(self) -> None:
        raise Unsupported(W2_NOTE)


def make(key: str, workdir: Path, env: dict[str, Any]) -> System:
    return PydanticAISystem(workdir, env, key.rsplit("-", 1)[1])
