"""What one approval cycle (start -> pause -> approve -> finish) costs in store round trips, counted on
the wire of a real redis-server and in the transactions a real SQLite file runs.

With ``durability="exit"`` it is three, each one atomic step: the pause (the run's first write, so it is
stored with its pause), the decision's claim (against the state the host kept at the pause, so without a
read) and the finish. The default ``"sync"`` adds the run's write at its start and the checkpoint after
the approved tool has run. Through a supervisor each run writes its own steps, and the subagent's
finished record is deleted once. Then: a kept copy that is stale never decides anything (the store's
compare-and-set does).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import delete_tool, one_call
from troupe.core.run.delegation import child_run_id
from troupe.storage import RedisStore

from troupe import Agent, Memory, Runtime, SqliteStore
from troupe.errors import DecisionConflictError
from troupe.testing import CallLog, FunctionModel, text

# The writes of one cycle, in order, for each durability mode.
EXPECTED = {
    "exit": ["pause", "claim", "finish"],
    "sync": ["start", "pause", "claim", "after the tool", "finish"],
}
# The same cycle through a supervisor that delegates to the subagent owning the tool: the writes of each
# of the two runs. The subagent's run is stored when it starts (its parent, recovering, finds it by its
# id) and kept as a finished record until its parent has checkpointed its answer; then it is deleted,
# once.
EXPECTED_DELEGATED = {
    "exit": {
        "supervisor": ["delegation marked running", "pause", "claim", "the answer recorded", "end"],
        "subagent": ["start", "pause", "claim", "finished record", "deleted"],
    },
    "sync": {
        "supervisor": ["start", "delegation marked running", "pause", "claim", "the answer recorded", "end"],
        "subagent": ["start", "pause", "claim", "after the tool", "finished record", "deleted"],
    },
}


class CountingRedisStore(RedisStore):
    """A RedisStore that notes every request it sends (the store's own connection sends one command
    per request: no pipelines, no MULTI)."""

    def __init__(self, url: str, prefix: str) -> None:
        super().__init__(url, prefix=prefix)
        self.sent: list[tuple[Any, ...]] = []

    async def _link(self) -> Any:
        link = await super()._link()
        client = link.client
        if "execute" not in vars(client):
            send = client.execute

            async def counted(*args: Any) -> Any:
                self.sent.append(args)
                return await send(*args)

            client.execute = counted
        return link

    def of_run(self, run_id: str) -> list[tuple[Any, ...]]:
        """The requests that named ``run_id``'s keys (not the host's heartbeat or recovery scans)."""
        return [r for r in self.sent if any(run_id in str(part) for part in r[1:])]

    def requests_of(self, run_id: str) -> list[tuple[Any, ...]]:
        """The scripts run on ``run_id``'s keys (not one whose arguments only mention it, as a subagent's
        state names its parent)."""
        return [r for r in self.sent if r[0] == "EVALSHA" and any(run_id in k for k in r[3 : 3 + r[2]])]

    @staticmethod
    def is_write(request: Any) -> bool:
        return bool(request[0] == "EVALSHA")

    def forget(self) -> None:
        self.sent.clear()


class CountingSqliteStore(SqliteStore):
    """A SqliteStore that notes the statements its connections run, one entry per write: the BEGIN of
    its transaction, then its statements (alone in a transaction, or in its savepoint of one it shares:
    group commit). A statement outside BEGIN ... COMMIT is an entry of its own."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.transactions: list[list[str]] = []
        self._begin: str | None = None
        self._open_txn: list[str] | None = None

    def _open(self, busy_timeout_ms: int) -> sqlite3.Connection:
        conn = super()._open(busy_timeout_ms)
        conn.set_trace_callback(self._trace)
        return conn

    def _trace(self, statement: str) -> None:
        if statement.startswith("BEGIN"):
            self._begin, self._open_txn = statement, None
        elif statement.startswith("SAVEPOINT"):  # a write of a shared transaction begins
            self._open_txn = [str(self._begin)]
            self.transactions.append(self._open_txn)
        elif statement.startswith(("RELEASE", "ROLLBACK TO")):
            pass
        elif statement in ("COMMIT", "ROLLBACK"):
            self._begin = self._open_txn = None
        elif self._begin is not None:
            if self._open_txn is None:  # a write alone in its transaction (no savepoint)
                self._open_txn = [self._begin]
                self.transactions.append(self._open_txn)
            self._open_txn.append(statement)
        else:
            self.transactions.append([statement])

    def of_run(self, run_id: str) -> list[list[str]]:
        return [t for t in self.transactions if any(run_id in statement for statement in t)]

    def requests_of(self, run_id: str) -> list[list[str]]:
        """The transactions that bound ``run_id`` as a value (not one whose JSON only mentions it, as a
        subagent's state names its parent)."""
        return [t for t in self.transactions if any(f"'{run_id}'" in statement for statement in t)]

    @staticmethod
    def is_write(transaction: Any) -> bool:
        return transaction[0] == "BEGIN IMMEDIATE"

    def forget(self) -> None:
        self.transactions.clear()


