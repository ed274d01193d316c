"""``troupe runs list|show|cancel`` and ``troupe approve|decline|resume``: an operator's view of runs.

Works against a server (``--server URL``, with ``--key`` or ``TROUPE_API_KEY``), against a store
(``--store URL``: an existing SQLite file or ``redis://…``, read-only, since deciding runs the agents'
tools and needs their code), or in-process against your runtime (``--app module:attr``, which can also
decide).

A decision is about one call. Without a CALL the run's latest paused call is chosen once, shown, and
remembered (``troupe.ops.recall``), so a retry of the same command means the same call and reports "already
declined by …" instead of deciding whatever the run paused on next. Every expected failure is one line
on stderr and exit code 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import asdict
from typing import Any, TextIO

import httpx

from troupe.api.errors import AuthenticationError
from troupe.core.vocabulary.agent_api import AsyncAgentAPI
from troupe.core.vocabulary.errors import (
    AgentNotFoundError,
    ApprovalPolicyError,
    CancelForbiddenError,
    DecisionConflictError,
    SnapshotNotFoundError,
    StorageUnavailableError,
    TroupeError,
)
from troupe.core.vocabulary.identity import LOCAL_ISSUER, Principal
from troupe.core.vocabulary.pause_shapes import suspended_run
from troupe.core.vocabulary.store import OutboxEntry, Store
from troupe.core.vocabulary.stream import AgentStream
from troupe.core.vocabulary.suspended import SuspendedRun
from troupe.ops.recall import recalled, remember
from troupe.ops.run_source import Page, Source, open_source, redacted
from troupe.ops.terminal import Progress, fit, safe, table, when

PAGE_SIZE = 50
PENDING_HEADERS = ["CALL", "AGENT PATH", "TOOL", "ARGS", "WAITS FOR", "RESOURCE", "SINCE", ""]
_DONE = {"approve": "approved", "decline": "declined", "resume": "resumed"}
CREDENTIAL_VARS = ("TROUPE_TOKEN", "TROUPE_API_KEY")


def _rows(runs: list[SuspendedRun]) -> list[list[str]]:
    return [
        [
            run.run_id,
            call.tool_call_id,
            "/".join(call.agent_path),
            call.tool_name,
            json.dumps(call.args, separators=(",", ":"), ensure_ascii=False),
            "approval" if call.requires_approval else "input",
            run.resource_id or "-",
            when(call.paused_at),
            "interrupted" if call.interrupted else "",
        ]
        for run in runs
        for call in run.pending
    ]


# ---- listing and showing ----------------------------------------------------------------------------


async def list_runs(args: Any, out: TextIO) -> int:
    """One page of the paused runs (``--limit`` of them, ``--page`` or ``--cursor``), read from the
    store's indexes or the server's listing: what it costs does not grow with the runs waiting."""
    if args.cursor is not None and args.page != 1:
        raise SystemExit("say --page or --cursor, not both")
    source = await open_source(args)
    page = Page(args.limit, args.page - 1, args.cursor)
    try:
        found, order = await source.pending_page(args.agent, args.thread, args.resource, page)
    finally:
        await source.close()
    shown, total = found.runs, found.total
    if args.json:
        json.dump(asdict(found), out, indent=2, default=str)
        out.write("\n")
        return 0
    if not total:
        out.write("Nothing is waiting for a decision.\n")
        return 0
    if shown:
        table(["RUN", *PENDING_HEADERS], _rows(shown), out)
    calls = sum(len(r.pending) for r in shown)
    if len(shown) == total:
        out.write(f"\n{calls} call(s) waiting in {total} run(s).\n")
        return 0
    out.write(f"\n{calls} call(s) waiting in the {len(shown)} run(s) shown.\n")
    if args.cursor is None:
        start = page.offset
        out.write(f"Runs {start + 1}-{start + len(shown)} of {total} shown ({order} first)")
    else:
        out.write(f"{len(shown)} of {total} runs shown ({order} first), from the cursor")
    if found.next_cursor is None:
        out.write(".\n")
    elif args.cursor is None:
        out.write(f"; next: --page {args.page + 1}.\n")
        out.write(f"Or, as fast however deep the page: --cursor {found.next_cursor}\n")
    else:
        out.write(f"; next: --cursor {found.next_cursor}\n")
    return 0


async def show_run(args: Any, out: TextIO) -> int:
    source = await open_source(args)
    try:
        if source.store is not None:
            return await _show_stored(source.store, args.run, out)
        runs = await source.find(args.run, args.agent, Progress())
        if not runs:
            raise SnapshotNotFoundError(
                f"run {safe(args.run)} is not waiting for a decision (or not yours to see)", run_id=args.run
            )
        out.write(f"run       {safe(args.run)}\nagent     {safe(runs[0].agent_id)}\nstatus    suspended\n")
        out.write("\nwaiting:\n")
        table(PENDING_HEADERS, [r[1:] for r in _rows(runs)], out)
        return 0
    finally:
        await source.close()


async def _show_stored(store: Store, run_id: str, out: TextIO) -> int:
    stored = await store.load_run(run_id)
    audit = await store.list_audit(run_id)
    if stored is None and not audit:
        raise SnapshotNotFoundError(f"run {safe(run_id)} not found (unknown, or finished)", run_id=run_id)
    if stored is not None:
        state = stored.state
        fields = [
            ("run", state.run_id),
            ("agent", state.agent_id),
            ("status", state.status),
            ("thread", state.thread_id or "-"),
            ("resource", state.resource_id or "-"),
            ("steps", f"{state.step} of at most {state.max_steps}"),
            ("messages", len(state.messages)),
        ]
        out.write("".join(f"{name:<9} {safe(value)}\n" for name, value in fields))
        pending = suspended_run(state)
        if pending.pending:
            out.write("\nwaiting:\n")
            table(PENDING_HEADERS, [r[1:] for r in _rows([pending])], out)
    else:
        out.write(f"run       {safe(run_id)}\nstatus    finished (its snapshot is gone)\n")
    if audit:
        out.write("\ndecisions:\n")
        table(
            ["WHEN", "CALL", "TOOL", "DECISION", "BY", "REASON"],
            [
                [when(e.decided_at), e.tool_call_id, e.tool_name, e.kind, e.decided_by or "-", e.reason or ""]
                for e in audit
            ],
            out,
        )
    _deliveries(await store.list_deliveries(run_id), out)
    return 0


def _deliveries(entries: list[OutboxEntry], out: TextIO) -> None:
    """Where the run's notifications stand (send one again: POST /api/deliveries/{id}/redeliver)."""
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
    table(
        ["DELIVERY", "EVENT", "TARGET", "STATUS", "ATTEMPTS", "LAST ERROR"],
        [[safe(c) for c in r] for r in rows],
        out,
    )


