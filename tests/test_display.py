"""How suspended runs display: an HTML table in notebooks (every value escaped), plain text elsewhere."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

from helpers import delete_tool, echo_model, weather_tool
from IPython.lib.pretty import pretty

from troupe import Agent, PendingToolCall, Runtime, SqliteStore, SuspendedRun, SuspendedRunList
from troupe.testing import CallLog, FunctionModel, text, tool_call

NASTY = "<script>alert(\"x\")</script> & 'quotes'"
PAUSED_AT = datetime(2026, 3, 1, 9, 30, 15, tzinfo=UTC)
EXPIRES_AT = datetime(2026, 3, 2, 9, 30, 15, tzinfo=UTC)


class Table(HTMLParser):
    """The caption, header and cell texts of the tables in a page, as a browser would read them."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.caption = ""
        self.head: list[str] = []
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self.row_classes: list[str | None] = []
        self._in: str | None = None
        self._cell: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "tr" and self.head:
            self.rows.append([])
            self.row_classes.append(dict(attrs).get("class"))
        if tag in ("th", "td", "caption"):
            self._in, self._cell = tag, []

    def handle_endtag(self, tag: str) -> None:
        if tag != self._in:
            return
        value = "".join(self._cell)
        if tag == "caption":
            self.caption = value
        elif tag == "th":
            self.head.append(value)
        else:
            self.rows[-1].append(value)
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self._cell.append(data)

    def records(self) -> list[dict[str, str]]:
        return [dict(zip(self.head, row, strict=True)) for row in self.rows]


def pending(**overrides) -> PendingToolCall:
    fields = {
        "tool_call_id": "d1",
        "tool_name": "delete_record",
        "args": {"id": "u1"},
        "requires_approval": True,
        "suspend_payload": None,
        "agent_path": ["sup", "data"],
        "fingerprint": "f" * 32,
        "resume_schema": None,
        "paused_at": PAUSED_AT,
    }
    return PendingToolCall(**{**fields, **overrides})


def listing() -> SuspendedRunList:
    first = SuspendedRun(
        "run-1",
        "sup",
        thread_id=NASTY,
        resource_id="alice & bob",
        suspended_at=PAUSED_AT,
        pending=[
            pending(args={"id": NASTY, "count": 2, "nested": {"ok": True}}),
            pending(
                tool_call_id="d2",
                tool_name="weather",
                args={},
                requires_approval=False,
                suspend_payload={"message": "Which <city>?"},
                agent_path=["sup", "planner"],
                interrupted=True,
                expires_at=EXPIRES_AT,
            ),
        ],
    )
    second = SuspendedRun("run-2", "sup", None, None, PAUSED_AT, [pending(agent_path=["sup"])])
    return SuspendedRunList([first, second], total=5)


def test_the_html_table_has_a_row_per_paused_call_with_every_column():
    table = Table(listing()._repr_html_())

    assert table.head == [
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
    ]
    assert table.caption == "5 suspended runs, 2 on this page"
    first, second, third = table.records()
    assert first == {
        "run id": "run-1",
        "tool call": "d1",
        "agent path": "sup \u203a data",
        "tool": "delete_record",
        "arguments": json.dumps({"id": NASTY, "count": 2, "nested": {"ok": True}}, separators=(",", ":")),
        "waits for": "approval",
        "thread": NASTY,
        "resource": "alice & bob",
        "waiting since": "2026-03-01 09:30:15 UTC",
        "expires": "",
        "interrupted": "",
    }
    assert second["tool"] == "weather"
    assert second["agent path"] == "sup \u203a planner"
    assert second["waits for"] == 'input: {"message":"Which <city>?"}'
    assert second["expires"] == "2026-03-02 09:30:15 UTC"
    assert second["interrupted"] == "yes"
    assert table.row_classes == [None, "troupe-interrupted", None]
    assert third["run id"] == "run-2" and third["thread"] == "" and third["resource"] == ""


def test_every_value_is_html_escaped():
    page = listing()._repr_html_()

    assert "<script>" not in page and "</script>" not in page
    assert "&lt;script&gt;" in page
    assert "alice &amp; bob" in page
    assert "Which &lt;city&gt;?" in page
    # Only the table's own markup is left: no tag came from the data.
    allowed = {"table", "caption", "thead", "tbody", "tr", "th", "td", "code"}
    assert set(Table(page).tags) <= allowed


