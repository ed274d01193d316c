"""Mastra 1.71's recordings (``shared/mastra`` beside the clone), read the way the replay tests compare
them with Troupe; and the tools and model that stand in for the ones Mastra was recorded with.

The model answers as Mastra's scripted mock did: a plan of tool-call turns, then a text naming the
results of the latest step in the AI SDK's form (``name(id)={"type":"json","value":...}``), so the final
text a run produces is comparable word for word. Every call it gets is logged (a ``CallLog``, so this
works inside Ray actors too) with the tool results it was sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import chunks_of
from pydantic import BaseModel

from troupe import Agent, Chunk, create_tool
from troupe.errors import TroupeError
from troupe.testing import CallLog, FunctionModel, text, tool_call

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "mastra"

# AI SDK and provider plumbing that Mastra puts in payloads and Troupe has no counterpart for (it has no
# provider layer, no per-message ids, no processor retries): never compared.
PROVIDER_KEYS = frozenset(
    {
        "providerExecuted",
        "providerMetadata",
        "messageId",
        "request",
        "startedAt",
        "warnings",
        "processorRetryCount",
        "processorRetryFeedback",
        "metadata",
        "dynamic",
        "response",
    }
)
PAUSES = ("tool-call-approval", "tool-call-suspended")
# Troupe gives a run's conversation once, on ``finish``; Mastra repeats it on every ``step-finish``.
ONLY_ON_FINISH = {"step-finish": frozenset({"messages"})}


def reference(name: str) -> dict[str, Any]:
    """One recording; a missing one fails the test (CI places ``shared/`` beside the clone)."""
    path = SHARED / name
    if not path.is_file():
        pytest.fail(f"Mastra reference recording missing: {path} (shared/mastra must sit beside the clone)")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def steps_of(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["op"]: step for step in trace["steps"]}


# ---- chunk sequences ---------------------------------------------------------------------------------


def _mastra_name(chunk: dict[str, Any]) -> str:
    if chunk["type"] == "tool-output":
        return "tool-output:" + _mastra_name(chunk["inner"])
    return str(chunk["type"])


def _troupe_name(kind: str, payload: dict[str, Any]) -> str:
    if kind == "tool-output":
        inner = payload["output"]
        return "tool-output:" + _troupe_name(inner["type"], inner["payload"])
    return kind


def _collapse(named: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Runs of text-delta count once: how finely a model splits its text is the model's business (the
    scripted models here send word-sized deltas, Mastra's mock sent one)."""
    out: list[tuple[str, Any]] = []
    for name, item in named:
        if not (name.endswith("text-delta") and out and out[-1][0] == name):
            out.append((name, item))
    return out


def mastra_chunks(step: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, recorded chunk), where a nested agent's chunk is named ``tool-output:<its type>``.

    Deliberate difference: Mastra also relays a subagent's pause as a tool-output before the top-level
    pause; Troupe announces a pause once, at the top (with ``agent_path``), after the top's checkpoint
    holds it (checkpoint before announce), so those relays are left out of the comparison.
    """
    named = [(_mastra_name(c), c) for c in step.get("chunks") or []]
    kept = [(n, c) for n, c in named if not (n.startswith("tool-output:") and n.endswith(PAUSES))]
    return _collapse(kept)


def troupe_chunks(chunks: list[Chunk]) -> list[tuple[str, dict[str, Any]]]:
    """(name, wire payload) of Troupe's chunks, named as ``mastra_chunks`` names Mastra's."""
    return _collapse([(_troupe_name(c.type, c.payload), c.to_wire()["payload"]) for c in chunks])


def names(pairs: list[tuple[str, Any]]) -> list[str]:
    return [name for name, _ in pairs]


def missing_keys(mastra: list[tuple[str, dict[str, Any]]], troupe: list[tuple[str, dict[str, Any]]]) -> list:
    """Mastra payload keys (less provider plumbing) that Troupe's chunk at the same place lacks."""
    gaps = []
    for (name, recorded), (_, payload) in zip(mastra, troupe, strict=True):
        wanted = set(recorded.get("payloadKeys") or []) - PROVIDER_KEYS - ONLY_ON_FINISH.get(name, set())
        lacking = wanted - set(payload)
        if lacking:
            gaps.append((name, sorted(lacking)))
    return gaps


# ---- the tools Mastra was recorded with ------------------------------------------------------------


class Name(BaseModel):
    name: str


class Amount(BaseModel):
    amount: int


class AskMessage(BaseModel):
    message: str


class Age(BaseModel):
    age: float


def find_user(log: CallLog, **options: Any):
    def run(inp: Name, ctx: Any) -> dict[str, Any]:
        log.record("tool", tool="findUser", who=inp.name)
        return {"name": inp.name, "email": f"{inp.name.lower()}@example.com"}

    return create_tool("findUser", "Find a user by name", Name, run, **options)


def flag_tool(log: CallLog, tool_id: str, **options: Any):
    """lookup, deleteUser, sendEmail, chargeCard: they answer {"tool", "ok", "name"}."""

    def run(inp: Name, ctx: Any) -> dict[str, Any]:
        log.record("tool", tool=tool_id, who=inp.name)
        return {"tool": tool_id, "ok": True, "name": inp.name}

    return create_tool(tool_id, f"{tool_id} for a user", Name, run, **options)


def pay_tool(log: CallLog, **options: Any):
    def run(inp: Amount, ctx: Any) -> dict[str, Any]:
        log.record("tool", tool="pay", amount=inp.amount)
        return {"paid": inp.amount}

    return create_tool("pay", "Pay an amount", Amount, run, **options)


