"""Troupe against the peers users would pick instead, on the same scripted workloads, in one run.

    python bench/run_all.py                 # full: 52 min on 2 cores (2026-12-07); W3 at 200 everywhere
                                            # and at 20,000 on the Troupe rows (--w3-large-systems), and
                                            # the scale workload up to 100,000 runs waiting
    python bench/run_all.py --quick         # about 11 min here: fewer cycles and runs
    python bench/run_all.py --systems troupe-ray-sqlite-full,langgraph-sqlite --workloads w1,w4

Systems (each with a scripted model of its own kind, instant but in W1-300ms; no network, no API key):
  troupe-<ray|local>-redis-<always|everysec>   RedisStore; redis-server with AOF, appendfsync always/everysec
  troupe-<ray|local>-sqlite-<full|normal>      SqliteStore(synchronous="FULL"/"NORMAL")
  troupe-local-memory, troupe-ray-memory       MemoryStore
  troupe-...-exit                              the same with Runtime(durability="exit"): a run is written
                                               at its pauses and at its end only
  langgraph-memory, langgraph-sqlite          StateGraph + ToolNode, interrupt() / Command(resume=...)
  openai-agents-memory, openai-agents-json    needs_approval=True, RunState approve / resume
  pydantic-ai-memory, pydantic-ai-json        requires_approval=True, DeferredToolRequests / Results
  mastra-libsql, mastra-libsql-full           Mastra in a Node 22 process, LibSQLStore on a file
W1/W2 go through each system's streaming API (--api generate: the plain calls); W3/W4 the plain calls.
Workloads (bench/harness.py): W1 approval cycle, W2 supervisor -> subagent -> approval, W3 N runs paused
at once then all approved, W4 restart with N paused runs (fresh process lists and approves them);
W1-300ms W1 with a model that waits 300 ms per turn, W3-fsync W3 at 2,000 with the store's fsyncs counted
(strace), startup Runtime(...) to the first pause (Troupe rows).

Every (workload, system) pair runs in a fresh Python process, one after the other (never two at once),
workload by workload so that all systems of a workload are measured close together in time (--quick runs
a system's W1-W3 in one process). Prints the tables and writes bench/results/latest.json, latest.md and
latest.png. Needs `pip install -e '.[bench]'` and redis-server for the Redis configuration (a private one
is started on a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_common import MODEL_TURN_S  # noqa: E402  (bench/ is on the path from here on)
from harness import FSYNC, SLOW_W1, STARTUP  # noqa: E402
from report_floor import SLOW_REPEAT, SYNC_EXIT  # noqa: E402
from report_scale import SCALE  # noqa: E402

MODULES = {
    "troupe": "troupe_systems",
    "langgraph": "peer_langgraph",
    "openai": "peer_openai_agents",
    "pydantic": "peer_pydantic_ai",
    "mastra": "peer_mastra",  # Node 22 process (bench/mastra, `npm ci` there)
}
DEFAULT_SYSTEMS = [
    "troupe-ray-redis-always",
    "troupe-ray-redis-everysec",
    "troupe-ray-sqlite-full",
    "troupe-ray-sqlite-normal",
    "troupe-local-sqlite-full",
    "troupe-local-memory",
    "troupe-ray-redis-always-exit",
    "troupe-local-sqlite-full-exit",
    "langgraph-memory",
    "langgraph-sqlite",
    "openai-agents-memory",
    "openai-agents-json",
    "pydantic-ai-memory",
    "pydantic-ai-json",
    "mastra-libsql",
    "mastra-libsql-full",
]
KNOWN_SYSTEMS = [
    *DEFAULT_SYSTEMS,
    "troupe-local-sqlite-normal",
    "troupe-local-redis-always",
    "troupe-local-redis-everysec",
    "troupe-ray-memory",
    "troupe-ray-redis-everysec-exit",
    "troupe-local-redis-always-exit",
    "troupe-local-redis-everysec-exit",
]
NOTES = {
    "streaming": "W1/W2 run through every system's streaming API: Troupe stream (full_stream to the "
    "tool-call-approval chunk, approve_tool_call, text_stream); LangGraph astream(stream_mode=[messages, "
    "updates]) to the __interrupt__ update, then astream(Command(resume=...)); OpenAI Agents SDK "
    "Runner.run_streamed + stream_events(), interruptions on the streamed result, resumed streamed from "
    "to_state(); Pydantic AI run_stream, whose output is the DeferredToolRequests, then run_stream with "
    "deferred_tool_results. Each scripted model streams its turn as one chunk. W3/W4 use the plain calls. "
    "In W2 the OpenAI Agents SDK's Agent.as_tool runs its subagent unstreamed.",
    "durability": "When a run is written: Troupe rows durability=sync (at its start and after every "
    "step's tools; a paused run is checkpointed before it is announced), -exit rows durability=exit (at "
    "pauses, before tools run, and at the end); LangGraph its default durability=async (each step's "
    "checkpoint written in the background while the next step runs; the call returns once written); the "
    "-json peers one file per paused run.",
    "gc": "After the W1/W2/W3 warm-up the driver runs gc.collect() and gc.freeze() in every system alike, "
    "then (W1/W2) 5 more untimed cycles, as the first after a collection are slower (--gc default: "
    "untouched); Troupe's Ray actors freeze their heap once built "
    "(troupe.actors.remote.settle_heap), as in production, and collect what they create afterwards as "
    "Python does by default.",
    "redis": "Redis runs durable, as in production: an append-only file with appendfsync everysec (may "
    "lose the last second on a power cut) or always (an fsync per write), one private redis-server each.",
    "troupe-ray": "On Ray every agent is an actor (a separate process): each call is a Ray hop from the "
    "driver. Every system's tool is a sync function run in a worker thread.",
    "sqlite": "SQLite durability: -full rows use synchronous=FULL (WAL, an fsync per commit), like "
    "LangGraph's AsyncSqliteSaver (SQLite's default); -normal rows synchronous=NORMAL (WAL: survives a "
    "process crash, a power cut may lose the last commits).",
    "json": "openai-agents-json and pydantic-ai-json write one JSON file per paused run (no fsync), with no "
    "index, claim or lock: a second approver could resume the same run twice.",
    "mastra": "Mastra runs in a Node 22 process (bench/mastra, pinned): agent.stream read to the "
    "tool-call-approval chunk, approveToolCall, read the text; W1/W2 cycles are timed inside Node. "
    "LibSQLStore on a file, WAL, synchronous=NORMAL as Mastra sets it (mastra-libsql-full: FULL).",
    "openai": "OpenAI Agents SDK tracing is disabled (its exporter needs the network and an API key).",
    "memory": "W3 memory per paused run: RSS = growth of every process the system runs (driver, Ray's "
    "processes and actors, redis-server) while the N runs are paused, over N (it includes the allocator's "
    "high-water mark from 100 calls in flight); heap = Python heap the driver retains per paused run "
    "(tracemalloc, on a separate untimed pass of --heap-sample runs paused one by one; state in Ray "
    "actors or redis-server is not in it); store = growth of the SQLite file, JSON files or Redis "
    "used_memory. 'memory MB' in W1/W2 is the PSS of all the system's processes (Ray's included).",
    "w3": "W3's largest N runs only on the systems in meta.w3_large_systems (--w3-large-systems); meta."
    "w3_sizes lists the sizes each system ran, and the per-run table compares only those.",
    "w4": "W4 times from the fresh process's spawn (interpreter, imports, Ray start where used) until every "
    "run is decided; 'list' is finding the paused runs from the durable store alone.",
    "w1-300ms": "W1-300ms: W1's cycle with every system's scripted model waiting 300 ms per turn (an asyncio "
    "sleep in the Python models, Troupe's in the agent's actor on Ray; a setTimeout in Mastra's), fewer "
    "cycles than W1; overhead = the cycle minus 2 x 300 ms; 'beyond the waits' = the cycle minus the two "
    "waits as each model measured them (timers overshoot a sleep).",
    "w3-fsync": "W3-fsync: W3 at its N with 100 in flight, timed; then the same again with strace -f -c "
    "attached to the store's process (redis-server; the SQLite writer: the driver in-process, the agent's "
    "actors on Ray; the peers' own process; Mastra's Node), whose fsync + fdatasync calls over N are "
    "fsyncs per run. strace stops the traced process at every system call, so that pass is not the timed "
    "one.",
    "startup": "Start-up (Troupe rows): a fresh process, troupe and Ray already imported, times the store "
    "and Runtime(...) constructed, then generate() until the first run is paused (Ray and the agent's "
    "actor start inside that on Ray).",
    "scale": "Scale (bench/inbox_scale.py, local + SQLite FULL and Ray + Redis always): N runs written "
    "through the store directly (copies of one the agent paused), then the inbox's first page and a page "
    "deep in its cursor over HTTP, a pause's time to its inbox event, approvals one at a time (of runs the "
    "host never kept, and of runs it kept) and the host's RSS.",
}
# W3's largest size when nothing else is asked for; W4 restarts with fewer (its peers' runs take minutes).
FULL_W3 = "200,20000"
FULL_W4 = 2000
# W3-fsync's runs: the size issue 36's targets name.
FSYNC_RUNS = 2000
WORKLOADS = ["w1", "w2", SLOW_W1, "w3", FSYNC, "w4", STARTUP, SCALE]
# Scale (bench/inbox_scale.py): the Troupe rows it measures, and the numbers of runs waiting.
SCALE_CONFIGS = {
    "troupe-local-sqlite-full": "local-sqlite-full",
    "troupe-ray-redis-always": "ray-redis-always",
}
SCALE_SIZES = "200,2000,100000"
# The Troupe configurations the peers' ratio columns compare with (the issue's two targets).
RATIO_AGAINST = ["troupe-ray-redis-always", "troupe-local-sqlite-full"]
# W3's largest size runs on these only by default: the peers' 20,000 runs would take about 23 minutes more
# on the 2-core machine (each peer took 17-34 s at N=2,000 there, against 2-7 s for Troupe).
W3_LARGE = [s for s in DEFAULT_SYSTEMS if s.startswith("troupe-")]
MEMORY_ONLY = {
    "troupe-local-memory": "MemoryStore keeps paused runs in the process's memory: a restart loses them",
    "troupe-ray-memory": "MemoryStore on Ray keeps paused runs in a private SQLite file removed at shutdown: "
    "a restart loses them",
    "langgraph-memory": "InMemorySaver keeps checkpoints in the process's memory: a restart loses them",
    "openai-agents-memory": "paused RunResults are held in the process's memory: a restart loses them",
    "pydantic-ai-memory": "paused Conversations are held in the process's memory: a restart loses them",
}
PACKAGES = [
    "troupe-runtime",
    "ray",
    "redis",
    "pydantic",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-prebuilt",
    "langchain-core",
    "aiosqlite",
    "openai-agents",
    "openai",
    "pydantic-ai-slim",
    "matplotlib",
]


def notes(args: argparse.Namespace) -> dict[str, str]:
    """NOTES as they apply to this run's options."""
    found = dict(NOTES)
    if args.api == "generate":
        found["streaming"] = "--api generate: W1/W2 run through every system's non-streaming call (Troupe "
        "generate / approve_tool_call_generate, LangGraph ainvoke, Runner.run, agent.run)."
    if args.gc == "default":
        found["gc"] = "--gc default: Python's collector runs as it does by default in every process."
    return found


