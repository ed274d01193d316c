"""``troupe runs list|show`` and ``troupe approve|decline|resume``: an operator's view of paused runs.

Works against a server (``--server URL``, with ``--key`` or ``TROUPE_API_KEY``), against a store
(``--store URL``: a SQLite path or ``redis://…``, read-only, since deciding runs the agents' tools and
needs their code), or in-process against your runtime (``--app module:attr``, which can also decide).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from troupe.apps import load_runtime, open_store
from troupe.core.errors import AgentNotFoundError, SnapshotNotFoundError, TroupeError
from troupe.core.store import OutboxEntry, SuspendedRunQuery
from troupe.core.suspended import SuspendedRun, SuspendedRunList
from troupe.supervisor import Runtime

# ---- where runs come from ---------------------------------------------------------------------------


@dataclass
class Source:
    """A runtime (from --app or over a bare --store) or a server client; both give agent-like objects
    with the Python API's method names."""

    runtime: Runtime | None = None
    client: Any = None  # api.client.AsyncTroupeClient
    read_only: bool = False

    async def agent_ids(self) -> list[str]:
        if self.client is not None:
            return sorted(await self.client.list_agents())
        assert self.runtime is not None
        return sorted({agent.id for agent in self.runtime.list_agents()})

    def agent(self, agent_id: str) -> Any:
        if self.client is not None:
            return self.client.get_agent(agent_id)
        assert self.runtime is not None
        if self.read_only:
            raise SystemExit(
                "deciding a run runs its agent's tools, which needs the agents' code: "
                "use --app MODULE:ATTR (your runtime) or --server URL"
            )
        return self.runtime.get_agent(agent_id)

    async def pending(
        self, agent_id: str | None, thread: str | None, resource: str | None, progress: Progress
    ) -> list[SuspendedRun]:
        if self.runtime is not None and (agent_id is None or self.read_only):
            query = SuspendedRunQuery.paged(
                agent_id, page=None, per_page=None, thread_id=thread, resource_id=resource
            )
            states, _ = await self.runtime.store().list_suspended_runs(query)
            return [SuspendedRun.from_state(s) for s in states]
        runs: list[SuspendedRun] = []
        ids = [agent_id] if agent_id else await self.agent_ids()
        for n, one in enumerate(ids, 1):
            progress.note(f"listing {one} ({n}/{len(ids)})")
            found = await self.agent(one).list_suspended_runs(thread_id=thread, resource_id=resource)
            runs.extend(found.runs)
        progress.done()
        return sorted(runs, key=lambda r: r.suspended_at or datetime.min, reverse=True)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.runtime is not None:
            await self.runtime.shutdown()


async def open_source(args: Any) -> Source:
    if args.server:
        from troupe.api.client import AsyncTroupeClient

        key = args.key or os.environ.get("TROUPE_API_KEY")
        return Source(client=AsyncTroupeClient(args.server, api_key=key))
    if args.app:
        return Source(runtime=await load_runtime(args.app))
    if args.store:
        return Source(
            runtime=Runtime([], storage=open_store(args.store, args.prefix), executor="local"), read_only=True
        )
    raise SystemExit("say where the runs are: --server URL, --app MODULE:ATTR or --store URL")


# ---- output -----------------------------------------------------------------------------------------


