"""LangGraph under the shared workloads.

The agent is a StateGraph with a model node and a ToolNode (the ReAct loop the prebuilt agent builds),
the model a scripted chat model bound to the tools with ``bind_tools``. The gated tool pauses with
``interrupt()`` (LangGraph's human-in-the-loop) and the run resumes with ``Command(resume=...)`` on the
same thread. Checkpointers: ``InMemorySaver`` and ``AsyncSqliteSaver`` on a file.

W1/W2 go through the streaming API: ``graph.astream(..., stream_mode=["messages", "updates"])`` read to
its end (the interrupt arrives as an ``__interrupt__`` update), the resume ``Command(resume=...)``
through ``astream`` too, its text read from the ``messages`` stream (the model streams its turn as a
chunk). W3/W4 and ``--api generate`` use ``ainvoke``. LangGraph's own ``durability`` default
("async": a checkpoint is written in the background while the next step runs) is kept.

W2: the supervisor graph's tool ``agent_records`` invokes the subagent graph (compiled without a
checkpointer of its own, so it uses the parent's); the subagent tool's ``interrupt()`` surfaces on the
supervisor's run and the resume goes to the supervisor's thread.
W4: a fresh process opens the same SQLite file, finds the threads with ``checkpointer.alist(None)``,
keeps those whose state has a pending interrupt (``aget_state``), and resumes each.
"""

from __future__ import annotations

import itertools
import json
from contextlib import AsyncExitStack
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench_common import model_wait, path_bytes
from harness import FINAL_TEXT, PROMPT, System
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

# What a UI streams: the model's tokens, and the node updates (an interrupt arrives as one).
STREAM_MODES = ["messages", "updates"]


class ScriptedChatModel(BaseChatModel):
    """A scripted chat model: calls ``tool_name`` with ``tool_args`` unless the last message is that
    tool's result, then answers ``final_text``. It picks its turn from the conversation, so it is
    restart-safe, and it checks that the tool was bound (``bind_tools``) as a real model needs. Instant,
    or (W1-300ms) each async turn waits ``turn_s`` first (bench_common.model_wait)."""

    tool_name: str
    tool_args: dict[str, Any]
    expect_in_result: str  # what the tool's result holds when it ran (not a decline or an error)
    final_text: str = FINAL_TEXT
    turn_s: float = 0.0
    waits: str | None = None  # the file the waits are logged to

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _turn(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None) -> ChatResult:
        names = [t["function"]["name"] for t in tools or []]
        assert self.tool_name in names, f"tool {self.tool_name!r} not bound (bound: {names})"
        if isinstance(messages[-1], ToolMessage):
            assert self.expect_in_result in str(messages[-1].content), messages[-1]
            message = AIMessage(content=self.final_text)
        else:
            call = {"name": self.tool_name, "args": self.tool_args, "id": "call-1", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        return self._turn(messages, kw.get("tools"))

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        if self.turn_s:
            await model_wait(self.turn_s, self.waits)
        return self._turn(messages, kw.get("tools"))

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        """The same turn streamed as one chunk (LangGraph's "messages" stream mode makes the model
        stream; langchain-core reports the chunk to the stream's callback)."""
        if self.turn_s:
            await model_wait(self.turn_s, self.waits)
        message = self._turn(messages, kw.get("tools")).generations[0].message
        calls = [
            {
                "name": c["name"],
                "args": json.dumps(c["args"]),
                "id": c["id"],
                "index": 0,
                "type": "tool_call_chunk",
            }
            for c in getattr(message, "tool_calls", [])
        ]
        yield ChatGenerationChunk(message=AIMessageChunk(content=message.content, tool_call_chunks=calls))


@tool
def delete_record(id: str) -> str:
    """Delete a record"""
    decision = interrupt({"tool_name": "delete_record", "args": {"id": id}})
    if decision.get("approved"):
        return json.dumps({"deleted": id})
    return "Tool call was not approved by the user"


def agent_graph(model: ScriptedChatModel, tools: list[Any], checkpointer: Any = None) -> Any:
    bound = model.bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)