def module_for(key: str) -> str:
    return MODULES[key.split("-", 1)[0]]


# ---- child: one group of phases of one system, in a fresh process ----------------------------------------


def workload_of(phase: str) -> str:
    """The workload a phase's rows belong to: W4's two halves are "w4", every other phase its own."""
    name = phase.partition(":")[0]
    return "w4" if name.startswith("w4-") else name


def phase_env(spec: dict[str, Any], name: str, tag: str) -> dict[str, Any]:
    """The system's settings for a phase: its store tag, and for W1-300ms the model's wait per turn and
    the file its waits are logged to."""
    env = {**spec["env"], "store_tag": tag}
    if name == SLOW_W1:
        waits = Path(spec["workdir"]) / f"model-waits-{spec['system']}-{tag}-{os.getpid()}.log"
        env.update(model_turn_s=MODEL_TURN_S, model_waits=str(waits))
    return env


async def child(spec: dict[str, Any]) -> list[dict[str, Any]]:
    from harness import (
        Unsupported,
        base_row,
        fsync_count,
        latency,
        restart_populate,
        restart_resume,
        startup,
        suspended_scale,
    )
    from machine_probe import probe

    module = importlib.import_module(module_for(spec["system"]))
    machine_now = probe(Path(spec["workdir"]))  # before any store or actor exists: the machine alone
    rows: list[dict[str, Any]] = []
    system: Any = None
    tag = None
    try:
        for phase, phase_tag in spec["phases"]:
            name, _, arg = phase.partition(":")
            if phase_tag != tag:  # each tag is its own store (SQLite file, Redis prefix, directory)
                if system is not None:
                    await system.close()
                tag = phase_tag
                system = module.make(spec["system"], Path(spec["workdir"]), phase_env(spec, name, tag))
                if name != STARTUP:  # start-up times the opening itself
                    await system.open()
                ready_at = time.time()
            measure = getattr(module, "latency", latency)  # another runtime times its own cycles
            try:
                if name in ("w1", "w2"):
                    rows.append(await measure(system, name, spec["cycles"], spec["warmup"]))
                elif name == SLOW_W1:
                    rows.append(await measure(system, name, spec["slow_cycles"], spec["slow_warmup"]))
                elif name == FSYNC:
                    rows.append(await fsync_count(system, int(arg), spec["concurrency"], spec["w3_warmup"]))
                elif name == STARTUP:
                    rows.append(await startup(system))
                elif name == "w3":
                    rows.append(
                        await suspended_scale(
                            system, int(arg), spec["concurrency"], spec["w3_warmup"], spec["heap_sample"]
                        )
                    )
                elif name == "w4-populate":
                    done = await restart_populate(system, int(arg), spec["concurrency"])
                    rows.append(done if "workload" in done else {"phase": name, **done})
                elif name == "w4-resume":
                    rows.append(
                        await restart_resume(
                            system,
                            int(arg),
                            spec["concurrency"],
                            spec["spawned_at"],
                            ready_at,
                            spec["populated"],
                        )
                    )
            except Exception as exc:
                unsupported = isinstance(exc, Unsupported)
                if not unsupported:
                    traceback.print_exc()
                workload = workload_of(name)
                n = int(arg) if arg else None
                note = str(exc) if unsupported else f"{type(exc).__name__}: {exc}"
                status = "unsupported" if unsupported else "error"
                rows.append(base_row(system, workload, n=n, status=status, note=note))
    finally:
        if system is not None:
            await system.close()
        teardown = getattr(module, "teardown", None)
        if teardown is not None:
            teardown()
    for row in rows:
        row.setdefault("probe", machine_now)
    return rows