class Progress:
    """A one-line status on stderr while something slow happens (only on a terminal)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()

    def note(self, text: str) -> None:
        if self.live:
            self.stream.write(f"\r\x1b[2K{text}…")
            self.stream.flush()

    def done(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def table(headers: list[str], rows: list[list[str]], out: TextIO, keep: int = 2) -> None:
    """Columns sized to their contents; to fit the terminal the widest shrink (with …), never the first
    ``keep`` (ids, which must stay whole to be copied into the next command)."""
    # Piped output is for reading by programs (or grep): nothing is cut there.
    width = shutil.get_terminal_size((120, 24)).columns if out.isatty() else 1 << 16
    sizes = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    while sum(sizes) + 2 * (len(sizes) - 1) > width:
        widest = max(range(keep, len(sizes)), key=lambda i: sizes[i], default=None)
        if widest is None or sizes[widest] <= 10:
            break
        sizes[widest] -= 1

    def line(cells: list[str]) -> str:
        return "  ".join(_fit(c, n).ljust(n) for c, n in zip(cells, sizes, strict=True)).rstrip()

    out.write(line(headers) + "\n" + line(["-" * n for n in sizes]) + "\n")
    for row in rows:
        out.write(line(row) + "\n")


def _fit(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _when(at: datetime | None) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def _rows(runs: list[SuspendedRun]) -> list[list[str]]:
    return [
        [
            run.run_id,
            call.tool_call_id,
            "/".join(call.agent_path),
            call.tool_name,
            json.dumps(call.args, separators=(",", ":")),
            "approval" if call.requires_approval else "input",
            run.resource_id or "-",
            _when(call.paused_at),
            "interrupted" if call.interrupted else "",
        ]
        for run in runs
        for call in run.pending
    ]


# ---- the commands -----------------------------------------------------------------------------------


async def list_runs(args: Any, out: TextIO) -> int:
    source = await open_source(args)
    try:
        runs = await source.pending(args.agent, args.thread, args.resource, Progress())
    finally:
        await source.close()
    if args.json:
        json.dump(_as_json(SuspendedRunList(runs, len(runs))), out, indent=2, default=str)
        out.write("\n")
        return 0
    if not runs:
        out.write("Nothing is waiting for a decision.\n")
        return 0
    table(
        ["RUN", "CALL", "AGENT PATH", "TOOL", "ARGS", "WAITS FOR", "RESOURCE", "SINCE", ""], _rows(runs), out
    )
    calls = sum(len(r.pending) for r in runs)
    out.write(f"\n{calls} call(s) waiting in {len(runs)} run(s).\n")
    return 0


async def show_run(args: Any, out: TextIO) -> int:
    source = await open_source(args)
    try:
        if source.runtime is not None:
            stored = await source.runtime.store().load_run(args.run)
            audit = await source.runtime.store().list_audit(args.run)
            if stored is None and not audit:
                raise SnapshotNotFoundError(
                    f"run {args.run} not found (unknown, or finished)", run_id=args.run
                )
            if stored is not None:
                state = stored.state
                out.write(
                    f"run       {state.run_id}\nagent     {state.agent_id}\nstatus    {state.status}\n"
                    f"thread    {state.thread_id or '-'}\nresource  {state.resource_id or '-'}\n"
                    f"steps     {state.step} of at most {state.max_steps}\n"
                    f"messages  {len(state.messages)}\n"
                )
                pending = SuspendedRun.from_state(state)
                if pending.pending:
                    out.write("\nwaiting:\n")
                    table(
                        ["CALL", "AGENT PATH", "TOOL", "ARGS", "WAITS FOR", "RESOURCE", "SINCE", ""],
                        [r[1:] for r in _rows([pending])],
                        out,
                    )
            else:
                out.write(f"run       {args.run}\nstatus    finished (its snapshot is gone)\n")
            if audit:
                out.write("\ndecisions:\n")
                table(
                    ["WHEN", "CALL", "TOOL", "DECISION", "BY", "REASON"],
                    [
                        [
                            _when(e.decided_at),
                            e.tool_call_id,
                            e.tool_name,
                            e.kind,
                            e.decided_by or "-",
                            e.reason or "",
                        ]
                        for e in audit
                    ],
                    out,
                )
            _deliveries(await source.runtime.store().list_deliveries(args.run), out)
            return 0
        runs = [r for r in await source.pending(args.agent, None, None, Progress()) if r.run_id == args.run]
        if not runs:
            raise SnapshotNotFoundError(
                f"run {args.run} is not waiting for a decision (or not yours to see)", run_id=args.run
            )
        out.write(f"run       {args.run}\nagent     {runs[0].agent_id}\nstatus    suspended\n\nwaiting:\n")
        table(
            ["CALL", "AGENT PATH", "TOOL", "ARGS", "WAITS FOR", "RESOURCE", "SINCE", ""],
            [r[1:] for r in _rows(runs)],
            out,
        )
        return 0
    finally:
        await source.close()


def _deliveries(entries: list[OutboxEntry], out: TextIO) -> None:
    """Where the run's notifications stand (redeliver one with POST /api/deliveries/{id}/redeliver)."""
    if not entries:
        return
    out.write("\nnotifications:\n")
    rows = [
        [
            e.id,
            str(e.body.get("type") or "chat message"),
            e.target,
            e.status,
            str(e.attempts),
            e.last_error or "",
        ]
        for e in entries
    ]
    table(["DELIVERY", "EVENT", "TARGET", "STATUS", "ATTEMPTS", "LAST ERROR"], rows, out)


async def decide(args: Any, out: TextIO) -> int:
    """approve / decline / resume: decide, then follow the run until it finishes or pauses again."""
    source = await open_source(args)
    try:
        agent_id = args.agent or await _agent_of(source, args.run)
        agent = source.agent(agent_id)
        if args.call is None and source.client is not None:
            args.call = await _latest_call(source, agent_id, args.run)  # the HTTP API names the call
        if args.command == "approve":
            edited = json.loads(args.edited_args) if args.edited_args else None
            stream = await agent.approve_tool_call(
                run_id=args.run, tool_call_id=args.call, edited_args=edited
            )
        elif args.command == "decline":
            stream = await agent.decline_tool_call(
                run_id=args.run, tool_call_id=args.call, reason=args.reason
            )
        else:
            stream = await agent.resume_stream(_json_arg(args.data), run_id=args.run, tool_call_id=args.call)
        return await _follow(stream, out)
    finally:
        await source.close()


