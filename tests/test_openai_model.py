"""OpenAIModel: a real ``openai`` client streaming from a local OpenAI-compatible server over HTTP.

The server (tests/fake_openai.py) cuts text into several deltas and tool-call arguments into fragments
interleaved across calls, so everything the model yields was put back together from the stream.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fake_openai import FakeOpenAI, call, reply, serving
from helpers import chunks_of, delete_tool, types_of
from troupe.core.models.names import resolve_model
from troupe.core.vocabulary.errors import ModelError
from troupe.core.vocabulary.model import ModelEvent, ModelRequest, TextDelta, ToolCallPart, TurnEnd, Usage

from troupe import Agent, OpenAIModel, Runtime, SqliteStore

DELETE_SPEC = {
    "type": "function",
    "function": {
        "name": "delete_record",
        "description": "Delete a record by id",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    },
}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    with serving(fake):
        yield fake


def model_for(server: FakeOpenAI, **options: Any) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=server.base_url, api_key="sk-test", **options)


async def one_turn(
    model: OpenAIModel, messages: Any = None, tools: Any = None, **request: Any
) -> list[ModelEvent]:
    messages = messages or [{"role": "user", "content": "hi"}]
    return [e async for e in model.stream_turn(ModelRequest(messages, tools or [], **request))]


def calls_in(events: list[ModelEvent]) -> list[ToolCallPart]:
    return [e for e in events if isinstance(e, ToolCallPart)]


# ---- one model turn --------------------------------------------------------------------------------


async def test_a_text_turn_streams_several_deltas_then_ends_with_the_servers_usage(server):
    server.play(reply("Hello from a real HTTP stream", usage=(12, 7)))

    events = await one_turn(model_for(server))

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1, "the server sent the text in pieces and each piece is streamed on"
    assert "".join(deltas) == "Hello from a real HTTP stream"
    assert events[-1] == TurnEnd("stop", Usage(input_tokens=12, output_tokens=7))
    assert sum(isinstance(e, TurnEnd) for e in events) == 1
    assert calls_in(events) == []


async def test_parallel_tool_calls_are_rebuilt_by_index_from_interleaved_fragments(server):
    server.play(
        reply(
            calls=[
                call("delete_record", {"id": "abc-123", "reason": "duplicate entry"}, id="call_a"),
                call("pay", {"to": "bob", "amount": 5}, id="call_b"),
            ]
        )
    )

    events = await one_turn(model_for(server), tools=[DELETE_SPEC])

    assert calls_in(events) == [
        ToolCallPart(id="call_a", name="delete_record", args={"id": "abc-123", "reason": "duplicate entry"}),
        ToolCallPart(id="call_b", name="pay", args={"to": "bob", "amount": 5}),
    ]
    assert events[-1].finish_reason == "tool-calls"
    assert not any(isinstance(e, TextDelta) for e in events)


@pytest.mark.parametrize("raw", ['{"id": "abc-', '["abc-123"]'], ids=["malformed", "not-an-object"])
async def test_arguments_that_are_not_a_json_object_come_back_as_the_raw_text(server, raw):
    server.play(reply(calls=[call("delete_record", raw, id="call_1")]))

    [part] = calls_in(await one_turn(model_for(server)))

    assert part.args == raw


@pytest.mark.parametrize(
    "raw",
    ['{"id": ' + "7" * 5000 + "}", '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}"],
    ids=["5000-digit-integer", "100000-deep"],
)
async def test_json_python_will_not_hold_is_refused_to_the_model_not_a_failed_run(
    server, calls, tmp_path, raw
):
    """Valid JSON that Python's parser refuses (an integer of thousands of digits, nesting past the
    recursion limit) comes back as the raw text, which the run refuses with a tool error the model
    reads: the run goes on."""
    server.play(reply(calls=[call("delete_record", raw, id="call_1")]), reply("I could not do that."))
    agent = Agent("ops", model=model_for(server), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        result = await agent.generate("delete it")
    finally:
        await runtime.shutdown()
    assert result.finish_reason == "stop" and result.text == "I could not do that."
    assert result.tool_results[0]["tool_call_id"] == "call_1" and calls.count() == 0
    told = server.requests[1]["messages"][-1]
    assert told["role"] == "tool" and "not" in told["content"].lower()


async def test_a_call_without_arguments_gets_an_empty_dict(server):
    server.play(reply(calls=[call("list_records", "", id="call_1")]))

    [part] = calls_in(await one_turn(model_for(server)))

    assert part.args == {}


async def test_a_turn_can_mix_text_and_a_tool_call(server):
    server.play(reply("Deleting it now.", calls=[call("delete_record", {"id": "r1"}, id="call_1")]))

    events = await one_turn(model_for(server))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Deleting it now."
    assert calls_in(events) == [ToolCallPart("call_1", "delete_record", {"id": "r1"})]
    assert events[-1].finish_reason == "tool-calls"


async def test_a_stream_that_ends_before_its_finish_reason_is_a_model_error(server):
    """Text cut short is not a complete turn (a connection-delimited stream ends cleanly when dropped)."""
    server.play(reply("The answer is: do NOT delete it", cut_after=3))

    with pytest.raises(ModelError, match="ended before the turn did"):
        await one_turn(model_for(server))


async def test_a_tool_call_cut_off_before_its_arguments_fails_the_run_and_never_runs(server, calls, tmp_path):
    """Its header came (id and name), its arguments never did: run with no arguments, it would do what
    nobody asked for. The run fails clearly instead."""
    server.play(reply(calls=[call("delete_record", {"id": "abc-123"}, id="call_1")], cut_after=2))
    agent = Agent("ops", model=model_for(server), tools=[delete_tool(calls, require_approval=False)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        stream = await agent.stream("delete it")
        chunks = await chunks_of(stream)
    finally:
        await runtime.shutdown()

    assert "tool-call" not in types_of(chunks) and calls.count() == 0
    assert types_of(chunks)[-2:] == ["error", "finish"]
    assert chunks[-2].payload["error"]["code"] == "MODEL_ERROR"


async def test_two_calls_sent_at_one_index_with_their_own_ids_stay_two_calls(server):
    server.play(
        reply(
            calls=[call("delete_record", {"id": "r1"}, id="call_a"), call("pay", {"to": "bob"}, id="call_b")],
            one_index=True,
        )
    )

    events = await one_turn(model_for(server))

    assert calls_in(events) == [
        ToolCallPart(id="call_a", name="delete_record", args={"id": "r1"}),
        ToolCallPart(id="call_b", name="pay", args={"to": "bob"}),
    ]


@pytest.mark.parametrize(
    ("openai_reason", "troupe_reason"), [("length", "length"), ("content_filter", "content-filter")]
)
async def test_other_finish_reasons_are_passed_on_in_troupe_spelling(server, openai_reason, troupe_reason):
    server.play(reply("cut sho", finish_reason=openai_reason))

    events = await one_turn(model_for(server))

    assert events[-1].finish_reason == troupe_reason


async def test_the_request_carries_the_messages_and_tool_specs_it_was_given(server):
    server.play(reply("ok"))
    messages = [
        {"role": "system", "content": "You manage records."},
        {"role": "user", "content": "delete abc-123"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "delete_record", "arguments": '{"id": "abc-123"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": '{"deleted": "abc-123"}'},
    ]

    await one_turn(model_for(server), messages, [DELETE_SPEC])

    [sent] = server.requests
    assert sent["model"] == "gpt-test"
    assert sent["messages"] == messages
    assert sent["tools"] == [DELETE_SPEC]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert server.headers[0]["authorization"] == "Bearer sk-test"


async def test_a_turn_without_tools_sends_no_tools_field(server):
    server.play(reply("ok"))

    await one_turn(model_for(server))

    assert "tools" not in server.requests[0]


async def test_structured_output_and_temperature_reach_the_request(server):
    server.play(reply('{"city": "Paris"}'))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

    await one_turn(model_for(server, temperature=0.2), response_schema=schema)

    sent = server.requests[0]
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }
    assert sent["temperature"] == 0.2


async def test_a_server_error_is_raised_not_swallowed(server):
    # Nothing scripted: the fake answers 400, which the openai client raises without retrying.
    with pytest.raises(openai.BadRequestError, match="script exhausted"):
        await one_turn(model_for(server))


async def test_an_unreachable_model_server_is_named_in_the_error():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    model = OpenAIModel("gpt-test", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test")
    with pytest.raises(ModelError, match=f"cannot reach the model server at http://127.0.0.1:{port}/v1"):
        await one_turn(model)


# ---- configuration -----------------------------------------------------------------------------------


async def test_an_openai_model_string_reads_base_url_and_key_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.play(reply("configured by the environment"))

    model = resolve_model("openai/gpt-env")
    assert isinstance(model, OpenAIModel)
    assert model.id == "openai/gpt-env"
    events = await one_turn(model)

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "configured by the environment"
    assert server.requests[0]["model"] == "gpt-env"
    assert server.headers[0]["authorization"] == "Bearer sk-from-env"


async def test_settings_are_captured_at_creation_and_travel_with_a_pickled_model(server, monkeypatch):
    """An agent shipped to a Ray actor carries its model's settings, not the caller's environment."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.play(reply("first"), reply("second"))
    model = resolve_model("openai/gpt-env")
    await one_turn(model)  # the model now holds a live HTTP client

    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    shipped = pickle.loads(pickle.dumps(model))
    events = await one_turn(shipped)

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "second"
    assert server.headers[1]["authorization"] == "Bearer sk-from-env"


