"""An approval cycle over A2A next to the same cycle over the native HTTP route, and a three-hop
bubble-and-answer through a remote A2A agent: median and p99 over N cycles each.

- native HTTP: ``POST /api/agents/ops/generate`` (the run pauses) then ``approve-tool-call-generate``;
- A2A: the official a2a-sdk client (blocking sends) against ``/a2a/ops``: ``SendMessage`` (the task goes
  ``input-required``) then ``SendMessage`` on the task with ``{"decisions": [{"approved": true}]}``;
- three hops: a supervisor in this process (``desk``) delegates to ``A2AAgent`` -> a Troupe server's
  ``mid`` -> its subagent ``leaf``, whose gated tool pauses: the pause bubbles up to ``desk``
  (``generate`` returns suspended) and the approval goes back down (``approve_tool_call_generate``).

Every server is uvicorn on 127.0.0.1 (a free port) in a thread of this process, MemoryStore, an instant
scripted model, warm-up cycles first.

    python bench/a2a_cycle.py [--cycles 200] [--warmup 20] [--executor local|ray]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import uvicorn
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, TaskState
from bench_common import percentile
from pydantic import BaseModel
from troupe.api.app import create_app

from troupe import A2AAgent, Agent, MemoryStore, Runtime, create_tool
from troupe.testing import FunctionModel, text, tool_call

KEY = "bench-key"
KEYS = {KEY: {"name": "bench", "resources": ["r1"]}}


class Record(BaseModel):
    id: str


def gated(name: str) -> Any:
    return create_tool(
        name, "Delete a record", Record, lambda inp, ctx: {"deleted": inp.id}, require_approval=True
    )


def calling(name: str, args: dict[str, Any], call_id: str) -> FunctionModel:
    """Makes one call, then answers with what it was told."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        told = [m for m in messages if m["role"] == "tool"]
        return text(str(told[-1]["content"])) if told else tool_call(name, args, id=call_id)

    return FunctionModel(turn)


def served_agents() -> list[Agent]:
    leaf = Agent(
        "leaf", model=calling("delete_record", {"id": "r-1"}, "c-leaf"), tools=[gated("delete_record")]
    )
    mid = Agent("mid", model=calling("agent-leaf", {"prompt": "delete r-1"}, "c-mid"), agents={"leaf": leaf})
    ops = Agent("ops", model=calling("delete_record", {"id": "r-1"}, "c1"), tools=[gated("delete_record")])
    return [ops, mid]


class Server:
    """``create_app`` over ``runtime`` on uvicorn, in a thread with its own event loop."""

    def __init__(self, build: Callable[[], Runtime]) -> None:
        self.build = build
        self.port = 0
        self.ready = threading.Event()
        self.server: uvicorn.Server | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self.main()), daemon=True)

    async def main(self) -> None:
        runtime = self.build()
        config = uvicorn.Config(create_app(runtime, keys=KEYS), host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        serving = asyncio.get_running_loop().create_task(self.server.serve())
        while not self.server.started:  # noqa: ASYNC110 - uvicorn tells it by this flag alone
            await asyncio.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.ready.set()
        await serving
        await runtime.shutdown()

    def __enter__(self) -> str:
        self.thread.start()
        self.ready.wait(60)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.should_exit = True
        self.thread.join(30)


async def http_cycle(http: httpx.AsyncClient) -> None:
    paused = (await http.post("/api/agents/ops/generate", json={"messages": "go", "resourceId": "r1"})).json()
    assert paused["finishReason"] == "suspended", paused
    body = {"runId": paused["runId"], "toolCallId": "c1"}
    done = (await http.post("/api/agents/ops/approve-tool-call-generate", json=body)).json()
    assert done["finishReason"] == "stop", done


def a2a_cycle(client: Any) -> Callable[[], Awaitable[None]]:
    async def send(message: Message) -> Any:
        last = None
        async for event in client.send_message(SendMessageRequest(message=message)):
            last = event.task
        return last

    async def cycle() -> None:
        ask = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[new_text_part("go")])
        task = await send(ask)
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
        answer = {"decisions": [{"toolCallId": "c1", "approved": True}]}
        reply = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, task_id=task.id)
        reply.parts.append(new_data_part(answer))
        done = await send(reply)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done

    return cycle


def three_hops(desk: Agent) -> Callable[[], Awaitable[None]]:
    async def cycle() -> None:
        paused = await desk.generate("go", resource_id="r1")
        assert paused.finish_reason == "suspended", paused
        done = await desk.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1")
        assert done.finish_reason == "stop", done

    return cycle


async def timed(cycle: Callable[[], Awaitable[None]], cycles: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await cycle()
    times = []
    for _ in range(cycles):
        began = time.perf_counter()
        await cycle()
        times.append((time.perf_counter() - began) * 1000)
    return times


async def measure(url: str, executor: str, cycles: int, warmup: int) -> dict[str, list[float]]:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, f"{url}/a2a/ops").get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        times = {
            "http": await timed(lambda: http_cycle(http), cycles, warmup),
            "a2a": await timed(a2a_cycle(client), cycles, warmup),
        }
    remote = A2AAgent("vendor", card_url=f"{url}/a2a/mid", bearer_token=KEY)
    desk = Agent(
        "desk", model=calling("agent-vendor", {"prompt": "delete r-1"}, "d1"), agents={"vendor": remote}
    )
    runtime = Runtime([desk], storage=MemoryStore(), executor=executor)  # type: ignore[arg-type]
    try:
        times["three-hops"] = await timed(three_hops(desk), cycles, warmup)
    finally:
        await runtime.shutdown()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    args = parser.parse_args()

    def build() -> Runtime:
        return Runtime(served_agents(), storage=MemoryStore(), executor=args.executor)  # type: ignore[arg-type]

    with Server(build) as url:
        times = asyncio.run(measure(url, args.executor, args.cycles, args.warmup))
    print(f"approval cycle, executor={args.executor}, {args.cycles} cycles after {args.warmup} warm-up")
    print(f"{'cycle':<52}{'median ms':>12}{'p99 ms':>12}")
    rows = (
        ("native HTTP (generate, approve-tool-call-generate)", "http"),
        ("A2A (a2a-sdk client, SendMessage twice)", "a2a"),
        ("three hops: desk > A2A > mid > leaf, and back", "three-hops"),
    )
    for label, key in rows:
        values = times[key]
        print(f"{label:<52}{statistics.median(values):>12.2f}{percentile(values, 99):>12.2f}")


if __name__ == "__main__":
    main()