async def _agent_of(source: Source, run_id: str) -> str:
    if source.runtime is not None:
        stored = await source.runtime.store().load_run(run_id)
        if stored is not None:
            return stored.state.agent_id
    for run in await source.pending(None, None, None, Progress()):
        if run.run_id == run_id:
            return run.agent_id
    raise AgentNotFoundError(f"no paused run {run_id} found; pass --agent if it is not paused", run_id=run_id)


async def _latest_call(source: Source, agent_id: str, run_id: str) -> str:
    for run in await source.pending(agent_id, None, None, Progress()):
        if run.run_id == run_id and run.pending:
            return max(run.pending, key=lambda call: call.paused_at).tool_call_id
    raise SnapshotNotFoundError(f"run {run_id} has no call waiting for a decision", run_id=run_id)


async def _follow(stream: Any, out: TextIO) -> int:
    """Print the run's progress as it streams: tool results, the answer's text, new pauses."""
    out.write(f"run {stream.run_id}\n")
    mid_text = False
    async for chunk in stream.full_stream:
        kind, payload = chunk.type, chunk.payload
        if kind == "text-delta":
            out.write(payload["text"])
            mid_text = True
            out.flush()
            continue
        if mid_text:
            out.write("\n")
            mid_text = False
        if kind in ("tool-result", "tool-error"):
            mark = "declined" if payload.get("declined") else ("error" if kind == "tool-error" else "done")
            out.write(
                f"  {payload['tool_name']} [{payload['tool_call_id']}] {mark}: "
                f"{_fit(json.dumps(payload.get('result'), default=str), 100)}\n"
            )
        elif kind in ("tool-call-approval", "tool-call-suspended"):
            what = "needs approval" if kind == "tool-call-approval" else "asks for input"
            out.write(
                f"  paused: {'/'.join(payload['agent_path'])} {payload['tool_name']} "
                f"[{payload['tool_call_id']}] {what}\n"
            )
        elif kind == "error":
            out.write(f"  error: {payload['error'].get('message')}\n")
        elif kind == "finish":
            out.write(f"finished: {payload.get('finish_reason')}\n")
    result = await stream.result()
    return 0 if result.finish_reason != "error" else 1


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--data must be JSON: {exc}") from exc


def _as_json(listing: SuspendedRunList) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(listing)


def run_command(args: Any, out: TextIO | None = None) -> int:
    import asyncio

    out = out or sys.stdout

    handlers = {"list": list_runs, "show": show_run}
    handler = handlers[args.runs_command] if args.command == "runs" else decide
    try:
        return asyncio.run(handler(args, out))
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as Unix tools do.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - flushing at exit must not fail again
        return 0
    except TroupeError as exc:
        sys.stderr.write(f"troupe {args.command}: {exc} [{exc.code}]\n")
        return 1


def add_commands(commands: Any) -> None:
    """Register ``runs`` (list, show), ``approve``, ``decline`` and ``resume`` on the CLI."""

    def where(parser: Any) -> None:
        group = parser.add_argument_group("where the runs are (one of)")
        group.add_argument("--server", metavar="URL", help="a troupe server, e.g. http://127.0.0.1:8000")
        group.add_argument("--key", help="API key for --server (default: $TROUPE_API_KEY)")
        group.add_argument("--app", metavar="MODULE:ATTR", help="your Runtime (or a function returning one)")
        group.add_argument("--store", metavar="URL", help="a SQLite file or redis:// URL (read-only)")
        group.add_argument(
            "--prefix", default="troupe:", help="Redis key prefix with --store (default: %(default)s)"
        )
        parser.add_argument("--agent", help="the agent (found from the run when omitted)")

    runs = commands.add_parser("runs", help="list runs waiting for a decision, or show one run")
    runs_commands = runs.add_subparsers(dest="runs_command", metavar="WHAT", required=True)
    listing = runs_commands.add_parser("list", help="every paused call you may see, newest first")
    where(listing)
    listing.add_argument("--thread", help="only runs on this thread (needs --agent with --store)")
    listing.add_argument("--resource", help="only runs of this resource (needs --agent with --store)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show = runs_commands.add_parser("show", help="one run: where it stands, what waits, what was decided")
    show.add_argument("run", metavar="RUN")
    where(show)

    for name, help_text in (
        ("approve", "approve a paused call and follow the run"),
        ("decline", "decline a paused call (the model is told why) and follow the run"),
        ("resume", "answer a tool that paused itself with suspend(), and follow the run"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("run", metavar="RUN")
        command.add_argument("call", metavar="CALL", nargs="?", help="tool call id (default: the latest)")
        where(command)
        if name == "approve":
            command.add_argument(
                "--edited-args", metavar="JSON", help="changed arguments (tools that allow it)"
            )
        if name == "decline":
            command.add_argument("--reason", help="told to the model")
        if name == "resume":
            command.add_argument("--data", metavar="JSON", required=True, help="the answer, as JSON")


__all__ = ["add_commands", "run_command"]