# ---- deciding ---------------------------------------------------------------------------------------


async def decide(args: Any, out: TextIO) -> int:
    """approve / decline / resume one call, then follow the run until it finishes or pauses again."""
    source = await open_source(args)
    try:
        who = _operator(source, args)
        agent_id, call = await _target(source, args, out)
        agent = source.agent(agent_id)
        try:
            stream = await _send(agent, args, call, who)
        except DecisionConflictError as exc:
            if exc.details.get("decision") != _DONE[args.command]:
                raise
            out.write(f"{safe(exc.message)}; nothing to do.\n")  # a retry: the decision stands
            return 0
        return await _follow(stream, out)
    finally:
        await source.close()


async def _target(source: Source, args: Any, out: TextIO) -> tuple[str, str]:
    """The agent and the one call this command decides. An omitted CALL is resolved once per command
    and run, and remembered, so a retry never reaches the run's next pause."""
    if args.call is not None:
        # A retry after the run finished is no longer listed: the agent remembered from the first try
        # still lets it hear "already decided".
        command = f"{args.command} {args.call}"
        known = recalled(source.where, args.run, command) or recalled(source.where, args.run, args.command)
        agent_id = args.agent or (known[0] if known else None) or await _agent_of(source, args.run)
        source.agent(agent_id)  # a read-only source stops here, before anything is remembered
        remember(source.where, args.run, command, agent_id, args.call)
        return agent_id, args.call
    known = recalled(source.where, args.run, args.command)
    if known is not None:
        agent_id, call = known
        out.write(f"call {safe(call)} of run {safe(args.run)} (chosen when this command was first given)\n")
        return args.agent or agent_id, call
    runs = await source.find(args.run, args.agent, Progress())
    if not runs or not runs[0].pending:
        raise SnapshotNotFoundError(
            f"run {safe(args.run)} is not waiting for a decision: it is unknown here, or it has finished "
            f"(`troupe runs show {safe(args.run)}` says which; to retry a decision, name its CALL)",
            run_id=args.run,
        )
    latest = max(runs[0].pending, key=lambda p: p.paused_at)
    # Bound to the call as it was listed: if it changes before the decision lands, it is refused.
    args.fingerprint = args.fingerprint or latest.fingerprint
    source.agent(runs[0].agent_id)  # a read-only source stops here, before anything is remembered
    remember(source.where, args.run, args.command, runs[0].agent_id, latest.tool_call_id)
    out.write(
        f"call {safe(latest.tool_call_id)} of run {safe(args.run)}: {safe('/'.join(latest.agent_path))} "
        f"{safe(latest.tool_name)} {safe(fit(json.dumps(latest.args, ensure_ascii=False), 200))}\n"
    )
    return runs[0].agent_id, latest.tool_call_id


