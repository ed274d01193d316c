"""The OpenAI Agents SDK under the shared workloads.

The gated tool is a ``function_tool(needs_approval=True)``; a paused run ends with
``interruptions``; ``result.to_state()`` gives the ``RunState``, ``state.approve(item)`` records the
decision and the run resumes from the state. W1/W2 go through the streaming API
(``Runner.run_streamed`` read with ``stream_events()`` to its end, the interruptions on the streamed
result, the resume streamed the same way, its text read from the ``response.output_text.delta``
events); W3/W4 and ``--api generate`` use ``Runner.run``. The model is a small scripted ``Model``
(below) that answers both ways. Tracing is turned off: its exporter would need the network and an API
key.

Configurations: ``memory`` keeps each paused ``RunResult`` in the process; ``json`` writes each paused
run's ``state.to_string()`` to a file and resumes from ``RunState.from_string`` (the SDK's documented way
to keep a paused run across processes), which is also what W4 does from a fresh process.
W2: the supervisor calls the subagent through ``Agent.as_tool``; the subagent tool's approval surfaces in
the supervisor run's ``interruptions`` and is approved on the supervisor's state.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, RunState, Usage, function_tool, set_tracing_disabled
from bench_common import model_wait
from harness import FINAL_TEXT, PROMPT, JsonFileSystem, System
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
)

set_tracing_disabled(True)


class ScriptedResponsesModel(Model):
    """A scripted model: calls ``tool_name`` with ``tool_args`` unless the last input item is a tool
    output, then answers ``final_text``. Restart-safe (the turn comes from the input). Instant, or
    (W1-300ms) each turn waits ``turn_s`` first (bench_common.model_wait, logged to ``waits``)."""

    def __init__(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        expect_in_result: str,
        turn_s: float = 0.0,
        waits: str | None = None,
    ) -> None:
        self.tool_name = tool_name
        self.tool_args = json.dumps(tool_args)
        self.expect_in_result = expect_in_result  # in the tool's output when it ran (not a rejection)
        self.final_text = FINAL_TEXT
        self.turn_s = turn_s
        self.waits = waits

    def _reply(self, input: Any, tools: Any) -> Any:
        """The one output item of this turn: the tool call, or the final text once the tool ran."""
        names = [t.name for t in tools]
        assert self.tool_name in names, f"tool {self.tool_name!r} not offered (offered: {names})"
        last = input[-1] if isinstance(input, list) and input else None
        kind = last.get("type") if isinstance(last, dict) else getattr(last, "type", None)
        if kind == "function_call_output":
            assert self.expect_in_result in str(last.get("output")), last
            text = ResponseOutputText(type="output_text", text=self.final_text, annotations=[])
            return ResponseOutputMessage(
                id="msg-1", type="message", role="assistant", status="completed", content=[text]
            )
        return ResponseFunctionToolCall(
            type="function_call", id="fc-1", call_id="call-1", name=self.tool_name, arguments=self.tool_args
        )

    # Both calls take the SDK's Model arguments; the turn needs only the input and the tools offered.
    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *rest: Any, **kw: Any
    ) -> ModelResponse:
        if self.turn_s:
            await model_wait(self.turn_s, self.waits)
        return ModelResponse(output=[self._reply(input, tools)], usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *rest: Any, **kw: Any
    ) -> Any:
        """The same turn as Responses API stream events: the text as one delta, the item, completion."""
        if self.turn_s:
            await model_wait(self.turn_s, self.waits)
        item = self._reply(input, tools)
        events: list[Any] = []
        if isinstance(item, ResponseOutputMessage):
            events.append(
                ResponseTextDeltaEvent(
                    type="response.output_text.delta",
                    content_index=0,
                    delta=self.final_text,
                    item_id=item.id,
                    logprobs=[],
                    output_index=0,
                    sequence_number=0,
                )
            )
        events.append(
            ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=item, output_index=0, sequence_number=len(events)
            )
        )
        response = Response(
            id="resp-1",
            created_at=0.0,
            model="scripted",
            object="response",
            output=[item],
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
        )
        events.append(
            ResponseCompletedEvent(type="response.completed", response=response, sequence_number=len(events))
        )
        for event in events:
            yield event


@function_tool(needs_approval=True)
def delete_record(id: str) -> str:
    """Delete a record"""
    return json.dumps({"deleted": id})


class OpenAIAgentsSystem(JsonFileSystem):
    family = "OpenAI Agents SDK"
    prefix = "openai-agents"

    def __init__(self, workdir: Path, env: dict[str, Any], mode: str) -> None:
        super().__init__(workdir, env, mode)
        where = "RunResult kept in memory" if mode == "memory" else "RunState JSON file per paused run"
        self.label = f"OpenAI Agents SDK {version('openai-agents')} ({where})"

    async def open(self) -> None:
        await super().open()
        self.agent = Agent(
            name="records",
            instructions="You manage records.",
            model=ScriptedResponsesModel(
                "delete_record", {"id": "abc-123"}, '"deleted"', self.model_turn_s, self.model_waits
            ),
            tools=[delete_record],
        )
        self.supervisor = Agent(
            name="supervisor",
            instructions="Delegate record work to the records agent.",
            model=ScriptedResponsesModel("agent_records", {"input": PROMPT}, FINAL_TEXT),
            tools=[self.agent.as_tool(tool_name="agent_records", tool_description="The records agent.")],
        )

    async def _pause(self, agent: Agent[Any], prompt: str, streamed: bool = False) -> Any:
        if streamed:  # read the stream to its end: the run stops there, paused
            result: Any = Runner.run_streamed(agent, prompt)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, prompt)
        assert result.interruptions, f"run did not pause: {result.final_output!r}"
        return self.keep(result, lambda kept: kept.to_state().to_string())

    async def _approve(self, agent: Agent[Any], token: Any, streamed: bool = False) -> None:
        if self.mode == "memory":
            state = token.to_state()
        else:
            state = await RunState.from_string(agent, token.read_text())
        for item in state.get_interruptions():
            state.approve(item)
        if streamed:
            result: Any = Runner.run_streamed(agent, state)
            text = [
                event.data.delta
                async for event in result.stream_events()
                if event.type == "raw_response_event" and event.data.type == "response.output_text.delta"
            ]
            assert text and text[-1] == FINAL_TEXT, text
        else:
            result = await Runner.run(agent, state)
        assert not result.interruptions and result.final_output == FINAL_TEXT, result.final_output
        self.forget(token)

    async def _cycle(self, agent: Agent[Any]) -> None:
        streamed = self.api == "stream"
        await self._approve(agent, await self._pause(agent, PROMPT, streamed), streamed)

    async def pause(self, i: int) -> Any:
        return await self._pause(self.agent, f"delete record {i}")

    async def approve(self, token: Any) -> None:
        await self._approve(self.agent, token)

    async def w1(self) -> None:
        await self._cycle(self.agent)

    async def w2(self) -> None:
        await self._cycle(self.supervisor)


def make(key: str, workdir: Path, env: dict[str, Any]) -> System:
    return OpenAIAgentsSystem(workdir, env, key.rsplit("-", 1)[1])
