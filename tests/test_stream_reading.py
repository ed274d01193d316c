"""An ``AgentStream`` of a host in this process is read by its readers, in their own tasks (issue 42: two
hand-offs between tasks fewer per batch), and that changes nothing they see: two readers at once each
see every chunk once and in order, and a reader cancelled while it waits for the next batch loses
nothing: the next reader (or ``result()``) gets what it would have. The run's tool is held by a gate
the test opens; the moment a reader waits for a batch is looked for, not waited out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from helpers import chunks_of, types_of
from pydantic import BaseModel

from troupe import Agent, MemoryStore, Runtime, create_tool
from troupe.testing import FunctionModel, text, tool_call


class Step(BaseModel):
    n: int


def gated_agent(gate: asyncio.Event) -> Agent:
    """One tool call (no approval) whose tool waits for ``gate``, then a last turn's text."""

    async def step(inp: Step, ctx: Any) -> dict[str, Any]:
        await gate.wait()
        return {"done": inp.n}

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return text("finished")
        return tool_call("step", {"n": 1}, id="s1")

    return Agent("stepper", model=FunctionModel(turn), tools=[create_tool("step", "A step", Step, step)])


async def _until(predicate: Callable[[], Any]) -> None:
    async with asyncio.timeout(30):
        while not predicate():
            await asyncio.sleep(0.005)


async def _read(chunks: AsyncIterator[Any], into: list[Any]) -> None:
    async for chunk in chunks:
        into.append(chunk)


@pytest.fixture
async def gated() -> AsyncIterator[tuple[Agent, asyncio.Event]]:
    gate = asyncio.Event()
    agent = gated_agent(gate)
    runtime = Runtime([agent], storage=MemoryStore(), executor="local")
    try:
        yield agent, gate
    finally:
        gate.set()
        await runtime.shutdown()


async def test_a_stream_of_a_host_in_this_process_has_no_task_of_its_own(gated: Any) -> None:
    agent, gate = gated
    gate.set()
    await agent.generate("warm up")  # the host's own tasks (its lease) start with its first run
    gate.clear()
    before = asyncio.all_tasks()
    stream = await agent.stream("go")
    started = asyncio.all_tasks() - before
    # The host's task that drives the operation, and nothing that reads it.
    assert [t.get_coro().__qualname__ for t in started] == ["Operation.execute"]  # type: ignore[union-attr]
    gate.set()
    assert (await stream.result()).text == "finished"


async def test_a_reader_cancelled_while_it_waits_for_a_batch_loses_nothing(gated: Any) -> None:
    agent, gate = gated
    stream = await agent.stream("go")
    seen: list[Any] = []
    reader = asyncio.create_task(_read(stream.full_stream, seen))
    # The reader has every chunk so far and waits, inside its pull, for the tool's result.
    await _until(lambda: gate._waiters and stream._pulling and len(seen) == len(stream.chunks))  # type: ignore[attr-defined]
    assert "tool-result" not in types_of(seen)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    gate.set()
    result = await stream.result()
    assert result.text == "finished"
    assert [r["result"] for r in result.tool_results] == [{"done": 1}]
    replayed = await chunks_of(stream)
    assert replayed[: len(seen)] == seen
    kinds = types_of(replayed)
    assert kinds.count("tool-result") == 1 and kinds[-1] == "finish", kinds


async def test_two_readers_at_once_each_see_every_chunk_once_in_order(gated: Any) -> None:
    agent, gate = gated
    stream = await agent.stream("go")
    full: list[Any] = []
    texts: list[Any] = []
    readers = [
        asyncio.create_task(_read(stream.full_stream, full)),
        asyncio.create_task(_read(stream.text_stream, texts)),
    ]
    # One reader pulls the next batch, the other waits for it; both have everything so far.
    await _until(lambda: gate._waiters and stream._pulling and len(full) == len(stream.chunks))  # type: ignore[attr-defined]
    gate.set()
    await asyncio.gather(*readers)
    assert full == stream.chunks
    assert [c.type for c in full].count("finish") == 1
    assert len({id(c) for c in full}) == len(full)
    assert "".join(texts) == "finished" == (await stream.result()).text
