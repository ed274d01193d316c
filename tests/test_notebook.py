"""Notebooks: the example notebook runs headless top to bottom (nbclient, a real kernel of this
interpreter), and the Approve / Decline buttons of ``troupe.notebook`` do what they say (their callbacks,
driven without a browser)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from helpers import delete_tool, echo_model, weather_tool
from nbclient import NotebookClient

from troupe import Agent, Runtime, SqliteStore
from troupe.notebook import ApprovalPanel, ApprovalRow, approval_buttons
from troupe.testing import CallLog, tool_call

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "approvals.ipynb"


# ---- the example notebook -----------------------------------------------------------------------------


def outputs_of(cell: nbformat.NotebookNode) -> tuple[str, str, list[str]]:
    """A cell's stream text, its text/html, and the mime types it produced."""
    streams = "".join(
        o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout"
    )
    html = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
    mimes = [mime for o in cell.outputs for mime in o.get("data", {})]
    return streams, html, mimes


@pytest.mark.timeout(180)
def test_the_example_notebook_runs_headless_and_decides_its_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TROUPE_EXECUTOR", "local")  # what the notebook defaults to; CI stays Ray-free here
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit it without outputs"
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)", id="test-interpreter"))
    client = NotebookClient(
        nb,
        timeout=60,  # per cell
        kernel_name="python3",  # jupyter_client starts it with this interpreter (sys.executable)
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError on any error

    cells = {c.id: c for c in nb.cells}
    assert outputs_of(cells["test-interpreter"])[0].strip() == sys.executable
    code = [c for c in nb.cells if c.cell_type == "code"]
    texts = [outputs_of(c)[0] for c in code]
    htmls = [outputs_of(c)[1] for c in code]

    # Streaming showed the subagent's approval request at the top, and the run paused.
    streamed = next(t for t in texts if "needs approval" in t)
    assert "delete_record {'id': 'rec-001'} (asked by ops > records, call ask-records)" in streamed
    assert "finish: suspended" in streamed
    # The pending-approvals table, rendered through _repr_html_.
    [table] = [h for h in htmls if "rec-001" in h and "<table" in h]
    assert 'class="troupe-suspended"' in table and "2 suspended runs" in table
    assert "ops \u203a records" in table and "{&quot;id&quot;:&quot;rec-002&quot;}" in table
    # The decisions: approved one ran the tool, declined one told the model why.
    everything = "".join(texts)
    assert 'Records agent says: delete_record -> {"deleted": "rec-001"}' in everything
    assert "Records agent says: delete_record -> rec-002 is still referenced by invoice 42" in everything
    assert any("nothing is waiting for a human" in h for h in htmls), "both runs were decided"
    # The buttons rendered as a widget, and their callbacks decided two more runs.
    assert any("application/vnd.jupyter.widget-view+json" in outputs_of(c)[2] for c in code)
    assert 'approved: Records agent says: delete_record -> {"deleted": "rec-003"}' in everything
    assert "declined: Records agent says: delete_record -> rec-004 belongs to an open order" in everything
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert errors == []


def test_importing_troupe_does_not_load_ipywidgets():
    code = (
        "import sys, troupe; assert 'ipywidgets' not in sys.modules and 'troupe.notebook' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---- the buttons' callbacks ---------------------------------------------------------------------------


@pytest.fixture
async def records_runtime(tmp_path: Path):
    calls = CallLog(tmp_path / "calls.jsonl")

    def records() -> Agent:
        return Agent(
            "records",
            model=echo_model(tool_call("delete_record", {"id": "u1"}, id="d1")),
            tools=[delete_tool(calls)],
        )

    agent = records()
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    yield agent, calls
    await runtime.shutdown()


async def paused_runs(agent: Agent, count: int) -> list[str]:
    return [(await agent.generate(f"delete u1 ({n})")).run_id for n in range(count)]


async def test_approve_and_decline_buttons_decide_their_own_calls(records_runtime):
    agent, calls = records_runtime
    first, second = await paused_runs(agent, 2)
    decided: list[ApprovalRow] = []
    panel = approval_buttons(agent, await agent.list_suspended_runs(), on_decided=decided.append)
    rows = {row.run_id: row for row in panel.rows}
    assert isinstance(panel, ApprovalPanel) and len(panel.rows) == 2
    assert [b.description for b in rows[first].buttons] == ["Approve", "Decline"]
    assert "delete_record" in rows[first].label.value and first in rows[first].label.value

    rows[first].approve.click()
    rows[first].approve.click()  # a second click while (or after) deciding does nothing more
    rows[second].text.value = "keep <u1>"
    rows[second].decline.click()
    assert rows[first].approve.disabled and rows[first].decline.disabled
    results = await panel.wait()

    assert [r.finish_reason for r in results] == ["stop", "stop"]
    approved, declined = rows[first].result, rows[second].result
    assert approved is not None and declined is not None
    assert {id(r) for r in results} == {id(approved), id(declined)}
    assert rows[first].decision == "approved"
    assert approved.text == 'd1={"deleted": "u1"}'
    assert rows[second].decision == "declined"
    assert declined.text == "d1=keep <u1>"
    assert "keep &lt;u1&gt;" in rows[second].status.value, "the outcome is shown escaped"
    assert "<b>approved</b>" in rows[first].status.value
    assert calls.count("delete_record") == 1
    assert {row.run_id for row in decided} == {first, second}
    assert (await agent.list_suspended_runs()).total == 0
    assert repr(panel) == "ApprovalPanel(2 paused calls, 2 decided)"


async def test_what_a_model_chose_shows_with_its_hidden_characters_marked(tmp_path: Path):
    """A model chooses the call id and the arguments: an escape sequence in the id must not reach a
    terminal (``str()``, IPython's display), and a right-to-left override or tag characters (text no
    screen draws) must not change what the person reads next to the Approve button, or in the tables."""
    from IPython.lib.pretty import pretty

    hidden_text = "".join(chr(0xE0000 + ord(c)) for c in "hi")
    calls = CallLog(tmp_path / "calls.jsonl")
    args = {"id": f"report-\u202egpj.exe{hidden_text}"}
    model = echo_model(tool_call("delete_record", args, id="d\x1b[2J"))
    agent = Agent("records", model=model, tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        await agent.generate("delete the report")
        runs = await agent.list_suspended_runs()
        [row] = approval_buttons(agent, runs).rows
        marks = ("\u27e6U+001B\u27e7", "\u27e6U+202E\u27e7", "\u27e6U+E0068\u27e7", "\u27e6U+E0069\u27e7")
        for shown in (row.label.value, runs._repr_html_(), str(runs), pretty(runs), str(runs.runs[0])):
            assert all(mark in shown for mark in marks), shown
            assert not {"\x1b", "\u202e", "\U000e0068", "\U000e0069"} & set(shown), shown
    finally:
        await runtime.shutdown()


async def test_a_decision_made_elsewhere_first_is_refused_and_the_row_stays_usable(records_runtime):
    agent, calls = records_runtime
    [run_id] = await paused_runs(agent, 1)
    panel = approval_buttons(agent, await agent.list_suspended_runs())
    [row] = panel.rows
    await agent.decline_tool_call_generate(run_id=run_id, tool_call_id="d1", reason="someone else")

    task = panel.approve(row)
    assert task is not None and await task is None
    assert row.result is None and row.decision is None
    assert type(row.error).__name__ in {"DecisionConflictError", "SnapshotNotFoundError"}
    assert "refused" in row.status.value
    assert not row.approve.disabled and not row.decline.disabled
    assert await panel.wait() == []
    assert calls.count("delete_record") == 0


async def test_a_suspend_pause_gets_an_answer_box(tmp_path: Path):
    calls = CallLog(tmp_path / "calls.jsonl")
    planner = Agent(
        "planner", model=echo_model(tool_call("weather", {}, id="w1")), tools=[weather_tool(calls)]
    )
    runtime = Runtime([planner], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        await planner.generate("weather?")
        panel = approval_buttons(planner, await planner.list_suspended_runs())
        [row] = panel.rows
        assert row.approve.description == "Send answer"
        assert row.decline.layout.display == "none"
        assert "Which city?" in row.label.value

        row.text.value = "not json"
        assert panel.approve(row) is None
        assert "not JSON" in row.status.value and row.task is None

        row.text.value = '{"city": "Rome"}'
        row.approve.click()
        [result] = await panel.wait()
        assert row.decision == "answered"
        assert result.text == 'w1={"city": "Rome", "forecast": "sunny"}'
    finally:
        await runtime.shutdown()


def test_without_a_running_loop_a_click_says_so_instead_of_hanging():
    from datetime import UTC, datetime

    from troupe import PendingToolCall, SuspendedRun, SuspendedRunList

    call = PendingToolCall("c1", "t", {}, True, None, ["a"], "f", None, datetime.now(UTC))
    nobody: Any = object()
    panel = approval_buttons(nobody, SuspendedRunList([SuspendedRun("r1", "a", None, None, None, [call])], 1))
    [row] = panel.rows
    row.approve.click()
    assert "no running event loop" in row.status.value
    assert row.task is None and not row.approve.disabled


def test_a_subagents_run_gets_no_buttons_only_where_it_is_decided():
    # A subagent's listing shows its own runs, whose calls are decided on the run above: buttons there
    # would only be refused, so the row says where to go instead.
    from datetime import UTC, datetime

    from troupe import DelegatedBy, PendingToolCall, SuspendedRun, SuspendedRunList

    call = PendingToolCall("c1", "delete", {}, True, None, ["sup", "ops"], "f", None, datetime.now(UTC))
    above = DelegatedBy("run-top", "sup", "d1")
    runs = [
        SuspendedRun("r1", "ops", None, None, None, [call], above),
        SuspendedRun("r2", "ops", None, None, None, [call]),
    ]
    panel = approval_buttons(object(), SuspendedRunList(runs, 2))  # type: ignore[arg-type]
    below, top = panel.rows
    for control in (below.approve, below.decline, below.text):
        assert control.layout.display == "none"
    assert "delegated by run <code>run-top</code> of agent <code>sup</code>" in below.status.value
    assert top.approve.layout.display != "none" and top.status.value == ""
