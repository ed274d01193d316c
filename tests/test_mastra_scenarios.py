"""Troupe replays Mastra 1.71's recorded scenarios a-k (``shared/mastra/traces``) on both executors and
gives what Mastra gave: chunk types in order, payload keys, error codes, final texts, and what the model
was sent after each decision. Where Troupe deliberately differs, the test says so and why (the same
table is in docs/concepts/mastra.md):

- D1 every gated call of a step is announced at once and may be decided in any order (Mastra announces
  one at a time and refuses to decide the second first); an approved call runs when approved, so its
  tool-result streams in that decision's stream.
- D2 a second or concurrent decision on one call is refused with AGENT_DECISION_CONFLICT (Mastra reports
  the run as not found after the first, and ran the tool twice for two concurrent approvals).
- D3 resume data that fails the tool's resume_schema raises ResumeDataValidationError and leaves the run
  paused (Mastra hands the model a validation error as the tool's result).
- D4 a subagent's pause is announced once, at the top, with agent_path, after the top's checkpoint holds
  it (Mastra also relays it as a nested tool-output first).
- D5 auto-resume answers the paused call itself (the model extracts the answer; it never re-issues the
  call, and can never approve one): no new tool-call chunk, and an approval is never taken from chat.
- D6 an Agent is always backed by a store (an Agent without a Runtime runs on a process default one), so
  there is no storage-less "standalone agent" whose pause cannot be decided (Mastra's k5).
- Never compared: AI SDK / provider plumbing in payloads (``mastra_reference.PROVIDER_KEYS``), and how
  finely a model splits its text into deltas.
"""

from __future__ import annotations

import json
from typing import Any

from mastra_reference import (
    ADA,
    FINAL,
    approver,
    ask_age,
    find_user,
    flag_tool,
    load,
    mastra_like_model,
    mastra_model_inputs,
    pay_tool,
    refused,
    replay,
    troupe_model_inputs,
)

from troupe import Agent


async def test_a_approve_and_resume_an_approval_pause(make_runtime, calls):
    trace, steps = load("a_approve_stream")
    agent = approver(calls)
    make_runtime([agent])
    for case, decide in (
        ("a1.approveToolCall", lambda r: agent.approve_tool_call(run_id=r, tool_call_id="call-1")),
        (
            "a2.resumeStream({approved:true})",
            lambda r: agent.resume_stream({"approved": True}, run_id=r, tool_call_id="call-1"),
        ),
    ):
        opening = steps[case[:2] + ".stream"]
        paused = await replay(agent.stream("Find the user Ada"), opening)
        [pause] = [c.to_wire()["payload"] for c in paused.chunks if c.type == "tool-call-approval"]
        recorded = opening["fullPayloads"][0]["payload"]
        # The approval's resume schema, byte for byte as Mastra sends it (a JSON string).
        assert {k: pause[k] for k in recorded} == recorded
        await replay(decide(paused.run_id), steps[case])
    assert troupe_model_inputs(calls) == mastra_model_inputs(trace)
    assert calls.count("tool") == 2


async def test_b_decline_with_the_default_and_a_custom_reason(make_runtime, calls):
    trace, steps = load("b_decline_stream")
    agent = approver(calls)
    make_runtime([agent])
    for case, reason in (
        ("b1.declineToolCall", None),
        ("b2.declineToolCall(reason)", "Budget approval is required first"),
    ):
        paused = await replay(agent.stream("Find the user Ada"), steps[case[:2] + ".stream"])
        declined = await replay(
            agent.decline_tool_call(run_id=paused.run_id, tool_call_id="call-1", reason=reason), steps[case]
        )
        [denied] = [c for c in declined.chunks if c.type == "tool-output-denied"]
        recorded = steps[case]["fullPayloads"][0]["payload"]
        assert denied.to_wire()["payload"] == recorded
    assert troupe_model_inputs(calls) == mastra_model_inputs(trace)
    assert calls.count("tool") == 0


async def test_c_approval_asked_for_by_the_request_or_the_agents_defaults(make_runtime, calls):
    trace, steps = load("c_request_option")
    plan = [[("findUser", {"name": "Ada"}, "call-1")], [("findUser", {"name": "Bob"}, "call-2")]]
    agent = Agent(
        "c",
        instructions="Use findUser.",
        model=mastra_like_model(calls, "agent-model", plan, FINAL),
        tools=[find_user(calls)],
    )
    c3 = Agent(
        "c3",
        instructions="Use findUser.",
        model=mastra_like_model(calls, "agent-model-c3", ADA, FINAL),
        tools=[find_user(calls)],
        default_options={"require_tool_approval": True},
    )
    make_runtime([agent, c3])
    paused = await replay(
        agent.stream("Find Ada and Bob", require_tool_approval=True),
        steps["c1.stream({requireToolApproval:true})"],
    )
    for call in ("call-1", "call-2"):
        op = f"c1.approveToolCall#{call[-1]} (no requireToolApproval repeated)"
        await replay(agent.approve_tool_call(run_id=paused.run_id, tool_call_id=call), steps[op])
    await replay(agent.stream("Find Ada and Bob"), steps["c2.stream (no option) -> no approval expected"])
    paused = await replay(
        c3.stream("Find the user Ada"), steps["c3.stream (defaultOptions.requireToolApproval)"]
    )
    await replay(c3.approve_tool_call(run_id=paused.run_id), steps["c3.approveToolCall"])
    assert troupe_model_inputs(calls, "agent-model") == mastra_model_inputs(trace, "agent-model")
    assert troupe_model_inputs(calls, "agent-model-c3") == mastra_model_inputs(trace, "agent-model-c3")


def _deletes_only(tool_name: str, args: Any, request_context: Any, workspace: Any) -> bool:
    return tool_name.startswith("delete")


