"""Model output is hostile input: what a model emits is checked where its turn enters the run, over the
real HTTP server (uvicorn on loopback). A call whose arguments cannot be stored is refused with a tool
error the model reads; text that cannot be stored ends the run with a clear error; nothing poisoned is
stored, and a run stored before these checks is listed with a placeholder instead of breaking listings."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import RecordInput
from http_server import ADMIN, KEYS
from inbox_agents import inbox_agents
from troupe.core.vocabulary.errors import ModelError
from troupe.core.vocabulary.state import CallStatus, Pause, RunState, ToolCallState
from troupe.core.vocabulary.storable import MAX_TEXT_CHARS

from troupe import Agent, MemoryStore, Runtime, SqliteStore, create_tool
from troupe.testing import CallLog, FunctionModel, ScriptedModel, text, tool_call


def nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        node["a"] = {}
        node = node["a"]
    return root


def hostile_agents(calls: CallLog) -> list[Agent]:
    def record(inp: RecordInput, ctx: Any) -> dict[str, Any]:
        calls.record("record", id=inp.id)
        return {"ok": True}

    tool = create_tool("record", "Record something", RecordInput, record, require_approval=True)

    def emitting(args: Any) -> FunctionModel:
        def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            told = [m["content"] for m in messages if m["role"] == "tool"]
            return text("told: " + " | ".join(told)) if told else tool_call("record", args, id="h1")

        return FunctionModel(turn)

    return [
        *inbox_agents(calls),
        Agent("deep", model=emitting({"id": nested(1000)}), tools=[tool]),
        Agent("surrogate", model=emitting({"id": "x\ud800y"}), tools=[tool]),
        Agent("mumbler", model=FunctionModel(lambda m, t: text("fine so far \udfff")), tools=[tool]),
    ]


@pytest.fixture
def api(http_server, tmp_path: Path, calls: CallLog):
    def build() -> Runtime:
        return Runtime(hostile_agents(calls), storage=SqliteStore(tmp_path / "m.db"), executor="local")

    server = http_server(build, keys=KEYS)
    with httpx.Client(base_url=server.url + "/api", headers=ADMIN, timeout=60) as client:
        yield client


def generate(api: httpx.Client, agent: str, message: str = "go") -> httpx.Response:
    return api.post(f"/agents/{agent}/generate", json={"messages": message})


def test_unstorable_arguments_are_refused_to_the_model_and_the_inbox_keeps_listing(api, calls):
    waiting = generate(api, "ops", "rec-1").json()["runId"]

    for agent, why in (("deep", "nested deeper than 64 levels"), ("surrogate", "not valid Unicode")):
        done = generate(api, agent)
        assert done.status_code == 200, done.text
        result = done.json()
        assert result["finishReason"] == "stop", "the run went on: the model was told, nothing paused"
        assert "the arguments for tool 'record' were refused" in result["text"] and why in result["text"]
        assert api.get(f"/agents/{agent}/suspended-runs").json()["total"] == 0
    assert calls.count("record") == 0

    inbox = api.get("/inbox")
    assert inbox.status_code == 200 and [r["runId"] for r in inbox.json()["runs"]] == [waiting]


def test_text_that_cannot_be_stored_ends_the_run_with_a_clear_error(api):
    failed = generate(api, "mumbler")
    assert failed.status_code == 502, failed.text
    assert failed.json()["code"] == "MODEL_ERROR"
    assert "the model's text cannot be stored: not valid Unicode" in failed.text
    assert api.get("/inbox").status_code == 200


def test_a_stored_run_that_cannot_be_rendered_is_listed_with_a_placeholder(api, tmp_path):
    waiting = generate(api, "ops", "rec-2").json()["runId"]
    # As a run checkpointed before model output was checked: 250 deep was stored then.
    pause = Pause(
        kind="approval",
        tool_name="record",
        args={"id": nested(250)},
        agent_path=["deep"],
        fingerprint="f" * 32,
        paused_at=datetime.now(UTC),
        seq=1,
    )
    call = ToolCallState(
        tool_call_id="old-1",
        tool_name="record",
        args={},
        status=CallStatus.AWAITING_APPROVAL,
        requires_approval=True,
        pauses=[pause],
    )
    poisoned = RunState(run_id="old-run", agent_id="deep", status="suspended", calls=[call])
    asyncio.run(SqliteStore(tmp_path / "m.db").create_run(poisoned))

    for path in ("/inbox", "/agents/deep/suspended-runs"):
        listing = api.get(path)
        assert listing.status_code == 200, (path, listing.text)
        runs = {r["runId"]: r for r in listing.json()["runs"]}
        shown = runs["old-run"]["toolCalls"][0]["args"]
        assert shown == {"unrenderable": "cannot be shown: nested deeper than 64 levels"}, path
    assert waiting in {r["runId"] for r in api.get("/inbox").json()["runs"]}
    # It can still be decided (declined) by its ids, which clears it.
    declined = api.post(
        "/agents/deep/decline-tool-call-generate", json={"runId": "old-run", "toolCallId": "old-1"}
    )
    assert declined.status_code == 200, declined.text


@pytest.mark.parametrize(
    ("returned", "why"),
    [(10**5000, "a number has too many digits"), (None, "nested deeper than 64 levels")],
    ids=["huge-integer", "deep-nesting"],
)
async def test_a_result_that_cannot_be_stored_reaches_the_model_as_a_tool_error(tmp_path, returned, why):
    """The approved tool ran: what it returned must not fail (and delete) the run after the fact. The
    model is told the result could not be kept, and the run goes on."""
    calls = CallLog(tmp_path / "calls.jsonl")
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]

    def record(inp: RecordInput, ctx: Any) -> Any:
        calls.record("record", id=inp.id)
        return returned if returned is not None else deep

    tool = create_tool("record", "Record something", RecordInput, record, require_approval=True)

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        told = [m["content"] for m in messages if m["role"] == "tool"]
        return text("told: " + " | ".join(told)) if told else tool_call("record", {"id": "r1"}, id="h1")

    agent = Agent("ops", model=FunctionModel(turn), tools=[tool])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        paused = await agent.generate("record r1")
        done = await agent.approve_tool_call_generate(run_id=paused.run_id)
    finally:
        await runtime.shutdown()
    assert done.finish_reason == "stop" and calls.count("record") == 1
    assert "the tool ran, but its result cannot be kept" in done.text and why in done.text


async def answer_of(model: ScriptedModel) -> str:
    agent = Agent("talker", model=model)
    runtime = Runtime([agent], storage=MemoryStore(), executor="local")
    try:
        return (await agent.generate("talk")).text
    finally:
        await runtime.shutdown()


async def test_the_turns_text_is_refused_one_character_past_the_limit_however_it_is_cut():
    """The limit holds for the whole turn, not for each delta: two deltas of half the limit each fit,
    one character more in the second does not."""
    half = MAX_TEXT_CHARS // 2
    first = "x" * (half - 1) + " "  # the scripted model streams one delta per word

    assert len(await answer_of(ScriptedModel([text(first + "y" * half)]))) == MAX_TEXT_CHARS
    with pytest.raises(ModelError, match=f"longer than {half} characters \\({half + 1}\\)"):
        await answer_of(ScriptedModel([text(first + "y" * (half + 1))]))


@pytest.mark.timeout(60)
async def test_checking_the_turns_text_costs_the_same_for_every_delta():
    """A model may stream its text a character or two at a time. 200,000 deltas take about two seconds
    here when each delta's check costs the same; summing the earlier deltas afresh at each one (as
    before) held the event loop for about ten minutes (23 s for 40,000), which the timeout fails."""
    said = await answer_of(ScriptedModel([text("a " * 200_000)]))

    assert len(said) == 400_000
