"""Tool approval: a gated call pauses the run; approve runs it once, decline never runs it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers import (
    chunks_of,
    delete_tool,
    echo_model,
    one_call,
    pay_tool,
    script_used_up,
    types_of,
)
from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from troupe import Agent, create_tool
from troupe.errors import (
    DecisionConflictError,
    DecisionRejectedError,
    ResumeDataValidationError,
    SnapshotNotFoundError,
    ToolCallNotSuspendedError,
)
from troupe.testing import ScriptedModel, text, tool_call


async def test_approve_runs_the_tool_once_and_the_model_gets_its_result(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "abc-123"}), tools=[delete_tool(calls)])
    make_runtime([agent])

    stream = await agent.stream("delete abc-123")
    chunks = await chunks_of(stream)
    # Mastra's shape: a paused stream ends at its pause (no finish chunk).
    assert types_of(chunks) == ["start", "step-start", "tool-call", "tool-call-approval"]
    approval = chunks[3].payload
    assert approval["tool_call_id"] == "call-1"
    assert approval["tool_name"] == "delete_record"
    assert approval["args"] == {"id": "abc-123"}
    assert approval["agent_path"] == ["ops"]
    assert len(approval["fingerprint"]) == 32
    assert approval["resume_schema"]["required"] == ["approved"]
    assert (await stream.result()).finish_reason == "suspended"
    assert calls.count() == 0, "a gated tool must not run before approval"

    approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
    result = await approved.result()
    assert calls.count("delete_record") == 1
    assert result.finish_reason == "stop"
    assert result.text == 'call-1={"deleted": "abc-123"}'
    assert result.tool_results[0]["result"] == {"deleted": "abc-123"}


async def test_decline_never_runs_the_tool_and_the_model_gets_the_reason(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "abc-123"}), tools=[delete_tool(calls)])
    make_runtime([agent])

    stream = await agent.stream("delete abc-123")
    await stream.result()
    declined = await agent.decline_tool_call(run_id=stream.run_id, reason="Not that record")
    chunks = await chunks_of(declined)
    result = await declined.result()

    assert calls.count() == 0
    assert result.text == "call-1=Not that record"
    assert types_of(chunks)[0] == "tool-output-denied", "a decision stream goes straight on (no start)"
    assert chunks[0].payload["approval"] == {"id": "call-1", "approved": False, "reason": "Not that record"}
    assert result.tool_results == [], "a declined call has no tool result (as in Mastra)"


async def test_decline_without_a_reason_tells_the_model_the_default(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(calls)])
    make_runtime([agent])

    paused = await agent.generate("delete x")
    result = await agent.decline_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1")

    assert result.text == "call-1=Tool call was not approved by the user"
    assert calls.count() == 0


async def test_generate_returns_suspended_and_approve_generate_finishes(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "r1"}), tools=[delete_tool(calls)])
    make_runtime([agent])

    paused = await agent.generate("delete r1")
    assert paused.finish_reason == "suspended"
    assert paused.suspend_payload is not None
    assert paused.suspend_payload["tool_call_id"] == "call-1"
    assert paused.suspend_payload["tool_name"] == "delete_record"
    assert paused.suspend_payload["args"] == {"id": "r1"}

    done = await agent.approve_tool_call_generate(
        run_id=paused.run_id, tool_call_id=paused.suspend_payload["tool_call_id"]
    )
    assert done.finish_reason == "stop"
    assert done.text == 'call-1={"deleted": "r1"}'
    assert calls.count() == 1


async def test_run_level_true_gates_every_tool(make_runtime, calls):
    agent = Agent("ops", model=one_call("pay", {"to": "bob", "amount": 5}), tools=[pay_tool(calls)])
    make_runtime([agent])

    ungated = await agent.generate("pay bob")
    assert ungated.finish_reason == "stop" and calls.count() == 1

    gated = await agent.generate("pay bob", require_tool_approval=True)
    assert gated.finish_reason == "suspended"
    assert calls.count() == 1


async def test_policy_function_gates_only_the_calls_it_chooses(make_runtime, calls):
    model = echo_model(
        tool_call("pay", {"to": "bob", "amount": 5}, id="small"),
        tool_call("pay", {"to": "eve", "amount": 500}, id="big"),
    )
    agent = Agent("ops", model=model, tools=[pay_tool(calls)])
    make_runtime([agent])

    result = await agent.generate(
        "pay both", require_tool_approval=lambda name, args, request_context, workspace: args["amount"] > 100
    )

    assert result.finish_reason == "suspended"
    assert [p["tool_call_id"] for p in result.pending_tool_calls] == ["big"]
    assert [e["amount"] for e in calls.entries("pay")] == [5], "the ungated call of the step runs at once"


async def test_a_policy_function_that_raises_gates_the_call(make_runtime, calls):
    def broken(name, args, request_context, workspace):
        raise RuntimeError("policy service down")

    agent = Agent("ops", model=one_call("pay", {"to": "bob", "amount": 5}), tools=[pay_tool(calls)])
    make_runtime([agent])

    result = await agent.generate("pay", require_tool_approval=broken)

    assert result.finish_reason == "suspended"
    assert calls.count() == 0


async def test_a_tools_own_rule_overrides_the_run_function(make_runtime, calls):
    never = pay_tool(calls, require_approval=lambda inp, ctx: False)
    agent = Agent("ops", model=one_call("pay", {"to": "bob", "amount": 5000}), tools=[never])
    make_runtime([agent])

    result = await agent.generate("pay", require_tool_approval=lambda *a: True)

    assert result.finish_reason == "stop", "the tool's own rule said no approval"
    assert calls.count() == 1


async def test_a_tool_rule_function_sees_the_validated_input(make_runtime, calls):
    big_only = pay_tool(calls, require_approval=lambda inp, ctx: inp.amount > 100)
    model = echo_model(
        tool_call("pay", {"to": "a", "amount": 1}, id="c1"),
        tool_call("pay", {"to": "b", "amount": 101}, id="c2"),
    )
    agent = Agent("ops", model=model, tools=[big_only])
    make_runtime([agent])

    result = await agent.generate("pay", require_tool_approval=False)

    assert [p["tool_call_id"] for p in result.pending_tool_calls] == ["c2"]


async def test_default_options_apply_when_the_call_omits_them(make_runtime, calls):
    agent = Agent(
        "ops",
        model=one_call("pay", {"to": "bob", "amount": 5}),
        tools=[pay_tool(calls)],
        default_options={"require_tool_approval": True},
    )
    make_runtime([agent])

    assert (await agent.generate("pay")).finish_reason == "suspended"
    assert (await agent.generate("pay", require_tool_approval=False)).finish_reason == "stop"
    assert calls.count() == 1


async def test_three_gated_calls_decided_in_reverse_order(make_runtime, calls):
    model = echo_model(*(tool_call("delete_record", {"id": f"r{i}"}, id=f"c{i}") for i in (1, 2, 3)))
    agent = Agent("ops", model=model, tools=[delete_tool(calls)])
    make_runtime([agent])

    first = await agent.generate("delete three")
    assert [p["tool_call_id"] for p in first.pending_tool_calls] == ["c1", "c2", "c3"]

    third = await agent.approve_tool_call_generate(run_id=first.run_id, tool_call_id="c3")
    assert third.finish_reason == "suspended"
    assert [p["tool_call_id"] for p in third.pending_tool_calls] == ["c1", "c2"]
    second = await agent.decline_tool_call_generate(run_id=first.run_id, tool_call_id="c2", reason="keep r2")
    assert [p["tool_call_id"] for p in second.pending_tool_calls] == ["c1"]
    last = await agent.approve_tool_call_generate(run_id=first.run_id, tool_call_id="c1")

    assert [e["id"] for e in calls.entries("delete_record")] == ["r3", "r1"]
    # Results reach the model in call order, whatever order they were decided in.
    assert last.text == 'c1={"deleted": "r1"} | c2=keep r2 | c3={"deleted": "r3"}'


async def test_omitted_tool_call_id_targets_the_most_recently_paused_call(make_runtime, calls):
    model = echo_model(
        tool_call("delete_record", {"id": "a"}, id="c1"), tool_call("delete_record", {"id": "b"}, id="c2")
    )
    agent = Agent("ops", model=model, tools=[delete_tool(calls)])
    make_runtime([agent])

    first = await agent.generate("delete")
    assert first.suspend_payload["tool_call_id"] == "c2"
    await agent.approve_tool_call_generate(run_id=first.run_id)

    assert [e["id"] for e in calls.entries()] == ["b"]


async def test_concurrent_double_approval_runs_the_tool_once(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "once"}), tools=[delete_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("delete once")

    outcomes = await asyncio.gather(
        *(agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1") for _ in range(2)),
        return_exceptions=True,
    )

    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert len(errors) == 1 and isinstance(errors[0], DecisionConflictError), outcomes
    assert "already approved" in str(errors[0])
    assert calls.count("delete_record") == 1


async def test_approve_racing_decline_decides_once(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "race"}), tools=[delete_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("delete race")

    outcomes = await asyncio.gather(
        agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1"),
        agent.decline_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1"),
        return_exceptions=True,
    )

    assert sum(isinstance(o, DecisionConflictError) for o in outcomes) == 1
    assert calls.count() <= 1
    winner = next(o for o in outcomes if not isinstance(o, Exception))
    assert (calls.count() == 1) == ("deleted" in winner.text)


async def test_edited_args_are_merged_and_validated_when_the_tool_opts_in(make_runtime, calls):
    editable = pay_tool(calls, require_approval=True, allow_edited_args=True)
    agent = Agent("ops", model=one_call("pay", {"to": "bob", "amount": 900}), tools=[editable])
    make_runtime([agent])
    paused = await agent.generate("pay bob")

    with pytest.raises(DecisionRejectedError, match="amount"):
        await agent.approve_tool_call(run_id=paused.run_id, edited_args={"amount": "lots"})
    assert calls.count() == 0

    done = await agent.approve_tool_call_generate(run_id=paused.run_id, edited_args={"amount": 90})
    assert calls.entries("pay") == [{"name": "pay", "to": "bob", "amount": 90}]
    assert done.text == 'call-1={"paid": 90, "to": "bob"}'


async def test_edited_args_naming_a_key_the_tool_does_not_have_are_refused(make_runtime, calls):
    """A typo in an edit ("ammount") is not dropped by the schema while the audit records the edit as
    made and the tool pays the model's amount: the approval is refused, naming the key, and the call
    stays paused. So is an edit that cannot be stored with the run (nested too deep)."""
    editable = pay_tool(calls, require_approval=True, allow_edited_args=True)
    agent = Agent("ops", model=one_call("pay", {"to": "bob", "amount": 900}), tools=[editable])
    runtime = make_runtime([agent])
    paused = await agent.generate("pay bob")

    with pytest.raises(DecisionRejectedError, match="'ammount', which its input schema does not have"):
        await agent.approve_tool_call(run_id=paused.run_id, edited_args={"amount": 90, "ammount": 5})
    deep: Any = 5
    for _ in range(100):
        deep = [deep]
    with pytest.raises(DecisionRejectedError, match="cannot be stored with the run: nested deeper than 64"):
        await agent.approve_tool_call(run_id=paused.run_id, edited_args={"amount": deep})

    assert calls.count() == 0 and await runtime.store().list_audit(paused.run_id) == []
    done = await agent.approve_tool_call_generate(run_id=paused.run_id, edited_args={"amount": 5})
    assert calls.entries("pay") == [{"name": "pay", "to": "bob", "amount": 5}]
    assert done.text == 'call-1={"paid": 5, "to": "bob"}'


class Transfer(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True)
    to_account: str
    amount: int = Field(validation_alias=AliasChoices("amount", "sum"))


class Note(BaseModel):
    model_config = ConfigDict(extra="allow")
    text: str


@pytest.mark.parametrize(
    ("schema", "edit", "received"),
    [
        (Transfer, {"toAccount": "carol", "sum": 7}, {"to_account": "carol", "amount": 7}),
        (Transfer, {"to_account": "dave"}, {"to_account": "dave", "amount": 1}),
        (Note, {"text": "hi", "colour": "red"}, {"text": "hi", "colour": "red"}),
    ],
    ids=["by-alias", "by-name", "extra-allowed"],
)
async def test_an_edit_may_name_a_field_by_its_alias_and_add_keys_a_schema_keeps(
    make_runtime, calls, schema: type[BaseModel], edit: dict[str, Any], received: dict[str, Any]
):
    """Keys the schema reads are not unknown: a field's aliases, its name where the schema validates by
    name, and any key of a schema with extra="allow" (the tool gets it)."""

    def act(inp: BaseModel, ctx: Any) -> dict[str, Any]:
        calls.record("act", got=inp.model_dump())
        return {"ok": True}

    tool = create_tool("act", "Act", schema, act, require_approval=True, allow_edited_args=True)
    first = {"toAccount": "bob", "amount": 1} if schema is Transfer else {"text": "hello"}
    agent = Agent("ops", model=one_call("act", first), tools=[tool])
    make_runtime([agent])
    paused = await agent.generate("act")

    done = await agent.approve_tool_call_generate(run_id=paused.run_id, edited_args=edit)

    assert done.finish_reason == "stop"
    assert calls.entries("act") == [{"name": "act", "got": received}]


async def test_edited_args_are_refused_where_the_tool_does_not_opt_in(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("delete a")

    with pytest.raises(DecisionRejectedError, match="allow_edited_args"):
        await agent.approve_tool_call(run_id=paused.run_id, edited_args={"id": "b"})

    done = await agent.approve_tool_call_generate(run_id=paused.run_id)
    assert [e["id"] for e in calls.entries()] == ["a"], "the refused edit left the call paused as it was"
    assert done.finish_reason == "stop"


async def test_a_stale_fingerprint_is_refused(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("delete a")

    with pytest.raises(DecisionConflictError, match="fingerprint"):
        await agent.approve_tool_call(run_id=paused.run_id, fingerprint="0" * 32)
    done = await agent.approve_tool_call_generate(
        run_id=paused.run_id, fingerprint=paused.suspend_payload["fingerprint"]
    )
    assert done.finish_reason == "stop" and calls.count() == 1


async def test_wrong_ids_and_finished_runs_raise_clear_errors(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("delete a")

    with pytest.raises(ToolCallNotSuspendedError):
        await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="nope")
    with pytest.raises(SnapshotNotFoundError, match="snapshot not found"):
        await agent.approve_tool_call(run_id="no-such-run")
    assert (await agent.approve_tool_call_generate(run_id=paused.run_id)).finish_reason == "stop"
    with pytest.raises(SnapshotNotFoundError, match="snapshot not found"):
        await agent.decline_tool_call(run_id=paused.run_id)
    with pytest.raises(DecisionConflictError):
        await agent.decline_tool_call(run_id=paused.run_id, tool_call_id="call-1")
    assert calls.count() == 1


async def test_ungated_calls_of_a_step_run_while_the_gated_one_waits(make_runtime, calls):
    model = echo_model(
        tool_call("delete_record", {"id": "a"}, id="gated"),
        tool_call("pay", {"to": "bob", "amount": 1}, id="free"),
    )
    agent = Agent("ops", model=model, tools=[delete_tool(calls), pay_tool(calls)])
    make_runtime([agent])

    stream = await agent.stream("both")
    chunks = await chunks_of(stream)

    results = [c for c in chunks if c.type == "tool-result"]
    assert [c.payload["tool_call_id"] for c in results] == ["free"]
    assert types_of(chunks).index("tool-result") < types_of(chunks).index("tool-call-approval")
    assert calls.count("pay") == 1 and calls.count("delete_record") == 0


async def test_before_tool_call_hook_can_block_a_call_and_after_hook_sees_outputs(make_runtime, calls):
    from troupe import Hooks, ToolCallOverride

    def before(name, inp, ctx):
        if inp.amount > 1000:
            return ToolCallOverride(proceed=False, output="blocked by policy")
        return None

    def after(name, inp, output, ctx):
        calls.record("after", tool=name, output=output)

    model = echo_model(
        tool_call("pay", {"to": "a", "amount": 5}, id="ok"),
        tool_call("pay", {"to": "b", "amount": 5000}, id="huge"),
    )
    agent = Agent(
        "ops",
        model=model,
        tools=[pay_tool(calls)],
        hooks=Hooks(before_tool_call=before, after_tool_call=after),
    )
    make_runtime([agent])

    result = await agent.generate("pay")

    assert [e["to"] for e in calls.entries("pay")] == ["a"]
    assert result.text == 'ok={"paid": 5, "to": "a"} | huge=blocked by policy'
    assert calls.entries("after") == [{"name": "after", "tool": "pay", "output": {"paid": 5, "to": "a"}}]


async def test_approval_state_is_stored_with_the_run_so_a_resumed_run_stays_gated(
    make_runtime, calls, executor
):
    """A per-call policy function is not persisted: after a pause, later calls are gated (fail-safe)."""
    model = ScriptedModel(
        [
            tool_call("delete_record", {"id": "a"}, id="c1"),
            tool_call("pay", {"to": "b", "amount": 1}, id="c2"),
            text("done"),
        ]
    )
    agent = Agent("ops", model=model, tools=[delete_tool(calls), pay_tool(calls)])
    make_runtime([agent])

    first = await agent.generate("go", require_tool_approval=lambda name, *rest: name == "delete_record")
    assert first.suspend_payload["tool_name"] == "delete_record"
    second = await agent.approve_tool_call_generate(run_id=first.run_id)

    assert second.finish_reason == "suspended"
    assert second.suspend_payload["tool_name"] == "pay"
    assert calls.count("pay") == 0
    done = await agent.approve_tool_call_generate(run_id=first.run_id)
    assert (done.text, calls.count("pay")) == ("done", 1)
    script_used_up(model, executor)


async def test_create_tool_rejects_bad_definitions():
    from pydantic import BaseModel

    class In(BaseModel):
        x: int

    with pytest.raises(TypeError, match="input_schema"):
        create_tool("t", "d", dict, lambda i, c: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="require_approval"):
        create_tool("t", "d", In, lambda i, c: None, require_approval="yes")  # type: ignore[arg-type]


async def test_resume_data_decides_an_approval_pause_exactly_as_approve_and_decline(make_runtime, calls):
    """Mastra's resumeStream({approved, reason}) on an approval pause: claimed once, audited, and bound to
    the call's fingerprint, like approve/decline."""
    agent = Agent("ops", model=one_call("delete_record", {"id": "abc-123"}), tools=[delete_tool(calls)])
    runtime = make_runtime([agent])
    paused = await agent.generate("delete abc-123")
    schema = paused.suspend_payload["resume_schema"]
    assert schema["required"] == ["approved"] and set(schema["properties"]) == {"approved", "reason"}

    with pytest.raises(ResumeDataValidationError, match="approved"):
        await agent.resume_stream({"approved": "yes"}, run_id=paused.run_id)  # strict: not a boolean
    with pytest.raises(DecisionConflictError, match="fingerprint"):
        await agent.resume_stream({"approved": True}, run_id=paused.run_id, fingerprint="0" * 32)
    assert calls.count() == 0 and (await agent.list_suspended_runs()).total == 1, "still paused"

    fingerprint = paused.suspend_payload["fingerprint"]
    done = await agent.resume_generate({"approved": True}, run_id=paused.run_id, fingerprint=fingerprint)
    assert done.text == 'call-1={"deleted": "abc-123"}' and calls.count("delete_record") == 1
    with pytest.raises(DecisionConflictError):
        await agent.resume_stream({"approved": True}, run_id=paused.run_id, tool_call_id="call-1")
    [entry] = await runtime.store().list_audit(paused.run_id)
    assert (entry.kind, entry.fingerprint) == ("approved", fingerprint)

    second = await agent.generate("delete abc-123")
    declined = await agent.resume_stream({"approved": False, "reason": "keep it"}, run_id=second.run_id)
    assert types_of(await chunks_of(declined))[0] == "tool-output-denied"
    assert (await declined.result()).text == "call-1=keep it" and calls.count("delete_record") == 1
    [entry] = await runtime.store().list_audit(second.run_id)
    assert (entry.kind, entry.reason) == ("declined", "keep it")