# Who decides or cancels in-process when nobody says (no ``--as``): an anonymous principal, as an open
# server's caller is (not an admin: it did not say who it is). The runtime's own rules then apply: it
# decides only calls no approver policy governs, and cancels only what such a principal may (not a run
# a policy governs, nor one someone else started). Naming nobody must never be more than naming oneself.
ANONYMOUS_OPERATOR = Principal("anonymous", LOCAL_ISSUER, "anonymous", anonymous=True)


def _operator(source: Source, args: Any) -> dict[str, Any]:
    """Who decides in-process (``--app``): ``--as`` with its issuer and roles, or ``ANONYMOUS_OPERATOR``,
    audited as the CLI's. Over ``--server`` the server knows the caller by its key or token."""
    who = getattr(args, "as_subject", None)
    if source.runtime is None:
        if who:
            raise SystemExit("--as is for --app; with --server you are who your --key or --token says")
        return {}
    if not who:
        return {"decided_by": ANONYMOUS_OPERATOR, "surface": "cli"}
    try:
        principal = Principal(who, args.issuer or LOCAL_ISSUER, who, roles=frozenset(args.role or ()))
    except ValueError as exc:
        raise SystemExit(f"--as {safe(who)}: {exc}") from None
    return {"decided_by": principal, "surface": "cli"}


async def _send(agent: AsyncAgentAPI, args: Any, call: str, who: dict[str, Any]) -> AgentStream:
    target: dict[str, Any] = {
        "run_id": args.run,
        "tool_call_id": call,
        "fingerprint": args.fingerprint,
        **who,
    }
    if args.command == "approve":
        edited = _json_arg("--edited-args", args.edited_args) if args.edited_args else None
        return await agent.approve_tool_call(**target, edited_args=edited)
    if args.command == "decline":
        return await agent.decline_tool_call(**target, reason=args.reason)
    return await agent.resume_stream(_json_arg("--data", args.data), **target)


async def _agent_of(source: Source, run_id: str) -> str:
    if source.store is not None:
        stored = await source.store.load_run(run_id)
        if stored is not None:
            return stored.state.agent_id
        audit = await source.store.list_audit(run_id)
        if audit:
            return audit[0].agent_id
    for run in await source.pending(None, None, None, Progress()):
        if run.run_id == run_id:
            return run.agent_id
    raise AgentNotFoundError(
        f"no paused run {safe(run_id)} found; pass --agent if it is not paused", run_id=run_id
    )


async def _follow(stream: AgentStream, out: TextIO) -> int:
    """Print the run's progress as it streams: tool results, the answer's text, new pauses."""
    out.write(f"run {safe(stream.run_id)}\n")
    mid_text = False
    async for chunk in stream.full_stream:
        kind, payload = chunk.type, chunk.payload
        if kind == "text-delta":
            out.write(safe(payload["text"], keep="\n"))
            mid_text = True
            out.flush()
            continue
        if mid_text:
            out.write("\n")
            mid_text = False
        out.write(_describe(kind, payload))
    result = await stream.result()
    return 0 if result.finish_reason != "error" else 1