# ---- parent ---------------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    found = {}
    for package in PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            found[package] = version(package)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=10).stdout
        found["redis-server"] = next(
            (w.split("=")[1] for w in out.split() if w.startswith("v=")), out.strip()
        )
    return found


def machine() -> str:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {mem_gib:.0f} GiB, Python {platform.python_version()}"


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True).stdout.strip()

    with contextlib.suppress(OSError):
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    return {}


class Runner:
    def __init__(self, args: argparse.Namespace, workdir: Path, env: dict[str, Any]) -> None:
        self.args = args
        self.workdir = workdir
        self.env = env
        self.count = 0
        self.log = workdir / "children.log"

    def spawn(self, system: str, phases: list[tuple[str, str]], **extra: Any) -> list[dict[str, Any]]:
        """Run ``phases`` ((phase, store tag) pairs) of ``system`` in a fresh process; return its rows."""
        self.count += 1
        spec_path = self.workdir / f"spec-{self.count}.json"
        out_path = self.workdir / f"out-{self.count}.json"
        spec = {
            "system": system,
            "phases": phases,
            "workdir": str(self.workdir),
            "env": self.env,
            "cycles": self.args.cycles,
            "warmup": self.args.warmup,
            "w3_warmup": self.args.w3_warmup,
            "concurrency": self.args.concurrency,
            "heap_sample": self.args.heap_sample,
            "slow_cycles": self.args.slow_cycles,
            "slow_warmup": self.args.slow_warmup,
            "out": str(out_path),
            **extra,
        }
        started = time.time()
        spec["spawned_at"] = started
        spec_path.write_text(json.dumps(spec))
        label = f"{system} {','.join(p for p, _ in phases)}"
        try:
            with self.log.open("a") as log:
                log.write(f"\n===== {label}\n")
                log.flush()
                proc = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=self.args.timeout,
                    cwd=HERE.parent,
                )
            rows = json.loads(out_path.read_text()) if out_path.exists() else []
            if proc.returncode != 0 and not rows:
                rows = [self._error(system, phases, f"exit code {proc.returncode}: {self._tail()}")]
        except subprocess.TimeoutExpired:
            rows = [self._error(system, phases, f"timed out after {self.args.timeout} s")]
        took = time.time() - started
        states = ", ".join(f"{r.get('workload', r.get('phase'))}:{r.get('status', 'ok')}" for r in rows)
        print(f"  [{took:6.1f} s] {label:<45} {states}", flush=True)
        time.sleep(self.args.settle)  # let the child's processes (Ray's) finish exiting
        return rows

    def _tail(self) -> str:
        return " | ".join(self.log.read_text().strip().splitlines()[-3:])[-400:]

    @staticmethod
    def _error(system: str, phases: list[tuple[str, str]], note: str) -> dict[str, Any]:
        arg = phases[0][0].partition(":")[2]
        return {
            "system": system,
            "workload": workload_of(phases[0][0]),
            "n": int(arg) if arg else None,
            "status": "error",
            "note": note,
        }