async def test_a_missing_api_key_is_a_model_error_that_says_how_to_fix_it(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIModel("gpt-test", base_url=server.base_url)

    fix = r"openai/gpt-test: no API key \(set OPENAI_API_KEY or pass api_key=\)"
    with pytest.raises(ModelError, match=fix):
        await one_turn(model)
    assert server.requests == [], "nothing is sent without a key"


# ---- an agent run on it ------------------------------------------------------------------------------


async def test_an_agent_pauses_for_approval_and_sends_the_tool_result_back_to_the_server(
    server, calls, tmp_path
):
    server.play(
        reply(calls=[call("delete_record", {"id": "abc-123"}, id="call_abc")]),
        reply("Record abc-123 is gone."),
    )
    agent = Agent(
        "ops", instructions="You manage records.", model=model_for(server), tools=[delete_tool(calls)]
    )
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")

    stream = await agent.stream("delete abc-123")
    chunks = await chunks_of(stream)
    assert types_of(chunks) == ["start", "step-start", "tool-call", "tool-call-approval"]
    approval = chunks[3].payload
    assert (approval["tool_call_id"], approval["tool_name"], approval["args"]) == (
        "call_abc",
        "delete_record",
        {"id": "abc-123"},
    )
    assert calls.count() == 0
    assert len(server.requests) == 1

    approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call_abc")
    result = await approved.result()

    assert result.finish_reason == "stop"
    assert result.text == "Record abc-123 is gone."
    assert calls.count("delete_record") == 1
    second = server.requests[1]["messages"]
    assert second[0] == {"role": "system", "content": "You manage records."}
    assert second[-2]["tool_calls"][0]["id"] == "call_abc"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_abc", "content": '{"deleted": "abc-123"}'}
    assert [spec["function"]["name"] for spec in server.requests[1]["tools"]] == ["delete_record"]
    assert result.usage["input_tokens"] == 20, "both model turns' usage, as the server reported it"
    await runtime.shutdown()


def test_a_script_running_each_call_in_its_own_event_loop_keeps_working(server, calls, tmp_path):
    """``asyncio.run`` per call, as a script does: the HTTP client of a closed loop is not reused."""
    server.play(
        reply(calls=[call("delete_record", {"id": "abc-123"}, id="call_abc")]),
        reply("Record abc-123 is gone."),
    )
    agent = Agent("ops", model=model_for(server), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")

    paused = asyncio.run(agent.generate("delete abc-123"))
    assert paused.finish_reason == "suspended"
    done = asyncio.run(agent.approve_tool_call_generate(run_id=paused.run_id))

    assert done.text == "Record abc-123 is gone."
    assert calls.count("delete_record") == 1
    asyncio.run(runtime.shutdown())