def _throws(tool_name: str, args: Any, request_context: Any, workspace: Any) -> bool:
    raise RuntimeError("policy failed")


async def test_d_approval_decided_by_functions(make_runtime, calls):
    trace, steps = load("d_policy_function")
    d1_plan = [[("lookup", {"name": "Ada"}, "call-1")], [("deleteUser", {"name": "Ada"}, "call-2")]]
    d3_plan = [[("pay", {"amount": 50}, "call-1")], [("pay", {"amount": 500}, "call-2")]]
    d1 = Agent(
        "d1",
        model=mastra_like_model(calls, "agent-model", d1_plan, FINAL),
        tools=[flag_tool(calls, "lookup"), flag_tool(calls, "deleteUser")],
    )
    d2 = Agent(
        "d2",
        model=mastra_like_model(calls, "agent-model-d2", [[("lookup", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[flag_tool(calls, "lookup")],
    )
    d3 = Agent(
        "d3",
        model=mastra_like_model(calls, "agent-model-d3", d3_plan, FINAL),
        tools=[pay_tool(calls, require_approval=lambda inp, ctx: inp.amount > 100)],
    )
    make_runtime([d1, d2, d3])
    for agent, case, policy in ((d1, "d1", _deletes_only), (d2, "d2", _throws), (d3, "d3", None)):
        options = {} if policy is None else {"require_tool_approval": policy}
        [opening] = [op for op in steps if op.startswith(case + ".stream")]
        paused = await replay(agent.stream("go", **options), steps[opening])
        await replay(agent.approve_tool_call(run_id=paused.run_id), steps[case + ".approveToolCall"])
    for model in ("agent-model", "agent-model-d2", "agent-model-d3"):
        assert troupe_model_inputs(calls, model) == mastra_model_inputs(trace, model)


async def test_e_generate_then_decide_with_the_generate_forms(make_runtime, calls):
    trace, steps = load("e_generate")
    agent = approver(calls)
    make_runtime([agent])
    for case, decide in (
        (
            "e1.approveToolCallGenerate",
            lambda r: agent.approve_tool_call_generate(run_id=r, tool_call_id="call-1"),
        ),
        (
            "e2.declineToolCallGenerate(reason)",
            lambda r: agent.decline_tool_call_generate(run_id=r, tool_call_id="call-1", reason="Not allowed"),
        ),
        ("e3.approveToolCallGenerate (no toolCallId)", lambda r: agent.approve_tool_call_generate(run_id=r)),
    ):
        recorded = steps[case[:2] + ".generate"]["output"]
        paused = await agent.generate("Find the user Ada")
        assert paused.finish_reason == recorded["finishReason"] == "suspended"
        assert paused.text == recorded["text"]
        wire = {k: v for k, v in (paused.suspend_payload or {}).items()}
        assert set(recorded["suspendPayload"]) <= set(_camel_keys(wire))
        done = await decide(paused.run_id)
        output = steps[case]["output"]
        assert (done.finish_reason, done.text) == (output["finishReason"], output["text"])
        assert [c["tool_call_id"] for c in done.tool_calls] == [c["toolCallId"] for c in output["toolCalls"]]
        assert [r["tool_call_id"] for r in done.tool_results] == [
            r["toolCallId"] for r in output["toolResults"]
        ]
    assert troupe_model_inputs(calls) == mastra_model_inputs(trace)


def _camel_keys(payload: dict[str, Any]) -> set[str]:
    from troupe.core.vocabulary.chunks import camelize

    return set(camelize(payload))


async def test_f_suspend_and_resume(make_runtime, calls):
    trace, steps = load("f_suspend_resume")
    agent = Agent(
        "suspender",
        instructions="Use askAge.",
        model=mastra_like_model(calls, "agent-model", [[("askAge", {"name": "Ada"}, "call-1")]], FINAL),
        tools=[ask_age(calls)],
    )
    make_runtime([agent])
    paused = await replay(agent.stream("How old is Ada?"), steps["f1.stream"])
    [pause] = [c for c in paused.chunks if c.type == "tool-call-suspended"]
    # The tool's own schema, a JSON string as Mastra's (pydantic writes it, not zod: titles differ).
    ours = json.loads(pause.to_wire()["payload"]["resumeSchema"])
    theirs = json.loads(steps["f1.stream"]["fullPayloads"][0]["payload"]["resumeSchema"])
    assert (ours["required"], ours["properties"]["age"]["type"]) == (theirs["required"], "number")
    await replay(agent.resume_stream({"age": 37}, run_id=paused.run_id), steps["f1.resumeStream({age:37})"])
    paused = await replay(agent.stream("How old is Ada?"), steps["f2.stream"])
    # D3: invalid resume data raises and the run stays paused (Mastra ran the tool with an error).
    await refused(
        agent.resume_stream({"age": "old"}, run_id=paused.run_id), {"op": "f2"}, "AGENT_RESUME_DATA_INVALID"
    )
    assert (await agent.list_suspended_runs()).total == 1
    await agent.decline_tool_call_generate(run_id=paused.run_id)  # settles it; not in the recording
    generated = await agent.generate("How old is Ada?")
    assert generated.finish_reason == "suspended"
    done = await agent.resume_generate({"age": 52}, run_id=generated.run_id)
    assert done.text == steps["f3.resumeGenerate({age:52})"]["output"]["text"]
    mastra = mastra_model_inputs(trace)
    troupe = troupe_model_inputs(calls)
    # D3: Mastra's f2 resume reached the model as a validation error; Troupe's f2 was declined instead.
    assert troupe[:3] + troupe[4:] == mastra[:3] + mastra[4:]
    assert troupe[3] == [["call-1", {"type": "text", "value": "Tool call was not approved by the user"}]]
