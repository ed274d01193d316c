"""Scale: the inbox and approvals with 200, 2,000 and 100,000 runs waiting (issue 42's targets).

For each configuration and each number of waiting runs N, in one process, on a fresh store:

- **seed**: N paused runs, written through the store directly (``store.create_run``, 500 at a time, so
  SqliteStore's group commit and Redis's pipelining batch them): copies of a run the agent really paused,
  each with its own id, pause time and tenant. Pausing 100,000 runs through the agent takes minutes on
  Ray; the store's write is the same either way (same indexes, counters, change log). Then, untimed,
  the store settles (SQLite's log checkpointed into the database file; Redis's append-only file not
  being rewritten), so what is timed next does not share the disk with the seeding's aftermath.
Every size of a configuration is seeded first, each on its runtime and store (kept open), and then
measured side by side, one sample of each size in turn, so that the shared machine's slow moments fall
on every size alike:

- **inbox page**: ``GET /api/inbox?perPage=100`` over real HTTP (uvicorn on a free port, in this process),
  the first page and a page deep in the cursor (the cursor of the page that starts 90% of the way in, or
  of the last full page), each timed ``--requests`` times (median, p90).
- **pause to event**: an inbox event stream open (the server looks every 20 ms, ``min_event_interval_s``),
  a run paused through the agent (``generate``), and the time from ``generate`` returning (the pause is
  durable and announced) to the stream's frame that lists it; ``--events`` times.
- **approval**: ``approve_tool_call_generate`` one at a time (the tool runs, the model answers, the run
  ends): of seeded runs, which the host never kept (a decision past its cache of 1,024 paused states,
  one read of the run by its id), and of runs it just paused (kept: no read); ``--approvals`` each.
- **host memory**: the agent host's RSS (the agent's actor on Ray; in-process, the driver, which holds
  every size's host, so its figures add up from one size to the next) before seeding, after it, and at
  the end.

Targets (issue 42): an inbox page <= 50 ms at 100,000 and within 2x of its time at 200; an approval at
100,000 within 1.2x of its time at 200; the host's memory bounded (not growing with N beyond the paused
cache's fixed size).

    python bench/inbox_scale.py [--sizes 200,2000,100000] [--configs local-sqlite-full,ray-redis-always]
                                [--requests 20] [--events 20] [--approvals 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio
import uvicorn
from bench_agents import build_agent, make_store
from bench_common import free_port, percentile, private_redis, rss_mb
from suspended_scale import host_stats
from troupe.api.app import create_app
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import Store

from troupe import RedisStore, Runtime, SqliteStore

CONFIGS = {  # name: (executor, store, durability)
    "local-sqlite-full": ("local", "sqlite", "FULL"),
    "ray-redis-always": ("ray", "redis", "always"),
}
SEED_BATCH = 500
TENANTS = 10
EVENT_INTERVAL_S = 0.02


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": ms(statistics.median(samples)), "p90_ms": ms(percentile(samples, 0.9))}


async def seed(store: Store, template: RunState, runs: int, tag: str) -> float:
    """``runs`` copies of ``template`` (each its own id, pause time a millisecond apart, one of TENANTS
    resources), written through the store; returns the seconds it took."""
    started = time.perf_counter()
    base = template.calls[0].pauses[0].paused_at - timedelta(days=1)
    for first in range(0, runs, SEED_BATCH):
        batch = []
        for i in range(first, min(first + SEED_BATCH, runs)):
            state = template.model_copy(deep=True)
            state.run_id = f"{tag}-{i:06d}"
            state.resource_id = f"tenant-{i % TENANTS}"
            state.calls[0].pauses[0].paused_at = base + timedelta(milliseconds=i)
            batch.append(store.create_run(state))
        await asyncio.gather(*batch)
    return time.perf_counter() - started


@contextlib.asynccontextmanager
async def served(runtime: Runtime) -> AsyncIterator[str]:
    """The runtime's front door on a free loopback port, in this process (open mode)."""
    app = create_app(runtime, open_mode=True, min_event_interval_s=EVENT_INTERVAL_S)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn says it has started by a flag, not an event
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/api"
    finally:
        server.should_exit = True
        await task