def _describe(kind: str, payload: dict[str, Any]) -> str:
    if kind in ("tool-result", "tool-error", "tool-output-denied"):
        denied = kind == "tool-output-denied"
        mark = "declined" if denied else ("error" if kind == "tool-error" else "done")
        told = payload["approval"].get("reason") if denied else payload.get("result")
        result = fit(json.dumps(told, default=str, ensure_ascii=False), 100)
        return f"  {safe(payload['tool_name'])} [{safe(payload['tool_call_id'])}] {mark}: {safe(result)}\n"
    if kind in ("tool-call-approval", "tool-call-suspended"):
        what = "needs approval" if kind == "tool-call-approval" else "asks for input"
        return (
            f"  paused: {safe('/'.join(payload['agent_path']))} {safe(payload['tool_name'])} "
            f"[{safe(payload['tool_call_id'])}] {what}\n"
        )
    if kind == "error":
        error = payload.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return f"  error: {safe(message)}\n"
    if kind == "finish":
        return f"finished: {safe(payload.get('finish_reason'))}\n"
    return ""


def _json_arg(flag: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{flag} must be JSON: {exc}") from exc


# ---- cancelling ---------------------------------------------------------------------------------------


async def cancel_run(args: Any, out: TextIO) -> int:
    """``troupe runs cancel RUN``: cancel the run wherever it stands; exit 0 once the cancel is durable."""
    source = await open_source(args)
    try:
        who = {_CANCEL_KEYS[k]: v for k, v in _operator(source, args).items()}
        agent_id = args.agent or await _agent_of(source, args.run)
        found = source.agent(agent_id)
        cancelled = await found.cancel_run(
            args.run, reason=args.reason, tool_call_id=args.call, fingerprint=args.fingerprint, **who
        )
        if source.runtime is not None:  # in-process: see the run to its end before the runtime goes
            with contextlib.suppress(SnapshotNotFoundError):
                await (await source.runtime.observe(agent_id, args.run)).result()
    finally:
        await source.close()
    by = f" by {safe(cancelled.cancelled_by)}" if cancelled.cancelled_by else ""
    out.write(
        f"run {safe(cancelled.run_id)} ({safe(cancelled.agent_id)}, {safe(cancelled.was)}) cancelled{by}: "
        f"{safe(cancelled.reason)}\n"
    )
    return 0


# The decision options `_operator` gives, as cancel_run takes them.
_CANCEL_KEYS = {"decided_by": "cancelled_by", "surface": "surface"}


# ---- running a command ------------------------------------------------------------------------------


def run_command(args: Any, out: TextIO | None = None) -> int:
    import asyncio

    out = out or sys.stdout
    handlers = {"list": list_runs, "show": show_run, "cancel": cancel_run}
    handler = handlers[args.runs_command] if args.command == "runs" else decide
    try:
        return asyncio.run(handler(args, out))
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as Unix tools do.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - flushing at exit must not fail again
        return 0
    except (TroupeError, httpx.TransportError) as exc:
        sys.stderr.write(f"troupe {args.command}: {_failure(args, exc)}\n")
        return 1


def _failure(args: Any, exc: Exception) -> str:
    """One line saying what went wrong and what to do about it."""
    if isinstance(exc, httpx.TransportError):
        reason = str(exc) or type(exc).__name__
        return f"cannot reach the server at {safe(redacted(args.server or ''))}: {safe(reason)}"
    assert isinstance(exc, TroupeError)
    if isinstance(exc, AuthenticationError):
        given = (getattr(args, "token", None), args.key, *(os.environ.get(v) for v in CREDENTIAL_VARS))
        if not any(given):
            return "the server needs a credential: pass --key KEY or --token TOKEN (or set TROUPE_API_KEY)"
        return f"the server refused the credential (--key, --token or their variables): {safe(exc.message)}"
    if (
        isinstance(exc, ApprovalPolicyError | CancelForbiddenError)
        and args.app
        and not getattr(args, "as_subject", None)
    ):
        return (
            f"{safe(exc.message)} [{exc.code}]; say who decides: --as SUBJECT [--issuer ISSUER] [--role ROLE]"
        )
    if isinstance(exc, StorageUnavailableError) and args.store:
        return f"cannot use the store {safe(redacted(args.store))}: {safe(exc.message)} [{exc.code}]"
    return f"{safe(exc.message)} [{exc.code}]"


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _where(parser: Any) -> None:
    group = parser.add_argument_group("where the runs are (one of)")
    group.add_argument("--server", metavar="URL", help="a troupe server, e.g. http://127.0.0.1:8000")
    group.add_argument("--key", help="API key for --server (default: $TROUPE_API_KEY)")
    group.add_argument("--token", help="an OIDC bearer token for --server, instead of a key ($TROUPE_TOKEN)")
    group.add_argument("--app", metavar="MODULE:ATTR", help="your Runtime (or a function returning one)")
    group.add_argument("--store", metavar="URL", help="an existing SQLite file or a redis:// URL (read-only)")
    group.add_argument(
        "--prefix", default="troupe:", help="Redis key prefix with --store (default: %(default)s)"
    )
    parser.add_argument("--agent", help="the agent (found from the run when omitted)")


def _who(parser: Any) -> None:
    group = parser.add_argument_group("who decides, with --app (audited as a local operator's decision)")
    group.add_argument("--as", dest="as_subject", metavar="SUBJECT", help="your subject id at its issuer")
    group.add_argument("--issuer", help="the subject's issuer (default: troupe, the local one)")
    group.add_argument("--role", action="append", metavar="ROLE", help="a role you hold (repeatable)")


def add_commands(commands: Any) -> None:
    """Register ``runs`` (list, show), ``approve``, ``decline`` and ``resume`` on the CLI."""
    _add_runs(commands)
    for name, help_text in (
        ("approve", "approve a paused call and follow the run"),
        ("decline", "decline a paused call (the model is told why) and follow the run"),
        ("resume", "answer a tool that paused itself with suspend(), and follow the run"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("run", metavar="RUN")
        command.add_argument(
            "call",
            metavar="CALL",
            nargs="?",
            help="tool call id (default: the latest paused one, chosen once: a retry means the same call)",
        )
        _where(command)
        _who(command)
        command.add_argument(
            "--fingerprint", help="decide only if the call still has this fingerprint (runs list --json)"
        )
        if name == "approve":
            command.add_argument(
                "--edited-args", metavar="JSON", help="changed arguments (tools that allow it)"
            )
        if name == "decline":
            command.add_argument("--reason", help="told to the model")
        if name == "resume":
            command.add_argument("--data", metavar="JSON", required=True, help="the answer, as JSON")


def _add_runs(commands: Any) -> None:
    runs = commands.add_parser("runs", help="list runs waiting for a decision, or show one run")
    runs_commands = runs.add_subparsers(dest="runs_command", metavar="WHAT", required=True)
    listing = runs_commands.add_parser("list", help="every paused call you may see, oldest first")
    _where(listing)
    listing.add_argument("--thread", help="only runs on this thread (needs --agent with --store)")
    listing.add_argument("--resource", help="only runs of this resource (needs --agent with --store)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.add_argument(
        "--limit", type=_positive, default=PAGE_SIZE, help="runs per page (default: %(default)s)"
    )
    listing.add_argument("--page", type=_positive, default=1, help="which page, from 1 (default: 1)")
    listing.add_argument(
        "--cursor", help="the page after the one that printed this cursor (as fast however deep it is)"
    )
    show = runs_commands.add_parser("show", help="one run: where it stands, what waits, what was decided")
    show.add_argument("run", metavar="RUN")
    _where(show)
    cancel = runs_commands.add_parser(
        "cancel",
        help="cancel a run, running or paused: in-flight work stops, pending pauses are withdrawn",
        description="Cancel a run wherever it stands (a model turn, a tool, a pause), with its subagents' "
        "runs. Done once the cancel is durable; a run another process drives stops within its next "
        "heartbeat. Needs --server or --app (a bare --store is read-only).",
    )
    cancel.add_argument("run", metavar="RUN")
    cancel.add_argument("--reason", help="why (recorded in the audit log, told to a parent's model)")
    cancel.add_argument(
        "--call", metavar="CALL", help="cancel only while this paused call still waits (with --fingerprint)"
    )
    cancel.add_argument("--fingerprint", help="the paused call's fingerprint, as `runs list --json` shows it")
    _where(cancel)
    _who(cancel)


__all__ = ["add_commands", "run_command"]
