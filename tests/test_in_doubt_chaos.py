"""A call in doubt after a takeover is fenced by its deadline (issue 41, point 7), chaos-style: a slow
approved payment is running when redis-server is killed; its host, alive but cut off, loses its lease;
another runtime takes the run over and asks about the call again, in doubt. Whatever the person does at
once (approves, declines, or nothing), the payment runs once, the model is given its real result, and
the run finishes: the refused decision changes nothing, and the first host's late result completes the
call and takes the run on. On both executors; ``TROUPE_CHAOS_ROUNDS`` rounds of each (default 1).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from blocking import wait_for
from cancel_agents import told, until
from pydantic import BaseModel
from redis_server import RedisServer

from troupe import Agent, RedisStore, Runtime, create_tool
from troupe.errors import StorageUnavailableError, ToolCallInDoubtError
from troupe.testing import CallLog, FunctionModel, text, tool_call

pytestmark = pytest.mark.redis
ROUNDS = int(os.environ.get("TROUPE_CHAOS_ROUNDS", "1"))


class Payment(BaseModel):
    to: str
    amount: int


def paying(ledger: CallLog, gate: str) -> Agent:
    """Pays (gated; a slow tool with a 30 s timeout), then tells what it was told."""

    async def pay(inp: Payment, ctx: Any) -> dict[str, Any]:
        ledger.record("pay", phase="started", pid=os.getpid())
        await until(gate)
        ledger.record("pay", phase="paid", to=inp.to, amount=inp.amount)
        return {"paid": inp.amount, "to": inp.to}

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        heard = told(messages)
        ledger.record("model", told=heard)
        return (
            text("told: " + heard[-1]) if heard else tool_call("pay", {"to": "vendor", "amount": 10}, id="p1")
        )

    tool = create_tool("pay", "Pay someone", Payment, pay, require_approval=True, timeout_s=30)
    return Agent("ops", model=FunctionModel(turn), tools=[tool])


class CutOff:
    """A store whose host cannot renew its lease while the file ``cut`` exists (cut off from the store:
    its lease runs out, as a host's does in an outage); everything else goes to the real store. Picklable
    into a Ray actor: the file is the switch across processes."""

    shared_across_processes = True

    def __init__(self, url: str, prefix: str, cut: str) -> None:
        self.url, self.prefix, self.cut = url, prefix, cut
        self.inner = RedisStore.from_url(url, prefix=prefix)

    def __reduce__(self) -> Any:
        return (CutOff, (self.url, self.prefix, self.cut))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        if os.path.exists(self.cut):
            raise StorageUnavailableError("cut off from the store (test)")
        await self.inner.touch_owner(owner, ttl_s)


async def _one_round(
    redis: RedisServer, tmp_path: Path, executor: str, decision: str, n: int
) -> dict[str, Any]:
    prefix, root = f"doubt-{uuid.uuid4().hex[:8]}:", tmp_path / f"{decision}-{n}"
    root.mkdir()
    ledger, gate, cut = CallLog(root / "ledger.jsonl"), str(root / "gate"), str(root / "cut")
    first, second = paying(ledger, gate), paying(ledger, gate)
    one = Runtime([first], storage=CutOff(redis.url, prefix, cut), executor=executor)  # type: ignore[arg-type]
    two = Runtime([second], storage=RedisStore.from_url(redis.url, prefix=prefix), executor="local")
    try:
        paused = await first.generate("pay the vendor")
        approving = asyncio.create_task(
            first.approve_tool_call_generate(run_id=paused.run_id, decided_by="ann")
        )
        await wait_for(lambda: len(ledger.entries("pay")) == 1, what="the payment to start")

        # The first host is cut off and redis-server dies while the payment runs; Redis comes back.
        Path(cut).touch()
        redis.kill()
        redis.start()
        store = two.store()
        owner = (await store.load_run(paused.run_id)).state.owner  # type: ignore[union-attr]
        async with asyncio.timeout(60):  # its lease runs out: it renews no more
            while owner in await store.live_owners():
                await asyncio.sleep(0.05)
        await two.recover(wait_s=0)  # the other runtime takes the run over
        async with asyncio.timeout(30):
            while not (await second.list_suspended_runs()).runs:
                await asyncio.sleep(0.05)
        (pending,) = (await second.list_suspended_runs()).runs[0].pending
        assert pending.interrupted and pending.in_doubt is not None and pending.in_doubt["owner"] == owner
        os.remove(cut)  # its connection is back; it still runs the payment

        refused = None
        if decision != "none":
            decide = (
                second.approve_tool_call_generate
                if decision == "approve"
                else second.decline_tool_call_generate
            )
            with pytest.raises(ToolCallInDoubtError) as refused:
                await decide(run_id=paused.run_id, tool_call_id="p1")
            assert "in doubt" in refused.value.message and owner in refused.value.message
            assert refused.value.details["deadline"][:19] == pending.in_doubt["deadline"][:19]

        Path(gate).touch()  # the payment goes out; its host takes the run on with the real result
        done = await asyncio.wait_for(approving, 60)
        async with asyncio.timeout(30):
            while await store.load_run(paused.run_id) is not None:
                await asyncio.sleep(0.05)
        kinds = Counter(e.kind for e in await store.list_audit(paused.run_id))
    finally:
        Path(gate).touch()
        await one.shutdown()
        await two.shutdown()
    paid = [e for e in ledger.entries("pay") if e["phase"] == "paid"]
    heard = [e["told"] for e in ledger.entries("model") if e["told"]]
    assert len(paid) == 1, f"the payment went out {len(paid)} times"
    assert heard and heard[-1] == ['{"paid": 10, "to": "vendor"}'], heard
    assert done.finish_reason == "stop" and done.text.endswith('told: {"paid": 10, "to": "vendor"}')
    assert kinds["declined"] == 0 and kinds["completed"] == 1 and kinds["approved"] == 1, kinds
    return {"paid": len(paid), "finished": done.finish_reason}


@pytest.mark.parametrize("decision", ["approve", "decline", "none"])
async def test_a_call_in_doubt_after_a_takeover_runs_once_and_the_run_finishes_with_its_result(
    dedicated_redis: RedisServer,
    tmp_path: Path,
    executor: str,
    decision: str,
    monkeypatch: pytest.MonkeyPatch,
):
    from troupe.actors import host

    # In-process hosts beat fast, so a cut-off host's lease runs out soon (a Ray actor keeps its own
    # beat: its lease takes a few seconds more).
    monkeypatch.setattr(host, "HEARTBEAT_S", 0.2)
    monkeypatch.setattr(host, "OWNER_TTL_S", 0.6)
    outcomes = [await _one_round(dedicated_redis, tmp_path, executor, decision, n) for n in range(ROUNDS)]
    print(f"\n{executor} {decision}: {len(outcomes)} round(s): {outcomes}")