async def timed_gets(client: httpx.AsyncClient, path: str, params: dict[str, Any], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        response = await client.get(path, params=params)
        samples.append(time.perf_counter() - started)
        response.raise_for_status()
        assert len(response.json()["runs"]) == params["perPage"], response.text[:200]
    return samples


async def pause_to_event(client: httpx.AsyncClient, agent: Any, times: int) -> tuple[list[float], list[str]]:
    """Seconds from a pause (``generate`` returned) to the event stream's frame listing it."""
    arrivals: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()

    async def read() -> None:
        params = {"interval": EVENT_INTERVAL_S, "perPage": 1}
        async with client.stream("GET", "/inbox/events", params=params) as events:
            async for line in events.aiter_lines():
                if line.startswith("data: "):
                    await arrivals.put((time.perf_counter(), json.loads(line[6:])))

    reader = asyncio.create_task(read())
    try:
        await arrivals.get()  # the first page: the stream is following the log from here
        samples, paused = [], []
        for i in range(times):
            result = await agent.generate(f"delete event {i}", resource_id="tenant-0")
            done = time.perf_counter()
            while True:
                arrived, frame = await asyncio.wait_for(arrivals.get(), 30)
                if any(run["runId"] == result.run_id for run in frame.get("listed", [])):
                    samples.append(arrived - done)
                    break
            paused.append(result.run_id)
        return samples, paused
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def settle(store: Store) -> None:
    """Untimed, after seeding: what the store does in the background for the seeding's writes is done
    before anything is timed (SQLite: the log copied into the database file, so approvals do not share
    the disk with the seeding's checkpoints; Redis: no rewrite of its append-only file under way)."""
    if isinstance(store, SqliteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return
    if isinstance(store, RedisStore):
        client = redis.asyncio.Redis.from_url(store.url)
        try:
            while True:
                persistence = await client.info("persistence")
                if not persistence["aof_rewrite_in_progress"] and not persistence["aof_rewrite_scheduled"]:
                    return
                await asyncio.sleep(0.2)
        finally:
            await client.aclose()


async def approve(agent: Any, run_id: str) -> float:
    started = time.perf_counter()
    result = await agent.approve_tool_call_generate(run_id=run_id)
    assert result.text == "Deleted.", result.text
    return time.perf_counter() - started


async def host_rss(runtime: Runtime) -> float:
    return round(rss_mb(int((await host_stats(runtime))["pid"])), 1)


class Size:
    """One number of runs waiting: its runtime (kept open until every size is measured), its seeded
    store and its front door."""

    def __init__(self, config: str, runs: int, storage: Callable[[str], Store]) -> None:
        self.runs, self.tag = runs, f"n{runs}"
        self.runtime = Runtime([build_agent()], storage=storage(self.tag), executor=CONFIGS[config][0])  # type: ignore[arg-type]
        self.agent = self.runtime.get_agent("bench")
        self.row: dict[str, Any] = {"config": config, "runs": runs}
        self.samples: dict[str, list[float]] = {}
        self.kept: list[str] = []

    async def seeded(self) -> None:
        """Warm up, pause a run for real, copy it ``runs`` times through the store, let the store settle."""
        warm = await self.agent.generate("warm up", resource_id="tenant-0")
        await self.agent.approve_tool_call_generate(run_id=warm.run_id)
        self.template = await self.agent.generate("template", resource_id="tenant-0")
        stored = await self.runtime.store().load_run(self.template.run_id)
        assert stored is not None
        memory = {"before": await host_rss(self.runtime)}
        seed_s = await seed(self.runtime.store(), stored.state, self.runs, self.tag)
        await settle(self.runtime.store())
        gc.collect()
        memory["seeded"] = await host_rss(self.runtime)
        self.row.update(seed_s=round(seed_s, 2), seed_ms_per_run=round(seed_s * 1000 / self.runs, 3))
        self.row["host_rss_mb"] = memory
        # The cursor of the page that starts 90% of the way in (or at the last full page), and the
        # seeded runs to approve: spread over the whole listing, none of them ever kept by the host.
        deep = await self.runtime.pending_page(per_page=1, page=min(int(self.runs * 0.9), self.runs - 100))
        assert deep.next_cursor is not None
        self.deep = deep.next_cursor

    def sample(self, name: str, seconds: float) -> None:
        self.samples.setdefault(name, []).append(seconds)

    async def finish(self) -> dict[str, Any]:
        await self.agent.approve_tool_call_generate(run_id=self.template.run_id)
        self.row["host_rss_mb"]["end"] = await host_rss(self.runtime)
        self.row.update({name: summary(samples) for name, samples in self.samples.items()})
        return self.row


async def interleaved(sizes: list[Size], clients: list[httpx.AsyncClient], args: argparse.Namespace) -> None:
    """The inbox pages and the approvals of every size in turn, one sample of each size after the
    other: on a shared machine, whatever slows it down for a while slows every size alike."""
    page = {"perPage": 100}
    for size, client in zip(sizes, clients, strict=True):  # untimed: connections and caches
        await timed_gets(client, "/inbox", page, 2)
        await approve(size.agent, f"{size.tag}-{0:06d}")
    for _ in range(args.requests):
        for size, client in zip(sizes, clients, strict=True):
            size.sample("inbox_first_page", (await timed_gets(client, "/inbox", page, 1))[0])
            deep = {**page, "cursor": size.deep}
            size.sample("inbox_deep_page", (await timed_gets(client, "/inbox", deep, 1))[0])
    for i in range(1, args.approvals + 1):
        for size in sizes:
            run_id = f"{size.tag}-{i * (size.runs // (args.approvals + 1)):06d}"
            size.sample("approval_read_from_store", await approve(size.agent, run_id))
            if i <= len(size.kept):
                size.sample("approval_kept_by_host", await approve(size.agent, size.kept[i - 1]))


async def one_config(
    config: str, counts: list[int], storage: Callable[[str], Store], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Every size of one configuration: seeded one after the other, then measured side by side."""
    sizes: list[Size] = []
    try:
        for runs in counts:
            size = Size(config, runs, storage)
            sizes.append(size)
            await size.seeded()
        async with contextlib.AsyncExitStack() as stack:
            clients = []
            for size in sizes:
                url = await stack.enter_async_context(served(size.runtime))
                clients.append(await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60)))
            for size, client in zip(sizes, clients, strict=True):  # its own stream, one size at a time
                events, size.kept = await pause_to_event(client, size.agent, args.events)
                size.samples["pause_to_event"] = events
            await interleaved(sizes, clients, args)
        return [await size.finish() for size in sizes]
    finally:
        for size in sizes:
            await size.runtime.shutdown()


def print_row(row: dict[str, Any]) -> None:
    def cell(name: str) -> str:
        return f"{row[name]['median_ms']:.2f} ({row[name]['p90_ms']:.2f})"

    memory = row["host_rss_mb"]
    print(
        f"{row['config']:<18} N={row['runs']:>7,}: seed {row['seed_s']:7.2f} s; "
        f"inbox first {cell('inbox_first_page')} deep {cell('inbox_deep_page')} ms; "
        f"pause->event {cell('pause_to_event')} ms; approval from store "
        f"{cell('approval_read_from_store')} kept {cell('approval_kept_by_host')} ms; host RSS "
        f"{memory['before']}->{memory['seeded']}->{memory['end']} MB",
        flush=True,
    )


def targets(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 42's targets, met or not, per configuration (largest N against the smallest)."""
    found = []
    for config in dict.fromkeys(r["config"] for r in rows):
        mine = sorted((r for r in rows if r["config"] == config), key=lambda r: r["runs"])
        small, large = mine[0], mine[-1]
        first = large["inbox_first_page"]["median_ms"]
        deep = large["inbox_deep_page"]["median_ms"]
        base = small["inbox_first_page"]["median_ms"]
        store_ratio = (
            large["approval_read_from_store"]["median_ms"] / small["approval_read_from_store"]["median_ms"]
        )
        kept_ratio = (
            large["approval_read_from_store"]["median_ms"] / small["approval_kept_by_host"]["median_ms"]
        )
        grew = large["host_rss_mb"]["end"] - small["host_rss_mb"]["end"]
        n = f"{large['runs']:,}"
        found += [
            f"{config}: inbox page at {n} <= 50 ms: first {first:.1f}, deep {deep:.1f} ms "
            f"-> {'met' if max(first, deep) <= 50 else 'NOT met'}",
            f"{config}: inbox page at {n} within 2x of {small['runs']:,} ({base:.1f} ms): "
            f"{max(first, deep) / base:.2f}x -> {'met' if max(first, deep) <= 2 * base else 'NOT met'}",
            f"{config}: approval at {n} (read from the store) within 1.2x of {small['runs']:,}: "
            f"{store_ratio:.2f}x (against {small['runs']:,}'s kept by the host: {kept_ratio:.2f}x) "
            f"-> {'met' if store_ratio <= 1.2 else 'NOT met'}",
            f"{config}: host RSS at {n} against {small['runs']:,}: {grew:+.1f} MB at the end",
        ]
    return found


def _store(config: str, kind: str, url: str | None, durability: str, where: Path, tag: str) -> Store:
    return make_store(kind, where / f"{config}-{tag}.db", url, f"scale-{os.getpid()}-{tag}:", durability)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="200,2000,100000")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--requests", type=int, default=20, help="timed requests per inbox page")
    parser.add_argument("--events", type=int, default=20, help="pauses timed to their inbox event")
    parser.add_argument("--approvals", type=int, default=30, help="approvals timed of each kind")
    parser.add_argument("--json", type=Path, help="also write the rows (and targets) to this file")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for config in args.configs.split(","):
            _, kind, durability = CONFIGS[config]
            redis = private_redis(durability) if kind == "redis" else contextlib.nullcontext(None)
            with redis as url:
                storage = functools.partial(_store, config, kind, url, durability, Path(tmp))
                for row in await one_config(config, sizes, storage, args):
                    rows.append(row)
                    print_row(row)
    met = targets(rows)
    print("\nIssue 42's targets in this run:")
    for line in met:
        print("  " + line)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "targets": met}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