def ask_age(log: CallLog):
    async def run(inp: Name, ctx: Any) -> Any:
        answer = ctx.agent.resume_data
        if answer is None:
            log.record("tool", tool="askAge", who=inp.name, phase="suspend")
            return await ctx.agent.suspend({"message": f"Please provide the age of {inp.name}"})
        log.record("tool", tool="askAge", who=inp.name, age=answer.age)
        age = int(answer.age) if float(answer.age).is_integer() else answer.age
        return {"name": inp.name, "age": age}

    return create_tool(
        "askAge", "Suspends to ask for an age", Name, run, suspend_schema=AskMessage, resume_schema=Age
    )


# ---- the model -------------------------------------------------------------------------------------


def _as_sdk_output(content: str) -> dict[str, Any]:
    """A tool message as the AI SDK shows it to a model: JSON values as json, anything else as text."""
    try:
        value = json.loads(content)
    except ValueError:
        return {"type": "text", "value": content}
    if isinstance(value, dict | list):
        return {"type": "json", "value": value}
    return {"type": "text", "value": content}


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def mastra_like_model(
    log: CallLog, agent: str, plan: list[list[tuple[str, dict[str, Any], str]]], prefix: str
):
    """Tool-call turns from ``plan`` (one per step since the last user message), then a text starting
    with ``prefix`` that names the latest step's results. Auto-resume asks it to extract an answer: it
    reads the number in the user's words."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not tools and str(messages[0].get("content", "")).startswith("Extract the answer"):
            found = re.search(r"\d+", str(messages[-1]["content"]))
            return text(_compact({"age": int(found.group())}) if found else "no answer")
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        since = messages[last_user + 1 :]
        seen = [[m["tool_call_id"], _as_sdk_output(m["content"])] for m in since if m["role"] == "tool"]
        log.record("model", agent=agent, seen=seen)
        done = sum(1 for m in since if m["role"] == "assistant" and m.get("tool_calls"))
        if done < len(plan):
            return [tool_call(name, args, id=call_id) for name, args, call_id in plan[done]]
        calls = [c for m in since if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        names_by_id = {c["id"]: c["function"]["name"] for c in calls}
        last_assistant = max(i for i, m in enumerate(since) if m["role"] == "assistant")
        latest = [m for m in since[last_assistant + 1 :] if m["role"] == "tool"]
        shown = "; ".join(
            f"{names_by_id[m['tool_call_id']]}({m['tool_call_id']})={_compact(_as_sdk_output(m['content']))}"
            for m in latest
        )
        return text(prefix + shown)

    return FunctionModel(turn)


def mastra_model_inputs(trace: dict[str, Any], model: str | None = None) -> list[list[list[Any]]]:
    """What each of Mastra's model calls was sent back from tools: [[toolCallId, output], ...] per call."""
    calls = [m for m in trace["modelCalls"] if model is None or m["model"] == model]
    return [
        [[p["toolCallId"], p["output"]] for msg in m["prompt"] if msg["role"] == "tool" for p in msg["parts"]]
        for m in calls
    ]


def troupe_model_inputs(log: CallLog, agent: str | None = None) -> list[list[list[Any]]]:
    return [e["seen"] for e in log.entries("model") if agent is None or e["agent"] == agent]


# ---- replaying a recorded step ---------------------------------------------------------------------

FINAL = "Final answer. Tool results seen: "
ADA = [[("findUser", {"name": "Ada"}, "call-1")]]


def load(name: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    trace = reference(f"traces/{name}.json")
    return trace, steps_of(trace)


async def replay(
    opening: Any, step: dict[str, Any], expected: list[str] | None = None, *, same_text: bool = True
) -> Any:
    """Run one operation and compare its chunks with the recorded step's; returns the stream.
    ``same_text=False``: the chunks are Mastra's, the answer's text differs (a deliberate difference)."""
    stream = await opening
    got = troupe_chunks(await chunks_of(stream))
    want = mastra_chunks(step)
    assert names(got) == (expected if expected is not None else names(want)), step["op"]
    if expected is None:
        assert missing_keys(want, got) == [], step["op"]
    result = step.get("result") or {}
    if expected is None and same_text and result.get("status") == "success":
        assert (await stream.result()).text == result["text"], step["op"]
    return stream


async def refused(opening: Any, step: dict[str, Any], code: str | None = None) -> TroupeError:
    """The operation is refused with the recorded error code (or ``code``, a deliberate difference)."""
    with pytest.raises(TroupeError) as info:
        await opening  # a refused decision raises when asked, before any stream
    assert info.value.code == (code or step["threw"]["id"]), step["op"]
    return info.value


ADA_ARGS = {"name": "Ada"}
TASK = {"prompt": "Find the user Ada"}


def one_call(
    log: CallLog, agent_id: str, call: tuple[str, Any, str], prefix: str = FINAL, **spec: Any
) -> Agent:
    """An agent whose model (``<agent_id>-model``) makes one tool call, then answers with ``prefix``."""
    return Agent(agent_id, model=mastra_like_model(log, f"{agent_id}-model", [[call]], prefix), **spec)


def approver(log: CallLog, agent_id: str = "approver", model: str = "agent-model", **tool: Any) -> Agent:
    options = {"require_approval": True, **tool}
    return Agent(
        agent_id,
        instructions="Use findUser.",
        model=mastra_like_model(log, model, ADA, FINAL),
        tools=[find_user(log, **options)],
    )
