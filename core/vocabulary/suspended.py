"""What ``list_suspended_runs`` returns: runs waiting for a human, and what each waits on (built from a
run's state by ``troupe.core.vocabulary.pause_shapes.suspended_run``).

Both classes display themselves: ``str()`` is a plain-text table, and in a notebook (Jupyter, IPython)
``_repr_html_`` renders an HTML table of the pending pauses, one row per paused tool call, every value
HTML-escaped. Ids, names and arguments come from models and callers: each character in them that draws
nothing or acts on a terminal (an escape, a right-to-left override, a tag) is shown as a mark naming it
(``troupe.core.vocabulary.hidden_chars``), in both.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from troupe.core.vocabulary.hidden_chars import visible


@dataclass(frozen=True)
class PendingToolCall:
    """One tool call of a listed run that waits for a person.

    Attributes:
        tool_call_id: The call to decide (for a subagent's call, the top agent's delegation call).
        tool_name: The tool that waits (the leaf tool, for a subagent's call).
        args: Its arguments, as the model gave them.
        requires_approval: True if it waits for an approval, False if for ``suspend()`` data.
        suspend_payload: What the tool asked with ``suspend()`` (None for an approval).
        agent_path: The agents from the top to the one whose tool it is.
        fingerprint: What the call asks, digested: pass it to a decision so that it applies only to
            exactly this.
        resume_schema: The JSON schema an answer must fit, if any.
        paused_at: When it paused.
        interrupted: The call was interrupted by a crash and is asked about again.
        expires_at: When it is declined for lack of a decision (``approval_timeout``), if ever.
        approvals: Who has approved it so far, towards an approver policy's quorum.
        tool_origin: Where the tool comes from (its MCP server, say), if not the agent itself.
        in_doubt: After a takeover, ``{"owner", "last_seen", "deadline"}``: not decidable before the
            deadline.
    """

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    requires_approval: bool
    suspend_payload: Any
    agent_path: list[str]
    fingerprint: str
    resume_schema: dict[str, Any] | None
    paused_at: datetime
    interrupted: bool = False
    expires_at: datetime | None = None
    approvals: list[str] = field(default_factory=list)  # towards an approver policy's quorum
    tool_origin: dict[str, Any] | None = None  # where the tool comes from (e.g. its MCP server)
    # In doubt after a takeover: {"owner", "last_seen", "deadline"}; not decidable before the deadline.
    in_doubt: dict[str, Any] | None = None

    @property
    def kind(self) -> Literal["approval", "suspend"]:
        """What the call waits for, as its pause chunk says: an approval, or ``suspend()`` data."""
        return "approval" if self.requires_approval else "suspend"


@dataclass(frozen=True)
class DelegatedBy:
    """The run that delegated a subagent's run, and its call that waits on it.

    A subagent's pauses are decided on the top-level run above it (where its approver policies are
    checked), never on the subagent's own run: this is the way up to it.

    Attributes:
        run_id: The delegating run (the top-level run, or a subagent's run that has a ``DelegatedBy``
            of its own).
        agent_id: Its agent.
        tool_call_id: Its call that delegated (the one that waits there).
    """

    run_id: str
    agent_id: str
    tool_call_id: str


@dataclass(frozen=True)
class SuspendedRun:
    """A run that waits for a person, as ``list_suspended_runs`` lists it.

    Attributes:
        run_id: The run (what the decision methods take).
        agent_id: Its agent.
        thread_id: Its thread, if any.
        resource_id: Its resource, if any.
        suspended_at: When its first waiting call paused.
        pending: Its waiting calls (``PendingToolCall``), oldest first; also ``tool_calls``.
        delegated_by: For a subagent's run, the run that delegated it (``DelegatedBy``): its calls are
            decided there, on the top-level run above, and a decision sent to this run is refused.
            ``None`` for a top-level run.
    """

    run_id: str
    agent_id: str
    thread_id: str | None
    resource_id: str | None
    suspended_at: datetime | None
    pending: list[PendingToolCall] = field(default_factory=list)
    delegated_by: DelegatedBy | None = None

    @property
    def tool_calls(self) -> list[PendingToolCall]:
        """The paused calls, oldest first: Mastra's ``run.toolCalls`` (``pending`` is the same list)."""
        return self.pending

    @property
    def status(self) -> str:
        """Always ``"suspended"`` for a listed run, as on the wire."""
        return "suspended"

    def __str__(self) -> str:
        return _text_table([self], f"run {self.run_id}: {_count(len(self.pending), 'paused tool call')}")

    def _repr_html_(self) -> str:
        return _html_table([self], f"Run {self.run_id}: {_count(len(self.pending), 'paused tool call')}")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("SuspendedRun(...)" if cycle else str(self))