async def approval_cycle(agent: Agent) -> str:
    paused = await agent.generate("delete r1")
    assert paused.finish_reason == "suspended"
    done = await agent.approve_tool_call_generate(run_id=paused.run_id)
    assert done.finish_reason == "stop"
    return paused.run_id


def cycle_runtime(tmp_path: Path, store: Any, durability: str) -> tuple[Agent, Runtime, CallLog]:
    calls = CallLog(tmp_path / "calls.jsonl")
    agent = Agent("w1", model=one_call("delete_record", {"id": "r1"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=store, executor="local", durability=durability)
    return runtime.get_agent("w1"), runtime, calls


def delegated_runtime(tmp_path: Path, store: Any, durability: str) -> tuple[Agent, Runtime, CallLog]:
    calls = CallLog(tmp_path / "calls.jsonl")
    records = Agent("records", model=one_call("delete_record", {"id": "r1"}), tools=[delete_tool(calls)])
    delegate = one_call("agent-records", {"prompt": "delete r1"}, id="d-1")
    supervisor = Agent("boss", model=delegate, agents={"records": records})
    runtime = Runtime([supervisor], storage=store, executor="local", durability=durability)
    return runtime.get_agent("boss"), runtime, calls


async def measured_cycle(agent: Agent, forget: Callable[[], None]) -> str:
    """A cycle after a warm-up one (scripts loaded, connections open), whose requests ``forget`` drops
    first; the measured cycle's run id."""
    await approval_cycle(agent)
    forget()
    return await approval_cycle(agent)


async def check_the_cycle_ran(store: Any, run_id: str, calls: CallLog, ran_in: str | None = None) -> None:
    """The run is gone, its approval audited, and the tool ran once (in ``ran_in``, a subagent's run)."""
    assert await store.load_run(run_id) is None
    assert [e["run_id"] for e in calls.entries("delete_record")].count(ran_in or run_id) == 1
    assert [e.kind for e in await store.list_audit(run_id)] == ["approved"]


@pytest.mark.redis
@pytest.mark.parametrize("durability", ["exit", "sync"])
async def test_an_approval_cycle_on_redis_is_one_lua_script_per_write(
    redis_url: str, redis_prefix: str, tmp_path: Path, durability: str
):
    store = CountingRedisStore(redis_url, redis_prefix)
    agent, runtime, calls = cycle_runtime(tmp_path, store, durability)
    try:
        run_id = await measured_cycle(agent, store.forget)
        cycle = store.of_run(run_id)
        assert [r[0] for r in cycle] == ["EVALSHA"] * len(EXPECTED[durability]), cycle
        await check_the_cycle_ran(store, run_id, calls)
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize("durability", ["exit", "sync"])
async def test_an_approval_cycle_on_sqlite_is_one_transaction_per_write(tmp_path: Path, durability: str):
    store = CountingSqliteStore(tmp_path / "troupe.db")
    agent, runtime, calls = cycle_runtime(tmp_path, store, durability)
    try:
        run_id = await measured_cycle(agent, store.forget)
        cycle = store.of_run(run_id)
        assert len(cycle) == len(EXPECTED[durability]), cycle
        assert all(t[0] == "BEGIN IMMEDIATE" for t in cycle), cycle
        # The run's first write: with "exit" it is stored with its pause, not before.
        status = "'suspended'" if durability == "exit" else "'running'"
        assert cycle[0][1].startswith("INSERT INTO runs") and status in cycle[0][1], cycle[0]
        await check_the_cycle_ran(store, run_id, calls)
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize("kind", [pytest.param("redis", marks=pytest.mark.redis), "sqlite"])
@pytest.mark.parametrize("durability", ["exit", "sync"])
async def test_a_delegated_approval_cycle_writes_each_run_once_per_step(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, durability: str
):
    store: CountingRedisStore | CountingSqliteStore
    if kind == "redis":
        store = CountingRedisStore(
            request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        )
    else:
        store = CountingSqliteStore(tmp_path / "troupe.db")
    agent, runtime, calls = delegated_runtime(tmp_path, store, durability)
    try:
        run_id = await measured_cycle(agent, store.forget)
        child = child_run_id(run_id, "d-1")
        expected = EXPECTED_DELEGATED[durability]
        for name, one_run in (("supervisor", run_id), ("subagent", child)):
            of_run = store.requests_of(one_run)
            assert len(of_run) == len(expected[name]), (name, of_run)
            assert all(store.is_write(r) for r in of_run), (name, of_run)
        assert await store.load_run(child) is None
        await check_the_cycle_ran(store, run_id, calls, ran_in=child)
    finally:
        await runtime.shutdown()


async def test_a_kept_copy_that_is_stale_decides_nothing(tmp_path: Path):
    # Host A pauses the run (and keeps the state it wrote); host B, on the same store, approves it and
    # the run finishes there. A's copy still shows the call paused, yet a second decision on A must
    # hear that the call was decided, not decline it, and the tool ran once. The second decision also
    # brings edited args the tool does not accept: on the stale copy that alone would be refused as
    # invalid, which is not why it fails.
    db = tmp_path / "troupe.db"
    a_agent, a, calls = cycle_runtime(tmp_path, SqliteStore(db), "exit")
    b_agent, b, _ = cycle_runtime(tmp_path, SqliteStore(db), "exit")
    try:
        paused = await a_agent.generate("delete r1")
        assert paused.finish_reason == "suspended"
        assert (await a.handle("w1").host.stats())["paused_states_kept"] == 1  # type: ignore[attr-defined]
        done = await b_agent.approve_tool_call_generate(run_id=paused.run_id)
        assert done.finish_reason == "stop"
        with pytest.raises(DecisionConflictError):
            await a_agent.approve_tool_call_generate(
                run_id=paused.run_id, tool_call_id="call-1", edited_args={"id": "r2"}
            )
        assert [e["run_id"] for e in calls.entries("delete_record")] == [paused.run_id]
        assert [e.kind for e in await SqliteStore(db).list_audit(paused.run_id)] == ["approved"]
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_a_host_keeps_a_bounded_number_of_paused_states(tmp_path: Path):
    # Beyond the limit the oldest go; a run whose copy went is decided from a read, as always.
    store = CountingSqliteStore(tmp_path / "troupe.db")
    agent, runtime, calls = cycle_runtime(tmp_path, store, "exit")
    host = runtime.handle("w1").host  # type: ignore[attr-defined]
    host.engine.loop.paused.limit = 2
    try:
        runs = [(await agent.generate(f"delete r{i}")).run_id for i in range(3)]
        assert (await host.stats())["paused_states_kept"] == 2
        store.transactions.clear()
        for run_id in runs:
            assert (await agent.approve_tool_call_generate(run_id=run_id)).finish_reason == "stop"
        reads = [t for t in store.transactions if t[0].startswith("SELECT body, version FROM runs")]
        assert [run_id for run_id in runs if any(run_id in t[0] for t in reads)] == [runs[0]]
        assert (await host.stats())["paused_states_kept"] == 0
        for run_id in runs:
            await check_the_cycle_ran(store, run_id, calls)
    finally:
        await runtime.shutdown()


async def test_with_exit_a_run_that_ends_before_its_first_write_only_adds_to_its_thread(tmp_path: Path):
    # Nothing paused and no tool ran: the run was never stored, so its end is its messages joining the
    # thread (one write), not a write of the run and its deletion.
    store = CountingSqliteStore(tmp_path / "troupe.db")
    agent = Agent("chat", model=FunctionModel(lambda messages, tools: text("hello")), memory=Memory())
    runtime = Runtime([agent], storage=store, executor="local", durability="exit")
    try:
        done = await agent.generate("hi", thread_id="t1", resource_id="u1")
        assert done.finish_reason == "stop"
        writes = [t for t in store.of_run(done.run_id) if t[0] == "BEGIN IMMEDIATE"]
        assert writes == [], writes
        said = [t for t in store.transactions if any("INSERT INTO messages" in s for s in t)]
        assert len(said) == 1, said
        assert [m["content"] for m in await store.load_messages("t1")] == ["hi", "hello"]
        assert await store.load_run(done.run_id) is None
    finally:
        await runtime.shutdown()


def test_an_unknown_durability_is_refused_naming_the_modes():
    with pytest.raises(ValueError, match="durability must be one of sync, exit; got 'always'"):
        Runtime([], executor="local", durability="always")  # type: ignore[arg-type]