def test_markup_in_ids_and_names_cannot_break_out_of_a_cell():
    evil = '"><img src=x onerror=alert(1)>'
    run = SuspendedRun(
        evil,
        "sup",
        evil,
        evil,
        PAUSED_AT,
        [pending(tool_call_id=evil, tool_name=evil, agent_path=[evil, "data"], args={evil: evil})],
    )
    page = SuspendedRunList([run], 1)._repr_html_()
    table = Table(page)

    assert "img" not in table.tags
    [record] = table.records()
    assert record["run id"] == record["tool call"] == record["tool"] == record["thread"] == evil
    assert json.loads(record["arguments"]) == {evil: evil}
    assert Table(run._repr_html_()).records() == [record]


def test_long_arguments_are_clipped_with_the_full_json_in_the_title():
    long_args = {"text": "x" * 1000 + "<end>"}
    page = SuspendedRunList([SuspendedRun("r", "a", None, None, None, [pending(args=long_args)])], 1)
    shown = Table(page._repr_html_()).records()[0]["arguments"]

    assert len(shown) == 300 and shown.endswith("\u2026")
    assert 'title="{&quot;text&quot;:&quot;xxx' in page._repr_html_()
    assert "&lt;end&gt;&quot;}" in page._repr_html_()


def test_an_empty_listing_says_nothing_is_waiting():
    empty = SuspendedRunList([], 0)

    assert "nothing is waiting for a human" in empty._repr_html_()
    assert "<table" not in empty._repr_html_()
    assert str(empty) == "0 suspended runs: nothing is waiting for a human."


def test_plain_text_and_ipython_pretty_show_the_same_table():
    found = listing()
    lines = str(found).splitlines()

    assert lines[0] == "5 suspended runs, 2 on this page"
    assert lines[1].split()[:4] == ["run", "id", "tool", "call"]
    assert lines[3].startswith("run-1") and "delete_record" in lines[3] and "alice & bob" in lines[3]
    assert "yes" in lines[4] and "2026-03-02 09:30:15 UTC" in lines[4]
    assert lines[5].startswith("run-2")
    assert pretty(found) == str(found)
    run = found.runs[1]
    assert str(run).splitlines()[0] == "run run-2: 1 paused tool call"
    assert pretty(run) == str(run)
    assert repr(run).startswith("SuspendedRun(run_id='run-2'"), "repr stays the dataclass one"


async def test_a_real_listing_shows_the_leaf_tool_and_the_path_to_it(tmp_path: Path):
    calls = CallLog(tmp_path / "calls.jsonl")
    data = Agent(
        "data",
        description="Looks after records",
        model=echo_model(tool_call("delete_record", {"id": "<u1>"}, id="leaf-1")),
        tools=[delete_tool(calls)],
    )
    planner = Agent(
        "planner", model=echo_model(tool_call("weather", {}, id="w1")), tools=[weather_tool(calls)]
    )

    def sup_turn(messages, tools):
        if messages[-1]["role"] == "tool":
            return text("done")
        return [
            tool_call("agent-data", {"prompt": "delete <u1>"}, id="d1"),
            tool_call("agent-planner", {"prompt": "weather?"}, id="p1"),
        ]

    sup = Agent("sup", model=FunctionModel(sup_turn), agents={"data": data, "planner": planner})
    runtime = Runtime([sup], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        paused = await sup.generate("tidy up", thread_id="t-1", resource_id="alice", approval_timeout=3600)
        found = await sup.list_suspended_runs()
        records = Table(found._repr_html_()).records()

        assert [(r["run id"], r["tool call"], r["agent path"], r["tool"]) for r in records] == [
            (paused.run_id, "d1", "sup \u203a data", "delete_record"),
            (paused.run_id, "p1", "sup \u203a planner", "weather"),
        ]
        approval, question = records
        assert approval["arguments"] == '{"id":"<u1>"}'
        assert approval["waits for"] == "approval"
        assert question["waits for"] == 'input: {"message":"Which city?"}'
        assert approval["thread"] == "t-1" and approval["resource"] == "alice"
        assert approval["waiting since"].endswith(" UTC") and approval["expires"].endswith(" UTC")
        assert approval["interrupted"] == ""
        assert paused.run_id in str(found)
    finally:
        await runtime.shutdown()
