"""Approve and decline paused tool calls from a notebook, with buttons (needs ``ipywidgets``).

    from troupe.notebook import approval_buttons

    panel = approval_buttons(agent, await agent.list_suspended_runs())
    panel                      # one row per paused call: Approve, and Decline with the reason typed beside it
    results = await panel.wait()   # the RunResult of every decision made from the panel so far

A click runs the decision on the running event loop (the kernel's, the one top-level ``await`` uses),
exactly as ``await agent.approve_tool_call_generate(...)`` in a cell would; the row then shows how the run
went on (finished, or paused again). A ``suspend()`` pause gets an answer box instead: its text is sent as
JSON resume data. Each decision names the call's ``fingerprint``, so it only lands on the call that was
shown. ``agent`` is a ``troupe.Agent`` or an HTTP ``AsyncAgentClient``.

Not imported by ``import troupe``: only this module needs ipywidgets (``pip install ipywidgets``).
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

try:
    import ipywidgets as widgets
except ImportError as exc:  # pragma: no cover - exercised only where ipywidgets is missing
    raise ImportError(
        "troupe.notebook needs ipywidgets: pip install ipywidgets (or decide in a cell with "
        "await agent.approve_tool_call_generate(...))"
    ) from exc

from troupe.core.vocabulary.agent_api import AsyncAgentAPI
from troupe.core.vocabulary.hidden_chars import visible
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.suspended import PendingToolCall, SuspendedRun, SuspendedRunList, compact_json

# What the panel calls (the decision methods of any agent, in-process or over HTTP): ``troupe.Agent`` and
# ``AsyncAgentClient`` are both ``AsyncAgentAPI``s. The name stays, as ``troupe.notebook`` exports it.
Decider = AsyncAgentAPI


@dataclass(eq=False)
class ApprovalRow:
    """One paused call, its controls and, once decided, what came of it."""

    run_id: str
    call: PendingToolCall
    label: Any
    approve: Any  # Approve (or "Send answer" for a suspend() pause)
    decline: Any  # Decline; hidden for a suspend() pause
    text: Any  # the decline reason, or the JSON answer
    status: Any
    box: Any
    decision: str | None = None  # "approved", "declined" or "answered" once clicked
    task: asyncio.Task[RunResult | None] | None = None
    result: RunResult | None = None
    error: BaseException | None = None
    buttons: list[Any] = field(default_factory=list)


class ApprovalPanel:
    """Approve / Decline buttons for every paused call of a ``SuspendedRunList``.

    ``widget`` is the ipywidgets box (the panel displays as it); ``rows`` the rows in table order;
    ``wait()`` awaits the decisions clicked so far. ``on_decided(row)`` is called after each one.
    """

    def __init__(
        self,
        agent: Decider,
        runs: SuspendedRunList,
        *,
        on_decided: Callable[[ApprovalRow], Any] | None = None,
    ) -> None:
        self.agent = agent
        self.on_decided = on_decided
        self.rows: list[ApprovalRow] = [self._row(run, call) for run in runs.runs for call in run.pending]
        header = widgets.HTML(f"<b>{_esc(_caption(runs))}</b>")
        self.widget = widgets.VBox([header, *(row.box for row in self.rows)])

    # ---- building -----------------------------------------------------------------------------------

    def _row(self, run: SuspendedRun, call: PendingToolCall) -> ApprovalRow:
        esc = _esc
        run_id = run.run_id
        path = " \u203a ".join(call.agent_path)
        label = widgets.HTML(
            f"<code>{esc(call.tool_name)}</code> <code>{esc(compact_json(call.args))}</code>"
            f"<br><small>{esc(path)} · run <code>{esc(run_id)}</code> · call "
            f"<code>{esc(call.tool_call_id)}</code>{' · interrupted' if call.interrupted else ''}</small>",
            layout=widgets.Layout(width="50%"),
        )
        status = widgets.HTML("")
        if call.requires_approval:
            approve = widgets.Button(description="Approve", button_style="success", icon="check")
            decline = widgets.Button(description="Decline", button_style="danger", icon="times")
            text = widgets.Text(placeholder="reason (optional)", layout=widgets.Layout(width="14em"))
        else:
            asks = compact_json(call.suspend_payload)
            label.value += f"<br><small>asks: <code>{esc(asks)}</code></small>"
            approve = widgets.Button(description="Send answer", button_style="info", icon="reply")
            decline = widgets.Button(description="Decline", layout=widgets.Layout(display="none"))
            text = widgets.Text(placeholder='answer as JSON, e.g. {"city": "Rome"}')
        if run.delegated_by is not None:
            # A subagent's run (listed under its own agent): its calls are decided above, so no button
            # here would be taken; the row says where to decide instead.
            above = run.delegated_by
            for control in (approve, decline, text):
                control.layout.display = "none"
            status.value = (
                f"<small>decided above: delegated by run <code>{esc(above.run_id)}</code> of agent "
                f"<code>{esc(above.agent_id)}</code></small>"
            )
        box = widgets.HBox([label, approve, decline, text, status])
        row = ApprovalRow(
            run_id, call, label, approve, decline, text, status, box, buttons=[approve, decline]
        )
        approve.on_click(lambda _button: self.approve(row))
        decline.on_click(lambda _button: self.decline(row))
        return row

    # ---- callbacks (what the buttons do; callable directly) ------------------------------------------

    def approve(self, row: ApprovalRow) -> asyncio.Task[RunResult | None] | None:
        """Approve the row's call (or send its answer, for a ``suspend()`` pause)."""
        call = row.call
        if not call.requires_approval:
            try:
                answer = json.loads(row.text.value) if row.text.value.strip() else None
            except json.JSONDecodeError as exc:
                row.status.value = _error_html(f"the answer is not JSON: {exc}")
                return None
            return self._start(
                row,
                "answered",
                lambda: self.agent.resume_generate(
                    answer, run_id=row.run_id, tool_call_id=call.tool_call_id, fingerprint=call.fingerprint
                ),
            )
        return self._start(
            row,
            "approved",
            lambda: self.agent.approve_tool_call_generate(
                run_id=row.run_id, tool_call_id=call.tool_call_id, fingerprint=call.fingerprint
            ),
        )

    def decline(self, row: ApprovalRow) -> asyncio.Task[RunResult | None] | None:
        """Decline the row's call with the reason typed beside it (the default reason if empty)."""
        reason = row.text.value.strip() or None
        call = row.call
        return self._start(
            row,
            "declined",
            lambda: self.agent.decline_tool_call_generate(
                run_id=row.run_id, tool_call_id=call.tool_call_id, reason=reason, fingerprint=call.fingerprint
            ),
        )

    def _start(
        self, row: ApprovalRow, decision: str, make: Callable[[], Awaitable[RunResult]]
    ) -> asyncio.Task[RunResult | None] | None:
        if row.task is not None:  # decided already from this panel
            return row.task
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            row.status.value = _error_html("no running event loop (use the panel in a notebook)")
            return None
        row.decision = decision
        for button in row.buttons:
            button.disabled = True
        row.text.disabled = True
        row.status.value = f"<i>{_esc(decision)}, the run goes on\u2026</i>"
        row.task = loop.create_task(self._decide(row, make))
        return row.task

    async def _decide(self, row: ApprovalRow, make: Callable[[], Awaitable[RunResult]]) -> RunResult | None:
        """Run one decision; a refused one (say, decided elsewhere already) is shown on the row, which
        is enabled again, and gives None."""
        try:
            result = await make()
        except Exception as exc:
            row.error = exc
            row.status.value = _error_html(f"{row.decision} refused: {type(exc).__name__}: {exc}")
            for button in row.buttons:
                button.disabled = False
            row.text.disabled = False
            row.task = None
            row.decision = None
            self._notify(row)
            return None
        row.error = None
        row.result = result
        row.status.value = _outcome_html(row.decision or "", result)
        self._notify(row)
        return result

    def _notify(self, row: ApprovalRow) -> None:
        if self.on_decided is not None:
            self.on_decided(row)

    # ---- results ------------------------------------------------------------------------------------

    async def wait(self) -> list[RunResult]:
        """Wait for the decisions clicked so far; their results, in row order. A refused decision gives
        no result (its row says why, and ``row.error`` holds the error)."""
        tasks = [row.task for row in self.rows if row.task is not None]
        return [result for result in await asyncio.gather(*tasks) if result is not None]

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        decided = sum(1 for row in self.rows if row.decision is not None)
        return f"ApprovalPanel({len(self.rows)} paused calls, {decided} decided)"