@dataclass(frozen=True)
class SuspendedRunList:
    """One page of a listing of suspended runs: its ``runs``, how many runs the filters match in all
    (``total``), and ``next_cursor``, the cursor of the page after this one (``None`` on the last page):
    pass it back as ``cursor=`` with the same filters."""

    runs: list[SuspendedRun]
    total: int
    next_cursor: str | None = None

    def _caption(self) -> str:
        caption = _count(self.total, "suspended run")
        if self.total != len(self.runs):
            caption += f", {len(self.runs)} on this page"
        return caption

    def __str__(self) -> str:
        return _text_table(self.runs, self._caption())

    def _repr_html_(self) -> str:
        return _html_table(self.runs, self._caption())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("SuspendedRunList(...)" if cycle else str(self))


# ---- display ------------------------------------------------------------------------------------------

COLUMNS = (
    "run id",
    "tool call",
    "agent path",
    "tool",
    "arguments",
    "waits for",
    "thread",
    "resource",
    "waiting since",
    "expires",
    "interrupted",
)
_HTML_ARGS_CHARS = 300
_TEXT_ARGS_CHARS = 60


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def compact_json(value: Any) -> str:
    """JSON without spaces; what JSON cannot hold is shown by ``str``."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False, default=str)


def _when(stamp: datetime | None) -> str:
    if stamp is None:
        return ""
    if stamp == datetime.min:  # a listing from a client that did not get the time
        return "?"
    if stamp.tzinfo is not None:
        return stamp.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return stamp.strftime("%Y-%m-%d %H:%M:%S")


def _clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


def _rows(runs: Iterable[SuspendedRun]) -> list[tuple[list[str], PendingToolCall]]:
    """One row of cell texts per paused tool call (``COLUMNS`` order), with the call it shows."""
    rows = []
    for run in runs:
        for call in run.pending:
            waits = "approval" if call.requires_approval else "input: " + compact_json(call.suspend_payload)
            if run.delegated_by is not None:
                waits += f" (decided above: delegated by run {run.delegated_by.run_id})"
            rows.append(
                (
                    [
                        run.run_id,
                        call.tool_call_id,
                        " \u203a ".join(call.agent_path) or run.agent_id,
                        call.tool_name,
                        compact_json(call.args),
                        waits,
                        run.thread_id or "",
                        run.resource_id or "",
                        _when(call.paused_at),
                        _when(call.expires_at),
                        "yes" if call.interrupted else "",
                    ],
                    call,
                )
            )
    return [([visible(cell) for cell in cells], call) for cells, call in rows]


def _html_table(runs: Sequence[SuspendedRun], caption: str) -> str:
    esc = html.escape
    rows = _rows(runs)
    if not rows:
        return f'<div class="troupe-suspended"><em>{esc(caption)}: nothing is waiting for a human.</em></div>'
    head = "".join(f'<th style="text-align:left">{esc(name)}</th>' for name in COLUMNS)
    body = []
    for cells, call in rows:
        tds = []
        for name, value in zip(COLUMNS, cells, strict=True):
            if name in ("arguments", "waits for"):
                shown = _clip(value, _HTML_ARGS_CHARS)
                title = f' title="{esc(value)}"' if shown != value else ""
                tds.append(f'<td style="text-align:left"{title}><code>{esc(shown)}</code></td>')
            elif name in ("run id", "tool call"):
                tds.append(f'<td style="text-align:left"><code>{esc(value)}</code></td>')
            else:
                tds.append(f'<td style="text-align:left">{esc(value)}</td>')
        marker = ' class="troupe-interrupted"' if call.interrupted else ""
        body.append(f"<tr{marker}>{''.join(tds)}</tr>")
    return (
        '<table class="troupe-suspended">'
        f'<caption style="text-align:left">{esc(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody>"
        "</table>"
    )


def _text_table(runs: Sequence[SuspendedRun], caption: str) -> str:
    rows = [[_clip(cell, _TEXT_ARGS_CHARS) for cell in cells] for cells, _ in _rows(runs)]
    if not rows:
        return f"{caption}: nothing is waiting for a human."
    widths = [max(len(r[i]) for r in [list(COLUMNS), *rows]) for i in range(len(COLUMNS))]
    lines = [caption]
    for row in [list(COLUMNS), ["-" * w for w in widths], *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


__all__ = ["COLUMNS", "DelegatedBy", "PendingToolCall", "SuspendedRun", "SuspendedRunList", "compact_json"]