class Plan:
    """Which phases each system runs, and in which processes (``Runner.spawn``), for one run."""

    def __init__(self, args: argparse.Namespace, systems: list[str], workloads: list[str], runner: Runner):
        self.args, self.systems, self.workloads, self.runner = args, systems, workloads, runner
        self.latency = [(w, "lat") for w in ("w1", "w2") if w in workloads]
        # W1-300ms and W3-fsync: a store of their own (their tag), so a shared process opens them afresh.
        self.slow = [(SLOW_W1, SLOW_W1)] if SLOW_W1 in workloads else []
        self.fsync = [(f"{FSYNC}:{args.fsync_runs}", FSYNC)] if FSYNC in workloads else []
        self.sizes = w3_sizes(args, systems) if "w3" in workloads else {}
        self.n4 = args.w4_runs

    def scale(self, s: str) -> list[tuple[str, str]]:
        return [(f"w3:{n}", f"w3-{n}") for n in self.sizes.get(s, [])]

    def restart(self, s: str, first: list[dict[str, Any]]) -> list[dict[str, Any]]:
        done = [r for r in first if r.get("phase") == "w4-populate"]
        if not done:
            return [r for r in first if r.get("workload") == "w4"]  # it failed
        return self.runner.spawn(s, [(f"w4-resume:{self.n4}", "w4")], populated=done[0])

    def memory_only(self, s: str) -> dict[str, Any]:
        print(f"  {'':10} {s + ' w4':<45} n/a: memory only", flush=True)
        return {"system": s, "workload": "w4", "n": self.n4, "status": "unsupported", "note": MEMORY_ONLY[s]}

    def shared(self) -> list[dict[str, Any]]:
        """One process per system for W1-W3-fsync and the W4 populate; W4 resumes in another."""
        print("W1-W3 and W4's first process, one process per system; then W4's fresh process", flush=True)
        rows: list[dict[str, Any]] = []
        for s in self.systems:
            w4 = "w4" in self.workloads and s not in MEMORY_ONLY
            populate = [(f"w4-populate:{self.n4}", "w4")] if w4 else []
            first = self.runner.spawn(s, self.latency + self.slow + self.scale(s) + self.fsync + populate)
            rows += [r for r in first if "workload" in r and r["workload"] != "w4"]
            if "w4" in self.workloads:
                rows += [self.memory_only(s)] if s in MEMORY_ONLY else self.restart(s, first)
        return rows

    def each(self, title: str, phases: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """``phases`` on every system, a fresh process each (none if there are no phases)."""
        if not phases:
            return []
        print(title, flush=True)
        return [row for s in self.systems for row in self.runner.spawn(s, phases)]

    def separate(self) -> list[dict[str, Any]]:
        """Each workload (and each W3 size) in a fresh process per system, workload by workload."""
        args = self.args
        rows = self.each(
            f"{'/'.join(w.upper() for w, _ in self.latency)}: {args.cycles} cycles each", self.latency
        )
        rows += self.each(
            f"W1-300ms: the model waits {MODEL_TURN_S * 1000:g} ms per turn; {args.slow_cycles} cycles after "
            f"{args.slow_warmup} warm-up",
            self.slow,
        )
        rows += self.slow_repeats()
        for n in args.runs if self.sizes else []:
            on = [s for s in self.systems if n in self.sizes[s]]
            left = [s for s in self.systems if s not in on]
            print(
                f"W3: {n} runs paused at once, then approved"
                + (f" (not on {', '.join(left)})" if left else "")
            )
            for s in on:
                if len(self.sizes[s]) > 1 and n == max(self.sizes[s]):
                    rows += with_reference(self.runner, s, min(self.sizes[s]), n)
                else:
                    rows += self.runner.spawn(s, [(f"w3:{n}", f"w3-{n}")])
        rows += self.each(f"W3-fsync: {args.fsync_runs} runs timed, then counted with strace", self.fsync)
        if "w4" in self.workloads:
            print(f"W4: restart with {self.n4} paused runs", flush=True)
            for s in self.systems:
                if s in MEMORY_ONLY:
                    rows.append(self.memory_only(s))
                else:
                    rows += self.restart(s, self.runner.spawn(s, [(f"w4-populate:{self.n4}", "w4")]))
        return rows

    def slow_repeats(self) -> list[dict[str, Any]]:
        """``--slow-repeats``: W1-300ms again, that many times in all, on the row issue 42 judges
        ``durability="sync"`` on and its ``-exit`` twin, the two in turn (the target is on the median of
        the runs' differences). The rows after the first pass are marked as repeats (workload
        ``w1-300ms-repeat``), so the W1-300ms table shows the first pass as before."""
        sync = SYNC_EXIT[0]
        pair = [sync, f"{sync}-exit"]
        if not self.slow or self.args.slow_repeats < 2 or not set(pair) <= set(self.systems):
            return []
        print(f"W1-300ms again on {' and '.join(pair)}, {self.args.slow_repeats - 1} more times", flush=True)
        rows: list[dict[str, Any]] = []
        for repeat in range(1, self.args.slow_repeats):
            for s in pair:
                for row in self.runner.spawn(s, self.slow):
                    rows.append({**row, "workload": SLOW_REPEAT, "repeat": repeat})
        return rows

    def startup(self) -> list[dict[str, Any]]:
        """Troupe rows only, always a fresh process each: its Runtime, Ray and actors start there."""
        troupes = [s for s in self.systems if s.startswith("troupe-")]
        if STARTUP not in self.workloads or not troupes:
            return []
        print("Start-up: Runtime(...) to the first run's pause, a fresh process per Troupe row", flush=True)
        return [row for s in troupes for row in self.runner.spawn(s, [(STARTUP, STARTUP)])]


def run(
    args: argparse.Namespace, systems: list[str], workloads: list[str], workdir: Path, env: dict[str, Any]
) -> list[dict[str, Any]]:
    plan = Plan(args, systems, workloads, Runner(args, workdir, env))
    rows = (plan.shared() if args.shared_process else plan.separate()) + plan.startup()
    return rows + inbox_scale(args, systems, workloads, workdir)


def inbox_scale(
    args: argparse.Namespace, systems: list[str], workloads: list[str], workdir: Path
) -> list[dict[str, Any]]:
    """Scale: bench/inbox_scale.py in a process of its own per configuration (it seeds its own stores
    and, for Redis, starts its own redis-server with appendfsync always); its rows, marked "scale"."""
    configs = {s: SCALE_CONFIGS[s] for s in systems if s in SCALE_CONFIGS}
    if SCALE not in workloads or not configs:
        return []
    print(f"Scale: the inbox and approvals with {args.scale_sizes} runs waiting", flush=True)
    rows: list[dict[str, Any]] = []
    for system, config in configs.items():
        out = workdir / f"scale-{config}.json"
        command = [sys.executable, str(HERE / "inbox_scale.py"), "--configs", config, "--json", str(out)]
        started = time.time()
        with contextlib.suppress(subprocess.TimeoutExpired):  # no result file: reported below
            subprocess.run(
                [*command, "--sizes", args.scale_sizes], cwd=HERE, timeout=args.timeout * 4, check=False
            )
        if not out.exists():
            rows.append(
                {"system": system, "workload": SCALE, "n": None, "status": "error", "note": "no result"}
            )
            continue
        found = json.loads(out.read_text())
        rows += [
            dict(r, system=system, workload=SCALE, n=r["runs"], status="ok", targets=found["targets"])
            for r in found["rows"]
        ]
        print(f"  [{time.time() - started:6.1f} s] {system} scale", flush=True)
    return rows


# Runs of the smallest W3 size before the largest: one lasts a fraction of a second (0.13 s in memory),
# so a single one is mostly the machine's noise of that moment.
REFERENCE_REPEATS = 5


def with_reference(runner: Runner, system: str, small: int, large: int) -> list[dict[str, Any]]:
    """W3 at its largest size, after its smallest ``REFERENCE_REPEATS`` times, all in one process on
    one runtime and store: linearity then compares the two sizes with everything else alike (the
    process, its warm-up, the store, the actors, the machine's moment; this shared machine drifts by
    tens of percent between processes minutes apart), against the median of several small runs rather
    than one. The small runs are marked "w3-reference", so only the linearity table reads them; the
    separate run of the smallest size stays the one compared across systems."""
    phases = [(f"w3:{small}", f"w3-{large}")] * REFERENCE_REPEATS + [(f"w3:{large}", f"w3-{large}")]
    rows = runner.spawn(system, phases)
    return [
        dict(r, workload="w3-reference") if r.get("workload") == "w3" and r.get("n") == small else r
        for r in rows
    ]


def w3_sizes(args: argparse.Namespace, systems: list[str]) -> dict[str, list[int]]:
    """The W3 sizes each system runs: every size, except that the largest (when there are several)
    runs only on --w3-large-systems ("all": on every system)."""
    big = max(args.runs)
    large = args.w3_large_systems
    return {
        s: [n for n in args.runs if n != big or len(args.runs) == 1 or large == "all" or s in large]
        for s in systems
    }


def render(result: dict[str, Any], out: Path) -> None:
    from report import tables
    from report_chart import chart

    meta, rows = result["meta"], result["rows"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(result, indent=2))  # first: a rendering bug loses nothing
    text = tables(rows, meta["systems"], meta)
    print()
    print(text)
    load = meta.get("load", {})
    header = [
        "# Troupe vs peers",
        "",
        f"{meta['started']}, {meta['mode']} mode, {meta['machine']}, took {meta.get('duration_s')} s: "
        f"`{meta['command']}`",
        "",
        f"Commit {meta.get('git', {}).get('commit', '?')[:10]}"
        + (" (with uncommitted changes)" if meta.get("git", {}).get("dirty") else "")
        + f"; load average (1/5/15 min) at start {load.get('start')}, at end {load.get('end')}",
        "",
        *[f"- Redis ({mode}): {how}" for mode, how in meta.get("redis", {}).items()],
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        "",
        *[f"- {note}" for note in meta["notes"].values()],
        "",
    ]
    (out / "latest.md").write_text("\n".join(header) + "\n" + text)
    chart(rows, meta["systems"], meta, out / "latest.png")
    print(f"Wrote {out / 'latest.json'}, latest.md, latest.png (run took {meta.get('duration_s')} s)")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few minutes: 30 cycles, N=100, W1-300ms 10 cycles, W3-fsync N=200, one process per system",
    )
    parser.add_argument("--cycles", type=int, help="W1/W2 timed cycles per system (default 300; quick 30)")
    parser.add_argument("--warmup", type=int, help="W1/W2 warm-up cycles (default 50; quick 10)")
    parser.add_argument("--runs", help=f"W3 sizes, comma-separated (default {FULL_W3}; quick 100)")
    parser.add_argument(
        "--w4-runs", type=int, help=f"W4 paused runs (default: the largest W3 size, at most {FULL_W4})"
    )
    parser.add_argument(
        "--w3-large-systems",
        help="W3: the systems that also run the largest size, comma-separated, or 'all' (default: "
        f"{','.join(W3_LARGE)}; quick: all); the others run the smaller sizes only",
    )
    parser.add_argument("--w3-warmup", type=int, help="cycles before W3 and W3-fsync (default 20; quick 5)")
    parser.add_argument(
        "--slow-cycles", type=int, help="W1-300ms timed cycles, >= 600 ms each (default 40; quick 10)"
    )
    parser.add_argument("--slow-warmup", type=int, help="W1-300ms warm-up cycles (default 5; quick 3)")
    parser.add_argument(
        "--slow-repeats",
        type=int,
        help=f"W1-300ms runs in all on {SYNC_EXIT[0]} and its -exit twin, in turn (default 5; quick 1)",
    )
    parser.add_argument(
        "--fsync-runs", type=int, help=f"W3-fsync runs, timed and counted (default {FSYNC_RUNS}; quick 200)"
    )
    parser.add_argument("--concurrency", type=int, default=100, help="W3/W4 calls in flight (default 100)")
    parser.add_argument(
        "--heap-sample",
        type=int,
        default=200,
        help="W3: runs paused one by one under tracemalloc (default 200)",
    )
    parser.add_argument(
        "--systems", default=",".join(DEFAULT_SYSTEMS), help=f"from: {', '.join(KNOWN_SYSTEMS)}"
    )
    parser.add_argument(
        "--workloads", default=",".join(WORKLOADS), help=f"comma-separated, from: {', '.join(WORKLOADS)}"
    )
    parser.add_argument(
        "--out", type=Path, default=HERE / "results", help="directory for latest.{json,md,png}"
    )
    parser.add_argument("--redis-url", help="use this Redis instead of starting a private redis-server")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per child process")
    parser.add_argument(
        "--settle", type=float, help="pause between child processes, s (default 0.5; quick 0.2)"
    )
    parser.add_argument(
        "--shared-process",
        action="store_true",
        help="run a system's W1-W3 and W4's first half in one process (quick mode does; the default gives "
        "each workload and each W3 size its own process)",
    )
    parser.add_argument(
        "--api",
        choices=("stream", "generate"),
        default="stream",
        help="W1/W2 through each system's streaming API (default) or its non-streaming call",
    )
    parser.add_argument(
        "--gc",
        choices=("freeze", "default"),
        default="freeze",
        help="W1/W2/W3: gc.collect() + gc.freeze() in the driver after the warm-up, every system alike "
        "(default), or Python's collector untouched",
    )
    parser.add_argument(
        "--scale-sizes",
        help=f"scale: the runs waiting, comma-separated (default {SCALE_SIZES}; quick 200,2000)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (stores, child logs)")
    parser.add_argument("--from-json", type=Path, help="only re-render the tables and chart from this JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = args.quick
    args.cycles = args.cycles or (30 if quick else 300)
    args.heap_sample = args.heap_sample if args.heap_sample is not None else (50 if quick else 200)
    args.warmup = args.warmup if args.warmup is not None else (10 if quick else 50)
    args.w3_warmup = args.w3_warmup if args.w3_warmup is not None else (5 if quick else 20)
    args.slow_cycles = args.slow_cycles or (10 if quick else 40)
    args.slow_warmup = args.slow_warmup if args.slow_warmup is not None else (3 if quick else 5)
    args.slow_repeats = args.slow_repeats or (1 if quick else 5)
    args.fsync_runs = args.fsync_runs or (200 if quick else FSYNC_RUNS)
    args.runs = sorted({int(n) for n in (args.runs or ("100" if quick else FULL_W3)).split(",") if n})
    large = args.w3_large_systems or ("all" if quick else ",".join(W3_LARGE))
    args.w3_large_systems = "all" if large == "all" else [s.strip() for s in large.split(",") if s.strip()]
    args.w4_runs = args.w4_runs or min(max(args.runs), FULL_W4)
    args.settle = args.settle if args.settle is not None else (0.2 if quick else 0.5)
    args.shared_process = args.shared_process or quick
    args.scale_sizes = args.scale_sizes or ("200,2000" if quick else SCALE_SIZES)
    return args


def require_chart() -> None:
    """The PNG is part of the output: without matplotlib, stop before measuring anything."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(
            "run_all.py needs the package matplotlib for its chart (latest.png), and it is not installed. "
            "Install the benchmark's packages: pip install -e '.[bench]'"
        ) from None


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child:
        spec = json.loads(Path(args.child).read_text())
        rows = asyncio.run(child(spec))
        Path(spec["out"]).write_text(json.dumps(rows))
        return
    require_chart()

    if args.from_json:
        render(json.loads(args.from_json.read_text()), args.out)
        return

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    large = [] if args.w3_large_systems == "all" else args.w3_large_systems
    unknown = [s for s in [*systems, *large] if s not in KNOWN_SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown systems {unknown}; known: {', '.join(KNOWN_SYSTEMS)}")
    workloads = [w.strip().lower() for w in args.workloads.split(",") if w.strip()]
    if unknown := [w for w in workloads if w not in WORKLOADS]:
        raise SystemExit(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")

    from bench_common import private_redis

    started = time.time()
    meta: dict[str, Any] = {
        "mode": "quick" if args.quick else "default",
        "machine": machine(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "started_at": round(started, 1),
        "cycles": args.cycles,
        "warmup": args.warmup,
        "w3_warmup": args.w3_warmup,
        "runs": args.runs,
        "w3_large_systems": args.w3_large_systems,
        "w3_sizes": w3_sizes(args, systems) if "w3" in workloads else {},
        "w4_runs": args.w4_runs,
        "concurrency": args.concurrency,
        "heap_sample": args.heap_sample,
        "slow_cycles": args.slow_cycles,
        "slow_warmup": args.slow_warmup,
        "slow_repeats": args.slow_repeats,
        "model_turn_ms": MODEL_TURN_S * 1000,
        "fsync_runs": args.fsync_runs,
        "shared_process": args.shared_process,
        "api": args.api,
        "gc": args.gc,
        "systems": systems,
        "ratio_against": RATIO_AGAINST,
        "workloads": workloads,
        "versions": versions(),
        "git": git_state(),
        "notes": notes(args),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        # The machine may be shared: its load average (1, 5, 15 min) when the run started and ended.
        "load": {"start": [round(x, 2) for x in os.getloadavg()]},
    }
    print(f"Troupe vs peers — {meta['machine']}; systems: {', '.join(systems)}", flush=True)
    fsyncs = sorted({s.split("-redis-")[1].split("-")[0] for s in systems if "-redis-" in s})
    workdir = Path(tempfile.mkdtemp(prefix="troupe-bench-"))
    env: dict[str, Any] = {"nonce": str(time.time_ns()), "redis_urls": {}, "api": args.api, "gc": args.gc}
    meta["redis"] = {f: f"private redis-server, appendonly yes, appendfsync {f}" for f in fsyncs}
    try:
        with contextlib.ExitStack() as stack:
            for fsync in fsyncs:
                # One server per durability setting; --redis-url serves them all (as that server is set).
                url = args.redis_url or stack.enter_context(private_redis(fsync))
                env["redis_urls"][fsync] = url
                if args.redis_url:
                    meta["redis"][fsync] = "--redis-url (its own persistence settings)"
            rows = run(args, systems, workloads, workdir, env)
        from report import w3_growth

        meta["w3_growth"] = w3_growth(rows, args.runs)  # ms/run per size and largest / smallest
        meta["duration_s"] = round(time.time() - started, 1)
        meta["load"]["end"] = [round(x, 2) for x in os.getloadavg()]
        render({"meta": meta, "rows": rows}, args.out)
    finally:
        if args.keep:
            print(f"Work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
