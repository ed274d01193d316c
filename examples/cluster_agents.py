"""The agents of the cluster job (``examples/cluster_job.py``) and of whoever decides its pauses later.

A paused run is a snapshot in the store; any process that builds the same agents (same ids, same tools)
over the same store can decide it. So the job and the deciding process both build them here.

``ops`` (the supervisor) hands each task to ``records`` (a subagent) whose ``delete_record`` tool needs a
person's approval. The models are scripted functions of the conversation (no API key); put a real model
in their place with ``model="openai/gpt-4o-mini"``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel

from troupe import Agent, RedisStore, create_tool
from troupe.testing import FunctionModel, text, tool_call

REDIS_URL_ENV = "TROUPE_REDIS_URL"
REDIS_PREFIX_ENV = "TROUPE_REDIS_PREFIX"


class RecordId(BaseModel):
    id: str


def _delete_record(record: RecordId, ctx: Any) -> dict[str, str]:
    return {"deleted": record.id, "by": f"pid {os.getpid()}"}


delete_record = create_tool(
    "delete_record", "Delete a record by id", RecordId, _delete_record, require_approval=True
)


def _records_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """The subagent: delete the record its task names, then say how that went."""
    last = messages[-1]
    if last["role"] == "tool":
        return text(f"delete_record -> {last['content']}")
    found = re.search(r"rec-\w+", str(last["content"]))
    if found is None:
        return text("No record id in the task.")
    return tool_call("delete_record", {"id": found.group()}, id=f"delete-{found.group()}")


def _ops_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """The supervisor: hand the task to the records agent, then report its answer."""
    last = messages[-1]
    if last["role"] == "tool":
        return text(f"Records agent says: {last['content']}")
    return tool_call("agent-records", {"prompt": last["content"]}, id="ask-records")


def build_ops() -> Agent:
    records = Agent(
        "records",
        description="Deletes records; every deletion needs approval",
        model=FunctionModel(_records_turn),
        tools=[delete_record],
    )
    return Agent(
        "ops", instructions="You run operations.", model=FunctionModel(_ops_turn), agents={"records": records}
    )


def redis_store() -> RedisStore:
    """The store both sides share: ``TROUPE_REDIS_URL`` (and ``TROUPE_REDIS_PREFIX``, default ``troupe:``)."""
    url = os.environ.get(REDIS_URL_ENV)
    if not url:
        raise SystemExit(f"set {REDIS_URL_ENV}, e.g. redis://127.0.0.1:6399/0")
    return RedisStore.from_url(url, prefix=os.environ.get(REDIS_PREFIX_ENV, "troupe:"))
