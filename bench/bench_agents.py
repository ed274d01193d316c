"""The agents every benchmark drives: restart-safe scripted models (instant, or waiting a set time per turn
for W1-300ms) and one gated tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_common import model_wait
from pydantic import BaseModel
from troupe.core.vocabulary.store import Store

from troupe import Agent, MemoryStore, SqliteStore, create_tool
from troupe.testing import FunctionModel, text, tool_call


class RecordId(BaseModel):
    id: str


def build_agent(turn_s: float = 0.0, waits: str | None = None) -> Agent:
    """The W1 agent. With ``turn_s``, its model waits that long per turn (bench_common.model_wait,
    logging each wait to ``waits``), in whichever process runs the agent (the driver, or its actor)."""
    tool = create_tool(
        "delete_record",
        "Delete a record",
        RecordId,
        lambda inp, ctx: {"deleted": inp.id},
        require_approval=True,
    )

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            # The tool ran (approved), not a decline or an error message.
            assert '"deleted"' in messages[-1]["content"], messages[-1]
            return text("Deleted.")
        return tool_call("delete_record", {"id": "abc-123"}, id="call-1")

    async def slow_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        await model_wait(turn_s, waits)
        return turn(messages, tools)

    return Agent("bench", model=FunctionModel(slow_turn if turn_s else turn), tools=[tool])


def build_supervisor() -> Agent:
    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            assert "Deleted." in messages[-1]["content"], messages[-1]  # the subagent's answer
            return text("Deleted.")
        return tool_call("agent-records", {"prompt": "delete abc-123"}, id="d-1")

    return Agent("bench-supervisor", model=FunctionModel(turn), agents={"records": build_agent()})


def make_store(
    kind: str, sqlite_path: Path, redis_url: str | None = None, prefix: str = "bench:", sync: str = "NORMAL"
) -> Store:
    """The store of a Troupe configuration: "memory", "sqlite" (at ``sqlite_path``, with SQLite's
    ``synchronous`` = ``sync``) or "redis" (its durability is the server's: see private_redis)."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(sqlite_path, synchronous="FULL" if sync.upper() == "FULL" else "NORMAL")
    if redis_url is None:
        raise SystemExit("the Redis configuration needs a redis-server (bench_common.private_redis)")
    # Here, not at the top: the agents' actors import this module for its tools, and a SQLite or
    # in-memory configuration's actors should not carry redis-py, as Troupe's own do not.
    from troupe import RedisStore

    return RedisStore.from_url(redis_url, prefix=prefix)
