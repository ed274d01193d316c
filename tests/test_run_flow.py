"""The run's flow as values: every operation ends as one tagged outcome (finished, paused or failed),
and a pause from a subagent reaches the top as a typed ``PauseEvent`` (its deadline a datetime, its path
a tuple) that the pause chunk's payload is written from, across Ray actors too."""

from __future__ import annotations

import inspect
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from clocks import FileClock
from helpers import chunks_of, delete_tool, echo_model, one_call
from trees import delegating, leaf
from troupe.core.run.engine import RunEngine
from troupe.core.run.flow import Failed, Finished, Paused
from troupe.core.vocabulary.chunks import PauseEvent
from troupe.core.vocabulary.errors import ModelError
from troupe.core.vocabulary.requests import Approve, DecideRequest, StartRequest

from troupe import Agent, ApproverPolicy, Chunk, Runtime, SqliteStore
from troupe.testing import FunctionModel, tool_call


async def test_each_operation_ends_as_one_tagged_outcome(tmp_path, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    engine = RunEngine(agent, SqliteStore(tmp_path / "t.db"))
    chunks: list[Chunk] = []

    start = await engine.begin_start(StartRequest("delete a"))
    await start.execute(chunks.append)
    assert isinstance(start.outcome, Paused)
    [event] = start.outcome.pauses
    assert (event.tool_call_id, event.tool_name, event.args) == ("call-1", "delete_record", {"id": "a"})
    assert chunks[-1].pause == event, "the outcome's pause is the one announced"

    decision = await engine.begin_decision(DecideRequest(start.run_id, Approve(), "call-1"))
    await decision.execute(chunks.append)
    assert decision.outcome == Finished("stop")
    assert calls.count("delete_record") == 1

    def broken(messages, tools):
        raise RuntimeError("model server down")

    failing = RunEngine(Agent("flaky", model=FunctionModel(broken)), SqliteStore(tmp_path / "f.db"))
    operation = await failing.begin_start(StartRequest("hello"))
    ended: list[Chunk] = []
    await operation.execute(ended.append)
    assert isinstance(operation.outcome, Failed) and isinstance(operation.outcome.error, ModelError)
    assert [c.type for c in ended[-2:]] == ["error", "finish"]


async def test_a_subagents_pause_reaches_the_top_as_a_typed_event_with_its_deadline(
    make_runtime, calls, tmp_path
):
    clock = FileClock(tmp_path / "now")
    # The deadline is set below; the levels above set none of their own.
    data = Agent(
        "data",
        model=echo_model(tool_call("delete_record", {"id": "u1"}, id="leaf-1")),
        tools=[delete_tool(calls)],
        default_options={"approval_timeout": 30},
    )
    mid = Agent("mid", model=delegating("mid", ("data", "delete u1", "m1")), agents={"data": data})
    top = Agent("top", model=delegating("top", ("mid", "clean up", "t1")), agents={"mid": mid})
    make_runtime([top], clock=clock)

    stream = await top.stream("tidy up")
    approval = next(c for c in await chunks_of(stream) if c.type == "tool-call-approval")

    event = approval.pause
    assert isinstance(event, PauseEvent)
    assert isinstance(event.expires_at, datetime)
    assert event.expires_at == clock() + timedelta(seconds=30), "the leaf's deadline, carried up as is"
    assert (event.run_id, event.tool_call_id) == (stream.run_id, "t1")
    assert event.agent_path == ("top", "mid", "data")
    assert (event.tool_name, event.args) == ("delete_record", {"id": "u1"})
    assert approval.payload == event.payload(), "the chunk's payload is written from the event"
    assert approval.payload["expires_at"] == event.expires_at.isoformat()


def _walk() -> list[str]:
    """The architecture page's walk of one approval: its numbered lines, in order."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "concepts" / "architecture.md").read_text()
    section = text.split("## One approval, end to end", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if re.match(r"\d+\. ", line)]


def _callable_names(lines: list[str]) -> list[tuple[str, Any]]:
    """The functions the walk names, in order: ``Class.method`` or a module-level function of troupe
    (classes, types and file names it also mentions are not calls)."""
    modules = [m for name, m in sorted(sys.modules.items()) if name.startswith("troupe.")]
    found = []
    for token in (t for line in lines for t in re.findall(r"`([\w.]+)`", line)):
        owner, _, attr = token.rpartition(".")
        if owner:
            cls = next(getattr(m, owner) for m in modules if isinstance(getattr(m, owner, None), type))
            assert callable(getattr(cls, attr)), token
            found.append((token, cls))
        elif any(inspect.isfunction(getattr(m, token, None)) for m in modules):
            found.append((token, None))
    return found


Call = tuple[str, str, str, Any]  # a function's name, qualified name, module, and its ``self`` if any


def _is(entry: Call, token: str, cls: type | None) -> bool:
    co_name, qualname, module, this = entry
    if cls is not None:
        return co_name == token.rpartition(".")[2] and isinstance(this, cls)
    return qualname == token and module.startswith("troupe.")


async def _approve_a_subagents_call_recording_calls(tmp_path: Path, calls: Any) -> list[Call]:
    sup = Agent("sup", model=delegating("sup", ("data", "delete u1", "d1")), agents={"data": leaf(calls)})
    policies = [ApproverPolicy(tool="delete_record")]
    runtime = Runtime(
        [sup], storage=SqliteStore(tmp_path / "t.db"), executor="local", approver_policies=policies
    )
    seen: list[Call] = []

    def record(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            code, self_ = frame.f_code, frame.f_locals.get("self")
            seen.append((code.co_name, code.co_qualname, frame.f_globals.get("__name__", ""), self_))

    try:
        paused = await sup.stream("please delete u1")
        await paused.result()
        sys.setprofile(record)
        try:
            approved = await sup.approve_tool_call(run_id=paused.run_id, tool_call_id="d1", decided_by="ann")
            result = await approved.result()
        finally:
            sys.setprofile(None)
    finally:
        await runtime.shutdown()
    assert calls.count("delete_record") == 1 and result.finish_reason == "stop"
    return seen


def test_the_docs_walk_meets_each_module_of_the_core_once():
    """A reader following the walk opens each of core's modules at one step, never twice: claim and
    ruling do not go back and forth, and the loop is one step however many calls it makes."""
    walk = _walk()
    places: dict[str, list[int]] = {}
    for number, line in enumerate(walk, 1):
        for path in set(re.findall(r"`(core/[\w/]+\.py)`", line)):
            places.setdefault(path, []).append(number)
    assert len(places) >= 8, places
    twice = {path: steps for path, steps in places.items() if len(steps) > 1}
    assert not twice, f"modules the walk visits more than once: {twice}"
    root = Path(__file__).resolve().parent.parent
    assert all((root / path).is_file() for path in places), places


async def test_the_docs_walk_of_one_approval_is_the_path_an_approval_takes(tmp_path, calls):
    """Every function the architecture page's walk names is called, in that order, when a decision
    on a subagent's call is approved (recorded with a profiler: nothing is stubbed)."""
    from troupe.actors.handle import AgentHandle  # noqa: F401 - the walk names it: have it imported
    from troupe.core.run.claim import Claims  # noqa: F401

    walk = _walk()
    assert 0 < len(walk) <= 10, walk
    seen = await _approve_a_subagents_call_recording_calls(tmp_path, calls)
    position = 0
    for token, cls in _callable_names(walk):
        later = next((i for i in range(position, len(seen)) if _is(seen[i], token, cls)), None)
        assert later is not None, f"the docs' walk names {token}: not called after the hop before it"
        position = later
