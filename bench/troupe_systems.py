"""Troupe under the shared workloads: the same agents and cycles as bench/approval_cycle.py and
bench/suspended_scale.py (bench_agents.build_agent / build_supervisor, the streaming cycle, host_stats)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from approval_cycle import generate_cycle
from approval_cycle import one_cycle as stream_cycle
from bench_agents import build_agent, build_supervisor, make_store
from bench_common import path_bytes, redis_pid, redis_used
from harness import FINAL_TEXT, System
from raw_writes import raw_writer
from suspended_scale import host_stats
from troupe.core.vocabulary.listing import MAX_PER_PAGE

from troupe import Runtime

STORE_NAMES = {"memory": "MemoryStore", "sqlite": "SqliteStore", "redis": "RedisStore"}
DEFAULT_MODES = {"sqlite": "normal", "redis": "everysec"}
DURABILITY = {
    "everysec": "Redis AOF, appendfsync everysec",
    "always": "Redis AOF, appendfsync always",
    "normal": "SQLite WAL, synchronous=NORMAL",
    "full": "SQLite WAL, synchronous=FULL",
}


# Samples of each part of a W1 cycle (TroupeSystem.w1_parts), after a few untimed: a fraction of a
# second on any store.
PARTS_WARMUP = 10
PARTS_SAMPLES = 100


async def _took_ms(job: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await job
    return (time.perf_counter() - started) * 1000


class TroupeSystem(System):
    family = "Troupe"

    def __init__(
        self, workdir: Path, env: dict[str, Any], executor: str, store: str, mode: str = "", writes: str = ""
    ) -> None:
        super().__init__(workdir, env)
        self.executor = executor
        self.store_kind = store
        # Durability: Redis's appendfsync (its server is started so) or SQLite's synchronous.
        self.mode = mode or DEFAULT_MODES.get(store, "")
        # When the runtime writes a run: "sync" (Runtime's default) or "exit" (Runtime(durability="exit")).
        self.writes = writes or "sync"
        self.key = "-".join(
            ["troupe", executor, store, *([mode] if mode else []), *([writes] if writes else [])]
        )
        self.durable = store != "memory"
        self.durability = DURABILITY.get(self.mode, "in memory")
        if self.durable:
            self.durability += f"; durability={self.writes}"
        self.label = f"Troupe {version('troupe-runtime')} {executor} + {STORE_NAMES[store]}" + (
            f", {self.durability}" if self.durable else ""
        )
        self.runtimes: list[Runtime] = []
        self.supervisor: Any = None

    def _storage(self, name: str) -> Any:
        tag = f"{self.key}-{self.env['store_tag']}-{name}"
        prefix = f"bench-{self.env['nonce']}-{tag}:"
        redis_url = self.env.get("redis_urls", {}).get(self.mode)
        return make_store(self.store_kind, self.workdir / f"{tag}.db", redis_url, prefix, self.mode)

    def _runtime(self, agent: Any, name: str) -> Any:
        storage = self._storage(name)
        runtime = Runtime([agent], storage=storage, executor=self.executor, durability=self.writes)  # type: ignore[arg-type]
        self.runtimes.append(runtime)
        return runtime

    async def open(self) -> None:
        self.runtime = self._runtime(build_agent(self.model_turn_s, self.model_waits), "main")
        self.agent = self.runtime.get_agent("bench")
        await host_stats(self.runtime)  # starts Ray (if used) and the agent's host, as a restart would

    async def first_pause(self) -> dict[str, Any]:
        """In a fresh process, not opened: the store and ``Runtime(...)`` constructed as a program would,
        then ``generate`` until the first run is paused (on Ray that starts Ray and the agent's actor);
        the run is approved afterwards, untimed. The imports (troupe, and Ray with it) came before."""
        started = time.perf_counter()
        self.runtime = self._runtime(build_agent(), "main")
        built = time.perf_counter()
        self.agent = self.runtime.get_agent("bench")
        token = await self.pause(0)
        paused = time.perf_counter()
        await self.approve(token)
        return {
            "runtime_ms": round((built - started) * 1000, 1),
            "first_pause_ms": round((paused - started) * 1000, 1),
        }

    async def close(self) -> None:
        for runtime in self.runtimes:
            await runtime.shutdown()

    async def _cycle(self, agent: Any) -> None:
        await (stream_cycle if self.api == "stream" else generate_cycle)(agent)

    async def w1(self) -> None:
        await self._cycle(self.agent)

    async def w2(self) -> None:
        if self.supervisor is None:
            self.supervisor = self._runtime(build_supervisor(), "w2").get_agent("bench-supervisor")
        await self._cycle(self.supervisor)

    async def pause(self, i: int) -> Any:
        paused = await self.agent.generate(f"delete record {i}")
        assert paused.finish_reason == "suspended", paused.finish_reason
        return paused.run_id, paused.suspend_payload["tool_call_id"]

    async def approve(self, token: Any) -> None:
        run_id, tool_call_id = token
        done = await self.agent.approve_tool_call_generate(run_id=run_id, tool_call_id=tool_call_id)
        assert done.text == FINAL_TEXT, done.text

    async def list_paused(self) -> list[Any]:
        """Every paused run, page after page (the largest page, following its cursor): a listing is paged
        since issue 42, and its first page alone holds 100 runs."""
        tokens: list[Any] = []
        cursor = None
        while True:
            listed = await self.agent.list_suspended_runs(per_page=MAX_PER_PAGE, cursor=cursor)
            tokens += [(run.run_id, run.pending[0].tool_call_id) for run in listed.runs]
            cursor = listed.next_cursor
            if cursor is None:
                return tokens

    async def w1_parts(self) -> dict[str, Any]:
        """What a W1 cycle is made of, measured right after its timed cycles: the actor calls one cycle
        makes (counted in this process; none in-process), a bare call's time (``ping``), and a store
        write's time: the runtime's own store (the same redis-server or SQLite file) inserting, updating
        (compare-and-set) and deleting copies of the W1 run's paused state under run ids of their own."""
        parts: dict[str, Any] = {"actor_calls_per_cycle": 0}
        handle = self.runtime.handle("bench")
        replicas = getattr(handle, "replicas", [])
        if replicas:
            calls = await self._count_calls(replicas)
            parts["actor_calls_per_cycle"] = calls
            took = [await _took_ms(replicas[0].call("ping")) for _ in range(PARTS_SAMPLES)]
            parts["actor_call_ms"] = round(statistics.median(took), 3)
        if self.durable:
            parts.update(await self._store_write_ms())
        return parts

    async def _count_calls(self, replicas: list[Any]) -> int:
        counted = 0

        def counting(call: Any) -> Any:
            async def call_and_count(*args: Any, **kwargs: Any) -> Any:
                nonlocal counted
                counted += 1
                return await call(*args, **kwargs)

            return call_and_count

        for actor in replicas:
            actor.call = counting(actor.call)
        try:
            await self.w1()
        finally:
            for actor in replicas:
                del actor.call  # the class's method again
        return counted

    async def _store_write_ms(self) -> dict[str, float]:
        """The store's own write (insert, compare-and-set update, delete) and, interleaved with it, the raw
        durable write of the same state (bench/raw_writes.py: a plain SET, or a plain SQLite commit): the
        median of each, in ms."""
        paused = await self.agent.generate("delete record parts")
        store = self._storage("main")  # the runtime's own store, warm as the cycles left it
        raw = self._raw_writer()
        try:
            stored = await store.load_run(paused.run_id)
            assert stored is not None, "the paused run is not in the store"
            writes: list[float] = []
            raws: list[float] = []
            for i in range(PARTS_WARMUP + PARTS_SAMPLES):
                state = stored.state.model_copy(update={"run_id": f"parts-{self.env['nonce']}-{i}"})
                took = [
                    await _took_ms(store.create_run(state)),
                    await _took_ms(store.save_run(state, expected_version=1)),
                    await _took_ms(store.delete_run(state.run_id)),
                ]
                body = state.to_json()
                raw_took = [await raw.write_ms(body) for _ in took]
                if i >= PARTS_WARMUP:
                    writes += took
                    raws += raw_took
        finally:
            await store.close()
            await raw.close()
        await self.approve((paused.run_id, paused.suspend_payload["tool_call_id"]))
        return {
            "store_write_ms": round(statistics.median(writes), 3),
            "raw_write_ms": round(statistics.median(raws), 3),
        }

    def _raw_writer(self) -> Any:
        if self.store_kind == "redis":
            return raw_writer("redis", url=self.env["redis_urls"][self.mode])
        db = self.workdir / f"{self.key}-{self.env['store_tag']}-main.db"
        return raw_writer("sqlite", store_path=db, synchronous=self.mode)

    async def store_processes(self) -> list[tuple[str, int]]:
        """Redis: the redis-server (the client only sends); SQLite and memory: the agent's actors on Ray
        (they write the file; MemoryStore on Ray is a private SQLite file), the driver in-process."""
        if self.store_kind == "redis":
            return [("redis-server", redis_pid(self.env["redis_urls"][self.mode]))]
        replicas = getattr(self.runtime.handle("bench"), "replicas", [])
        if replicas:
            return [("agent actor", int((await actor.call("stats"))["pid"])) for actor in replicas]
        return await super().store_processes()

    async def pids(self) -> list[int]:
        found = [int((await host_stats(self.runtime))["pid"])]
        if self.store_kind == "redis":
            found.append(redis_pid(self.env["redis_urls"][self.mode]))
        return found

    def store_bytes(self) -> int | None:
        if self.store_kind == "sqlite":
            db = self.workdir / f"{self.key}-{self.env['store_tag']}-main.db"
            return path_bytes(db, f"{db}-wal", f"{db}-shm")
        if self.store_kind == "redis":
            return redis_used(self.env["redis_urls"][self.mode])
        return None


def teardown() -> None:
    """End of the benchmark process: stop Ray if a configuration started it."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


def make(key: str, workdir: Path, env: dict[str, Any]) -> System:
    """troupe-<executor>-<store>[-<appendfsync or synchronous>][-exit]"""
    _, executor, store, *rest = key.split("-")
    writes = rest.pop() if rest and rest[-1] == "exit" else ""
    return TroupeSystem(workdir, env, executor, store, *rest, writes=writes)
