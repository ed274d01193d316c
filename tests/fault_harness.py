"""Fault injection: crash something at every checkpoint boundary of a scripted supervisor run, restart
what was killed, settle the run from a fresh runtime, and check the guarantees held.

A *boundary* is the moment just before or just after a write to the store (create, checkpoint, claim,
delete, thread append) — the points where a crash changes what is durable. ``FaultyStore`` wraps the real
store (SQLite or Redis), counts boundaries across every process of the run (driver and actors) in a
shared file, and at the chosen one kills its target with SIGKILL: the process that reached it (the
driver under the local executor, an agent actor under Ray) or the redis-server.

Invariants checked after settling (``check``):
  I1 every run is over: nothing is left running, suspended or finished-but-unclaimed;
  I2 an approved, non-idempotent tool ran at most once; a declined tool never ran (read from the tools'
     own ledger, whatever the audit log says: the script never approves refund, so it must never run);
  I3 no acknowledged decision was lost: each one is in the audit log;
  I4 the supervisor's run finished exactly once: its thread holds exactly one final answer (none if it
     was cancelled);
  I5 no acknowledged cancel was lost: the run's audit log holds it, and the run never went on after it.

With a seed (``--seed``), the client cancels the run at random instead of deciding (a cancel mixed with
the decisions before it, and with the kills).

    python tests/fault_harness.py full [--targets driver,redis,actor] [--seed N]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from troupe.core.vocabulary.store import AuditEntry, StoredRun, SuspendedRunQuery

from troupe import Agent, Memory, RedisStore, Runtime, SqliteStore, create_tool
from troupe.errors import DecisionConflictError, ToolCallInDoubtError
from troupe.testing import CallLog, FunctionModel, text, tool_call

TESTS = Path(__file__).resolve().parent
RUN_ID = "fault-run"
THREAD = "fault-thread"


# ---- the store that crashes things -------------------------------------------------------------------


class FaultyStore:
    """A Store proxy that counts write boundaries and kills its target at the planned one."""

    shared_across_processes = True

    def __init__(self, inner: Any, plan_dir: str) -> None:
        self.inner = inner
        self.plan_dir = plan_dir
        self.identity = f"faulty:{getattr(inner, 'identity', '?')}"

    def __reduce__(self) -> Any:
        return (FaultyStore, (self.inner, self.plan_dir))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _boundary(self, label: str) -> None:
        plan_path = Path(self.plan_dir, "plan.json")
        plan = json.loads(plan_path.read_text()) if plan_path.exists() else {}
        with open(Path(self.plan_dir, "boundaries.log"), "a+") as log:
            fcntl.flock(log, fcntl.LOCK_EX)
            log.seek(0)
            count = sum(1 for _ in log) + 1
            log.write(f"{count} {os.getpid()} {label}\n")
            log.flush()
            fcntl.flock(log, fcntl.LOCK_UN)
        if plan.get("kill_at") != count:
            return
        # Written down before the kill, so the checker can tell the crash landed here and nowhere else.
        Path(self.plan_dir, "killed").write_text(f"{count} {os.getpid()} {label}\n")
        target = plan["target"]
        if target == "redis":
            os.kill(int(plan["redis_pid"]), signal.SIGKILL)
            time.sleep(0.05)  # let the socket close before the write goes out
        else:  # the process that reached the boundary: the driver, or the actor that holds the run
            os.kill(os.getpid(), signal.SIGKILL)

    async def _write(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self._boundary(f"before {method}")
        result = await getattr(self.inner, method)(*args, **kwargs)
        self._boundary(f"after {method}")
        return result

    async def create_run(self, state: Any) -> int:
        version: int = await self._write("create_run", state)
        return version

    async def save_run(
        self,
        state: Any,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: Any = None,
        **outbox: Any,
    ) -> int:
        version: int = await self._write(
            "save_run", state, expected_version=expected_version, audit=audit, thread=thread, **outbox
        )
        return version

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: Any = None
    ) -> None:
        await self._write("delete_run", run_id, expected_version=expected_version, thread=thread)

    async def append_messages(self, thread_id: str, resource_id: str | None, messages: list[Any]) -> None:
        await self._write("append_messages", thread_id, resource_id, messages)


# ---- the scripted supervisor run ---------------------------------------------------------------------


class Amount(BaseModel):
    amount: int


def agents(log: CallLog) -> Agent:
    """sup delegates to ops; ops makes three calls in one step: charge (gated, approved), refund
    (gated, declined) and lookup (ungated, idempotent)."""

    def tool(name: str, **options: Any) -> Any:
        def run(inp: Amount, ctx: Any) -> dict[str, Any]:
            log.record(name, phase="start", call=ctx.tool_call_id)
            log.record(name, phase="end", call=ctx.tool_call_id)
            return {name: inp.amount}

        # A deadline of its own: a call taken over from a dead driver is in doubt only until then.
        return create_tool(name, name, Amount, run, timeout_s=1.0, **options)

    def ops_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return [
                tool_call("charge", {"amount": 5}, id="charge-1"),
                tool_call("refund", {"amount": 9}, id="refund-1"),
                tool_call("lookup", {"amount": 1}, id="lookup-1"),
            ]
        return text("ops: " + " | ".join(f"{m['tool_call_id']}={m['content']}" for m in results))

    def sup_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return tool_call("agent-ops", {"prompt": "charge 5, refund 9, look up 1"}, id="d1")
        return text("sup: " + results[-1]["content"])

    ops = Agent(
        "ops",
        model=FunctionModel(ops_turn),
        tools=[
            tool("charge", require_approval=True),
            tool("refund", require_approval=True),
            tool("lookup", idempotent=True),
        ],
    )
    return Agent("sup", model=FunctionModel(sup_turn), agents={"ops": ops}, memory=Memory())


def real_store(spec: str) -> Any:
    return RedisStore.from_url(spec, prefix="fault:") if spec.startswith("redis://") else SqliteStore(spec)


@dataclass
class Case:
    workdir: Path
    store: str  # SQLite path or redis:// URL
    executor: str = "local"
    ray_address: str | None = None
    # With a seed, the client may cancel the run (at random, the same way each time) instead of deciding.
    seed: int | None = None

    @property
    def log(self) -> CallLog:
        return CallLog(self.workdir / "calls.jsonl")

    @property
    def acks(self) -> Path:
        return self.workdir / "acks.jsonl"


async def drive(case: Case) -> None:
    """The client's side: start the run, approve charge, decline refund. Each acknowledged step is
    written down before the next, so the checker knows what the client was told."""
    sup = agents(case.log)
    Runtime(
        [sup],
        storage=FaultyStore(real_store(case.store), str(case.workdir)),
        executor=case.executor,
        ray_address=case.ray_address,
    )  # type: ignore[arg-type]

    def ack(**entry: Any) -> None:
        with case.acks.open("a") as acks:
            acks.write(json.dumps(entry) + "\n")

    chance = random.Random(case.seed)
    paused = await sup.generate("settle the account", run_id=RUN_ID, thread_id=THREAD)
    ack(step="started")
    while paused.finish_reason == "suspended":
        pending = paused.suspend_payload or {}
        if case.seed is not None and chance.random() < 0.5:
            await sup.cancel_run(RUN_ID, reason="chaos")
            ack(step="cancelled")
            return
        # A careful client: a call that was interrupted mid-run may have taken effect, so it is declined
        # rather than approved a second time.
        approve = pending["tool_name"] == "charge" and not pending.get("interrupted")
        if approve:
            paused = await sup.approve_tool_call_generate(
                run_id=RUN_ID, tool_call_id=pending["tool_call_id"], fingerprint=pending["fingerprint"]
            )
        else:
            paused = await sup.decline_tool_call_generate(
                run_id=RUN_ID,
                tool_call_id=pending["tool_call_id"],
                fingerprint=pending["fingerprint"],
                reason="no refund",
            )
        ack(step="decided", tool=pending["tool_name"], approved=approve)
    ack(step="finished", text=paused.text)


async def settle(case: Case, deadline_s: float = 60.0) -> dict[str, Any]:
    """A fresh runtime (no faults) recovers what was in flight and decides what still waits, the way an
    operator would: interrupted calls are declined (a crash must never turn into a second run)."""
    sup = agents(case.log)
    runtime = Runtime([sup], storage=real_store(case.store), executor="local", in_doubt_margin_s=0.5)
    store = runtime.store()
    decisions = 0
    try:
        deadline = time.monotonic() + deadline_s
        await runtime.recover(wait_s=2.0)
        while time.monotonic() < deadline:
            running = [r for a in ("sup", "ops") for r in await store.list_running_runs(a)]
            if running:
                await asyncio.sleep(0.1)  # recovered runs are being driven
                continue
            listed = await sup.list_suspended_runs()
            if not listed.runs:
                break
            run = listed.runs[0]
            pending = run.pending[-1]
            try:
                if pending.interrupted or pending.tool_name != "charge":
                    await sup.decline_tool_call_generate(
                        run_id=run.run_id,
                        tool_call_id=pending.tool_call_id,
                        fingerprint=pending.fingerprint,
                        reason="settling",
                    )
                else:
                    await sup.approve_tool_call_generate(
                        run_id=run.run_id, tool_call_id=pending.tool_call_id, fingerprint=pending.fingerprint
                    )
            except DecisionConflictError:
                await asyncio.sleep(0.1)  # decided (or cancelled) before the crash: the run catches up
            except ToolCallInDoubtError as exc:  # the dead driver might still be running it: wait it out
                fence = datetime.fromisoformat(exc.details["deadline"])
                await asyncio.sleep(max(0.05, (fence - datetime.now(UTC)).total_seconds()))
            decisions += 1
        return await check(case, store, decisions)
    finally:
        await runtime.shutdown()


async def check(case: Case, store: Any, decisions: int) -> dict[str, Any]:
    problems: list[str] = []
    acks = [json.loads(line) for line in case.acks.read_text().splitlines()] if case.acks.exists() else []
    started = any(a["step"] == "started" for a in acks)
    # I1: nothing left over.
    for agent in ("sup", "ops"):
        if await store.list_running_runs(agent):
            problems.append(f"I1: {agent} still has running runs")
        if (await store.list_suspended_runs(SuspendedRunQuery(agent_id=agent)))[1]:
            problems.append(f"I1: {agent} still has suspended runs")
    top: StoredRun | None = await store.load_run(RUN_ID)
    if top is not None:
        problems.append(f"I1: the supervisor's run is still stored ({top.state.status})")
    from troupe.core.run.delegation import child_run_id

    child = child_run_id(RUN_ID, "d1")
    if await store.load_run(child) is not None:
        problems.append("I1: the subagent's run is still stored")
    # I2: at most once; declined never ran.
    log = case.log
    for name in ("charge", "refund"):
        runs = [e for e in log.entries(name) if e["phase"] == "start"]
        if len(runs) > 1:
            problems.append(f"I2: {name} ran {len(runs)} times")
    audit = await store.list_audit(child)
    # Nobody ever approves refund (the client and the settler decline it): the ledger must not show it,
    # even when a crash kept the decline from reaching the audit log.
    if any(e["phase"] == "start" for e in log.entries("refund")):
        problems.append("I2: refund was never approved yet ran")
    # I3: every acknowledged decision is in the audit log (at the leaf, which decided it).
    for a in acks:
        if a["step"] == "decided":
            kind = "approved" if a["approved"] else "declined"
            call = "charge-1" if a["tool"] == "charge" else "refund-1"
            if not any(e.tool_call_id == call and e.kind == kind for e in audit):
                problems.append(f"I3: acknowledged {kind} of {call} is not in the audit log")
    # I4: exactly one final answer in the thread, if the run was ever acknowledged (or exists at all),
    # and none if it was cancelled.
    finals = [
        m
        for m in await store.load_messages(THREAD)
        if m["role"] == "assistant" and str(m.get("content") or "").startswith("sup:")
    ]
    top_audit = await store.list_audit(RUN_ID)
    cancelled = any(e.kind == "cancelled" and not e.tool_call_id for e in top_audit)
    if cancelled and finals:
        problems.append(f"I4: the supervisor's run was cancelled, yet finished {len(finals)} times")
    if not cancelled and (started or finals) and len(finals) != 1:
        problems.append(f"I4: the supervisor's run finished {len(finals)} times")
    # I5: an acknowledged cancel is on record (and, by I4, the run did not go on).
    if any(a["step"] == "cancelled" for a in acks) and not cancelled:
        problems.append("I5: an acknowledged cancel is not in the audit log")
    return {
        "problems": problems,
        "acks": acks,
        "decisions": decisions,
        "finals": len(finals),
        "charge_runs": len([e for e in log.entries("charge") if e["phase"] == "start"]),
    }


# ---- running one case ---------------------------------------------------------------------------------


def boundaries(workdir: Path) -> list[str]:
    path = workdir / "boundaries.log"
    return [line.split(" ", 2)[2].strip() for line in path.read_text().splitlines()] if path.exists() else []


# A driver takes seconds; one past this limit is hung (as they were when a heartbeat lost its cancel and
# kept the driver from exiting after its redis-server was killed: see troupe.core.cancellation).
def run_driver(case: Case, timeout_s: float = 120.0) -> int:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
        "TROUPE_HEARTBEAT_S": os.environ.get("TROUPE_HEARTBEAT_S", "0.3"),
    }
    args = [
        sys.executable,
        str(Path(__file__)),
        "drive",
        "--workdir",
        str(case.workdir),
        "--store",
        case.store,
        "--executor",
        case.executor,
    ]
    if case.ray_address:
        args += ["--ray-address", case.ray_address]
    if case.seed is not None:
        args += ["--seed", str(case.seed)]
    return subprocess.run(
        args, env=env, timeout=timeout_s, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    ).returncode


def crash_site(workdir: Path) -> tuple[int, int, str] | None:
    """Where the planned kill happened: (boundary, pid of the process that reached it, its label)."""
    path = workdir / "killed"
    if not path.exists():
        return None
    count, pid, label = path.read_text().strip().split(" ", 2)
    return int(count), int(pid), label


def plan(workdir: Path, kill_at: int, target: str, redis_pid: int | None = None) -> None:
    payload: dict[str, Any] = {"kill_at": kill_at, "target": "redis" if target == "redis" else "self"}
    if redis_pid is not None:
        payload["redis_pid"] = redis_pid
    (workdir / "plan.json").write_text(json.dumps(payload))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("drive")
    one.add_argument("--workdir", required=True)
    one.add_argument("--store", required=True)
    one.add_argument("--executor", default="local")
    one.add_argument("--ray-address")
    one.add_argument("--seed", type=int)
    full = sub.add_parser("full", help="every boundary x every target (takes a while)")
    full.add_argument("--targets", default="driver,redis,actor")
    full.add_argument("--seed", type=int, help="the client cancels at random (this seed) instead of deciding")
    args = parser.parse_args()
    if args.command == "drive":
        case = Case(Path(args.workdir), args.store, args.executor, args.ray_address, args.seed)
        asyncio.run(drive(case))
        return
    from fault_cases import run_matrix

    failures = run_matrix(args.targets.split(","), every=1, seed=args.seed)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