class LangGraphSystem(System):
    family = "LangGraph"

    def __init__(self, workdir: Path, env: dict[str, Any], saver: str) -> None:
        super().__init__(workdir, env)
        self.saver_kind = saver
        self.key = f"langgraph-{saver}"
        name = "InMemorySaver" if saver == "memory" else "AsyncSqliteSaver"
        self.label = f"LangGraph {version('langgraph')} + {name}"
        self.durable = saver == "sqlite"
        where = "SQLite WAL, synchronous=FULL" if self.durable else "in memory"
        self.durability = f"{where}; durability=async"
        self.db = workdir / f"{self.key}-{env['store_tag']}.db"
        self.threads = itertools.count()
        self.stack = AsyncExitStack()

    async def open(self) -> None:
        if self.saver_kind == "memory":
            self.saver: Any = InMemorySaver()
        else:
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            self.saver = await self.stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(self.db)))
        model = ScriptedChatModel(
            tool_name="delete_record",
            tool_args={"id": "abc-123"},
            expect_in_result='"deleted"',
            turn_s=self.model_turn_s,
            waits=self.model_waits,
        )
        self.graph = agent_graph(model, [delete_record], self.saver)

        subagent = agent_graph(model, [delete_record])  # runs under the supervisor's checkpointer

        @tool("agent_records")
        async def agent_records(prompt: str) -> str:
            """Delegate a task to the records agent."""
            out = await subagent.ainvoke({"messages": [HumanMessage(prompt)]})
            return str(out["messages"][-1].content)

        supervisor_model = ScriptedChatModel(
            tool_name="agent_records", tool_args={"prompt": PROMPT}, expect_in_result=FINAL_TEXT
        )
        self.supervisor = agent_graph(supervisor_model, [agent_records], self.saver)

    async def close(self) -> None:
        await self.stack.aclose()

    def _config(self, thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}}

    async def _pause(self, graph: Any, i: int) -> str:
        thread = f"{self.env['nonce']}-{self.env['store_tag']}-{next(self.threads)}"
        out = await graph.ainvoke({"messages": [HumanMessage(f"delete record {i}")]}, self._config(thread))
        assert out.get("__interrupt__"), f"run did not pause: {list(out)}"
        return thread

    async def _approve(self, graph: Any, thread: str) -> None:
        out = await graph.ainvoke(Command(resume={"approved": True}), self._config(thread))
        assert out["messages"][-1].content == FINAL_TEXT, out["messages"][-1]

    async def _stream_cycle(self, graph: Any) -> None:
        """W1/W2 streamed: astream to the interrupt update, then the resume streamed to its text."""
        thread = f"{self.env['nonce']}-{self.env['store_tag']}-{next(self.threads)}"
        start = {"messages": [HumanMessage(PROMPT)]}
        interrupts = [
            data["__interrupt__"]
            async for mode, data in graph.astream(start, self._config(thread), stream_mode=STREAM_MODES)
            if mode == "updates" and "__interrupt__" in data
        ]
        assert interrupts, "run did not pause"
        resume = Command(resume={"approved": True})
        text = []
        final = None
        async for mode, data in graph.astream(resume, self._config(thread), stream_mode=STREAM_MODES):
            if mode == "messages" and isinstance(data[0], AIMessageChunk):
                text.append(data[0].content)
            elif mode == "updates" and "model" in data:
                final = data["model"]["messages"][-1].content
        # The supervisor's stream carries the subagent's tokens too: the run's own answer comes last.
        assert final == FINAL_TEXT and "".join(text).endswith(FINAL_TEXT), (final, text)

    async def w1(self) -> None:
        if self.api == "generate":
            return await super().w1()
        await self._stream_cycle(self.graph)

    async def pause(self, i: int) -> Any:
        return await self._pause(self.graph, i)

    async def approve(self, token: Any) -> None:
        await self._approve(self.graph, token)

    async def w2(self) -> None:
        if self.api == "generate":
            return await self._approve(self.supervisor, await self._pause(self.supervisor, -1))
        await self._stream_cycle(self.supervisor)

    async def list_paused(self) -> list[Any]:
        if not self.durable:
            return await super().list_paused()
        threads: dict[str, None] = {}
        async for checkpoint in self.saver.alist(None):
            threads[checkpoint.config["configurable"]["thread_id"]] = None
        paused = []
        for thread in threads:
            state = await self.graph.aget_state(self._config(thread))
            if state.interrupts:
                paused.append(thread)
        return paused

    def store_bytes(self) -> int | None:
        if self.saver_kind == "sqlite":
            return path_bytes(self.db, f"{self.db}-wal", f"{self.db}-shm")
        return None


def make(key: str, workdir: Path, env: dict[str, Any]) -> System:
    return LangGraphSystem(workdir, env, key.split("-", 1)[1])