def approval_buttons(
    agent: Decider, runs: SuspendedRunList, *, on_decided: Callable[[ApprovalRow], Any] | None = None
) -> ApprovalPanel:
    """Approve / Decline buttons for each paused call in ``runs`` (from ``agent.list_suspended_runs()``),
    wired to ``agent``'s decision methods. Display the returned panel (make it a cell's last expression)."""
    return ApprovalPanel(agent, runs, on_decided=on_decided)


def _caption(runs: SuspendedRunList) -> str:
    calls = sum(len(run.pending) for run in runs.runs)
    if not calls:
        return "Nothing is waiting for a human."
    return f"{calls} paused tool call{'' if calls == 1 else 's'} waiting for a decision"


def _outcome_html(decision: str, result: RunResult) -> str:
    esc = _esc
    if result.finish_reason == "suspended":
        payload = result.suspend_payload or {}
        again = f"{payload.get('tool_name', '?')} {compact_json(payload.get('args', {}))}"
        return f"<b>{esc(decision)}</b>; the run paused again: <code>{esc(again)}</code>"
    return f"<b>{esc(decision)}</b> \u2192 {esc(result.text)}"


def _error_html(message: str) -> str:
    return f'<span style="color:#b00">{_esc(message)}</span>'


def _esc(value: Any) -> str:
    """A model's or a caller's text for the panel: HTML-escaped, and each character that draws nothing
    or reorders what is read (a right-to-left override, a tag) shown as a mark naming it."""
    return html.escape(visible(str(value)))


__all__ = ["ApprovalPanel", "ApprovalRow", "Decider", "approval_buttons"]
