"""Every decision, expiry and recovery leaves one structured line on a ``troupe.`` logger (run, call,
agent path, decision, who, fingerprint), in addition to the audit log."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from helpers import delete_tool, one_call
from inbox_agents import inbox_agents
from troupe.core.vocabulary.state import RunState

from troupe import Agent, Runtime, SqliteStore

LOGGER = "troupe.core.deciding.decision_log"


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.troupe for r in caplog.records if r.name == LOGGER]


async def test_decisions_and_expiries_are_logged_once_each_with_who_and_fingerprint(tmp_path, calls, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    runtime = Runtime(inbox_agents(calls), storage=SqliteStore(tmp_path / "d.db"), executor="local")
    ops, sup = runtime.get_agent("ops"), runtime.get_agent("sup")
    try:
        first = await ops.generate("rec-1")
        fingerprint = first.suspend_payload["fingerprint"]
        await ops.decline_tool_call_generate(
            run_id=first.run_id, tool_call_id="call-1", decided_by="ana\x1b[2J"
        )
        nested = await sup.generate("rec-2")
        await sup.approve_tool_call_generate(run_id=nested.run_id, tool_call_id="d1", decided_by="bo")
        late = await ops.generate("rec-3", approval_timeout=0.05)
        await asyncio.sleep(0.1)
        await runtime.expire_due()
        await (await ops.observe_stream(run_id=late.run_id)).result()
    finally:
        await runtime.shutdown()

    logged = lines(caplog)
    assert [(e["event"], e["run"], e["decision"], e["who"]) for e in logged] == [
        ("decision", first.run_id, "declined", "ana\x1b[2J"),
        ("decision", nested.run_id, "approved", "bo"),  # once, at the top, though two levels claimed it
        ("expiry", late.run_id, "expired", "expiry"),
    ]
    assert logged[0]["call"] == "call-1" and logged[0]["fingerprint"] == fingerprint
    assert logged[1]["agent_path"] == ["sup", "data"] and logged[1]["tool"] == "delete_record"
    text = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert text[0].startswith(f'decision run="{first.run_id}" call="call-1" agent_path=["ops"]')
    assert '"ana\\u001b[2J"' in text[0] and "\x1b" not in text[0], "no raw control characters in logs"


async def test_a_recovery_is_logged(tmp_path, calls, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    store = SqliteStore(tmp_path / "r.db")
    orphan = RunState(
        run_id="orphan", agent_id="ops", owner="host-that-died", messages=[{"role": "user", "content": "go"}]
    )
    await store.create_run(orphan)
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=store, executor="local")
    try:
        assert await runtime.recover(0.0) == {"ops": ["orphan"]}
    finally:
        await runtime.shutdown()
    [line] = lines(caplog)
    assert (line["event"], line["run"], line["decision"]) == ("recovery", "orphan", "recovered")
    assert line["previous_owner"] == "host-that-died" and line["who"] != "host-that-died"
    assert json.loads(json.dumps(line))  # plain data, as structured handlers need
