"""The approval inbox page (``GET /inbox``) in a real browser: headless Chromium driven by Playwright,
against a real server (uvicorn on 127.0.0.1, SqliteStore, executor="local").

Chromium comes from Debian (``scripts/setup.sh --system`` installs it); without it these tests fail
with a message saying so, they are never skipped. Screenshots of the inbox are kept in
``test-artifacts/`` at the repository root.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_server import KEYS, A, B
from inbox_agents import delete_tool, inbox_agents, inbox_runtime
from pydantic import BaseModel

from troupe import Agent, Runtime, SqliteStore, create_tool
from troupe.testing import FunctionModel, text, tool_call

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - reported by the fixture below
    sync_playwright = None  # type: ignore[assignment]

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 10_000  # for anything the page does by itself (a decision, a listing)
PUSH_WAIT_MS = 6_000  # a change is pushed within one of the server's looks (1 s)


def chromium_path() -> str:
    found = os.environ.get("TROUPE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found and os.path.exists("/usr/bin/chromium"):
        found = "/usr/bin/chromium"
    if not found:
        pytest.fail(
            "Chromium is not installed, so the inbox page cannot be tested: run "
            "`bash scripts/setup.sh --system` (it runs `apt-get install -y chromium`), or set "
            "TROUPE_CHROMIUM to a Chromium binary",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if sync_playwright is None:
        pytest.fail("Playwright is not installed: `pip install -e '.[dev]'` (or `pip install playwright`)")
    path = chromium_path()
    ARTIFACTS.mkdir(exist_ok=True)
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Inbox:
    """One tab on the inbox page, with the console watched for errors (a CSP violation shows there)."""

    def __init__(self, browser: Browser, url: str) -> None:
        self.url = url
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page: Page = self.context.new_page()
        self.page.set_default_timeout(WAIT_MS)
        self.problems: list[str] = []
        self.allowed: set[int] = set()  # HTTP error statuses a test provokes on purpose
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.on("console", self._console)
        self.requests: list[str] = []  # paths the page asked the API for
        self.page.on("request", lambda request: self.requests.append(request.url.split("?")[0]))

    def allow(self, *statuses: int) -> None:
        """Chromium logs every failed request (no key yet, a refused answer) as a console error."""
        self.allowed.update(statuses)

    def _console(self, message: Any) -> None:
        if message.type != "error":
            return
        failed = re.search(r"status of (\d{3})", message.text)
        if failed is None or int(failed.group(1)) not in self.allowed:
            self.problems.append(f"console: {message.text}")

    def open(self, query: str = "") -> Inbox:
        self.page.goto(self.url + "/inbox" + query)
        return self

    def cards(self):
        return self.page.get_by_test_id("pause")

    def card(self, run_id: str):
        return self.page.locator(f'[data-testid="pause"][data-run-id="{run_id}"]')

    def shown_runs(self) -> set[str]:
        return {c.get_attribute("data-run-id") or "" for c in self.cards().all()}

    def screenshot(self, name: str) -> Path:
        path = ARTIFACTS / name
        self.page.evaluate("window.scrollTo(0, 0)")  # the sticky header at the top
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000, "a screenshot of the page, not a blank"
        return path

    def close(self) -> None:
        self.context.close()
        assert not self.problems, self.problems


@pytest.fixture
def tabs(browser: Browser) -> Iterator[Any]:
    opened: list[Inbox] = []

    def open_tab(url: str, query: str = "") -> Inbox:
        tab = Inbox(browser, url)
        opened.append(tab)
        return tab.open(query)

    yield open_tab
    for tab in opened:
        tab.close()


@pytest.fixture
def server(http_server, tmp_path, calls):
    return http_server(inbox_runtime(tmp_path, calls), open_mode=True)


@pytest.fixture
def api(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url + "/api", timeout=30) as client:
        yield client


def start(api: httpx.Client, agent: str, message: str, headers: Any = None, **options: Any) -> str:
    body: dict[str, Any] = {"messages": message, "threadId": f"thread-{message}", **options}
    response = api.post(f"/agents/{agent}/generate", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["finishReason"] == "suspended"
    return response.json()["runId"]


def pending(api: httpx.Client, headers: Any = None) -> set[str]:
    response = api.get("/inbox", headers=headers)
    assert response.status_code == 200, response.text
    return {r["runId"] for r in response.json()["runs"]}


def audit(tmp_path: Path, run_id: str) -> tuple[list[Any], Any]:
    """The run's decisions and what is left of its snapshot, read from the server's SQLite file (in a
    thread of its own: Playwright's sync API keeps an event loop running in this one)."""

    async def read() -> tuple[list[Any], Any]:
        store = SqliteStore(tmp_path / "inbox.db")
        try:
            return await store.list_audit(run_id), await store.load_run(run_id)
        finally:
            await store.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


# ---- tests --------------------------------------------------------------------------------------------


def test_approve_from_the_page_runs_the_tool_once_and_shows_the_result(server, api, tabs, calls):
    ops = start(api, "ops", "rec-1", approvalTimeout=3600)
    planner = start(api, "planner", "dinner")
    nested = start(api, "sup", "rec-9")
    inbox = tabs(server.url)
    expect(inbox.cards()).to_have_count(3)
    assert [c.get_attribute("data-run-id") for c in inbox.cards().all()] == [ops, planner, nested]
    expect(inbox.page.get_by_test_id("new")).to_have_count(0)  # nothing is new on the first listing
    expect(inbox.page.get_by_test_id("count")).to_have_text("3 waiting")
    expect(inbox.page.get_by_test_id("who")).to_have_text("Open mode (no key)")
    expect(inbox.page.get_by_test_id("status")).to_contain_text("Live")

    card = inbox.card(ops)
    expect(card.get_by_test_id("agent-path")).to_have_text("ops")
    expect(card.get_by_test_id("tool")).to_have_text("delete_record")
    expect(card.get_by_test_id("args")).to_have_text('{\n  "id": "rec-1"\n}')
    expect(card.get_by_test_id("thread")).to_have_text("thread-rec-1")
    expect(card.get_by_test_id("resource")).to_have_text("—")
    expect(card.get_by_test_id("waiting-since")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"))
    expect(card.get_by_test_id("expires")).to_have_text(re.compile(r"^\d{4}-.* \(in (59 min|1 h 0 min)\)$"))
    expect(inbox.card(planner).get_by_test_id("expires")).to_have_text("never")
    expect(card.get_by_test_id("since")).to_contain_text("waiting")
    expect(card.get_by_test_id("badge")).to_have_text("needs approval")
    expect(card.get_by_test_id("interrupted")).to_have_count(0)
    expect(inbox.card(nested).get_by_test_id("agent-path")).to_have_text("sup\u203adata")
    inbox.screenshot("inbox.png")

    card.get_by_test_id("approve").click()
    expect(card).to_have_attribute("data-state", "decided")
    outcome = card.get_by_test_id("outcome")
    expect(outcome.get_by_test_id("verdict")).to_have_text("Approved")
    expect(card.get_by_test_id("badge")).to_have_text("approved")
    expect(outcome.get_by_test_id("result")).to_have_text('{\n  "deleted": "rec-1"\n}')
    expect(outcome.get_by_test_id("final-text")).to_have_text('call-1={"deleted": "rec-1"}')
    expect(outcome.get_by_test_id("progress")).to_have_text("The run finished.")
    expect(card.get_by_test_id("approve")).to_be_hidden()
    assert [e["id"] for e in calls.entries("delete_record")] == ["rec-1"], "the tool ran once"

    # A subagent's pause is decided at the top; the decision routes down to it.
    deep = inbox.card(nested)
    deep.get_by_test_id("approve").click()
    expect(deep.get_by_test_id("final-text")).to_have_text('sup: d1=call-1={"deleted": "rec-9"}')
    expect(deep.get_by_test_id("result")).to_have_text('call-1={"deleted": "rec-9"}')  # the subagent's text
    assert [e["id"] for e in calls.entries("delete_record")] == ["rec-1", "rec-9"]
    expect(inbox.page.get_by_test_id("count")).to_have_text("1 waiting")
    assert pending(api) == {planner}
    inbox.screenshot("inbox-decided.png")


def test_decline_with_a_reason_the_model_is_told(server, api, tabs, calls, tmp_path):
    run = start(api, "ops", "rec-2")
    inbox = tabs(server.url)
    card = inbox.card(run)
    card.get_by_test_id("reason").fill("keep it for the audit")
    card.get_by_test_id("decline").click()

    outcome = card.get_by_test_id("outcome")
    expect(outcome.get_by_test_id("verdict")).to_have_text("Declined: keep it for the audit")
    expect(outcome.get_by_test_id("result")).to_have_text("keep it for the audit")
    expect(card.get_by_test_id("badge")).to_have_text("declined")
    expect(outcome.get_by_test_id("final-text")).to_have_text("call-1=keep it for the audit")
    expect(outcome).to_have_attribute("data-finish", "stop")
    assert calls.count("delete_record") == 0, "a declined tool never runs"
    decisions, snapshot = audit(tmp_path, run)
    assert [(d.kind, d.reason, d.decided_by) for d in decisions] == [
        ("declined", "keep it for the audit", "anonymous")
    ]
    assert snapshot is None, "the run finished (its snapshot is gone)"
    assert pending(api) == set()
    # Below the card just decided, the page says what is left: not that nothing ever waited.
    expect(inbox.page.get_by_test_id("empty")).to_have_text("Nothing else is waiting for you.")
    expect(card).to_be_visible()


def test_a_suspension_is_answered_through_the_form_built_from_its_resume_schema(server, api, tabs, calls):
    run = start(api, "planner", "dinner")
    inbox = tabs(server.url)
    card = inbox.card(run)
    expect(card).to_have_attribute("data-kind", "input")
    # The question itself, as a person reads it: not the payload's JSON.
    expect(card.get_by_test_id("asks")).to_have_text("How many people?")
    expect(card.get_by_test_id("approve")).to_have_count(0)
    people = card.locator('input[data-field="people"]')
    seating = card.locator('select[data-field="seating"]')
    expect(people).to_have_attribute("type", "number")
    expect(card.locator('label[for="' + (people.get_attribute("id") or "") + '"] .required')).to_have_count(1)
    expect(seating).to_have_value("0")  # the schema's default, "indoor"
    assert seating.locator("option").all_text_contents() == ["indoor", "outdoor"]

    # Nothing typed: the form says so and sends nothing.
    card.get_by_test_id("send-answer").click()
    expect(card.get_by_test_id("field-error").first).to_have_text("Required.")
    expect(card).to_have_attribute("data-state", "pending")

    # Out of range: the server refuses it, the page shows why, and the run stays paused.
    inbox.allow(422)
    people.fill("0")
    card.get_by_test_id("send-answer").click()
    expect(card.get_by_test_id("error")).to_contain_text("people: Input should be greater than or equal to 1")
    inbox.screenshot("inbox-answer-refused.png")
    expect(card).to_have_attribute("data-state", "pending")
    assert pending(api) == {run}
    assert [e["phase"] for e in calls.entries("book_table")] == ["suspend"]

    people.fill("4")
    seating.select_option(label="outdoor")
    card.get_by_test_id("send-answer").click()
    outcome = card.get_by_test_id("outcome")
    expect(outcome.get_by_test_id("verdict")).to_have_text("Answered")
    expect(outcome.get_by_test_id("result")).to_have_text('{\n  "booked": 4,\n  "seating": "outdoor"\n}')
    expect(outcome.get_by_test_id("final-text")).to_have_text('b1={"booked": 4, "seating": "outdoor"}')
    expect(card.get_by_test_id("error")).to_be_hidden()
    assert calls.entries("book_table")[1:] == [{"name": "book_table", "phase": "resume", "people": 4}]
    assert pending(api) == set()


def test_new_pauses_appear_without_a_reload_and_a_reload_shows_exactly_what_is_pending(
    server, api, tabs, calls
):
    inbox = tabs(server.url)
    expect(inbox.page.get_by_test_id("empty")).to_have_text("Nothing is waiting for you.")

    first = start(api, "ops", "rec-a")
    expect(inbox.card(first)).to_be_visible(timeout=PUSH_WAIT_MS)
    expect(inbox.page.get_by_test_id("empty")).to_be_hidden()
    second = start(api, "planner", "lunch")
    third = start(api, "sup", "rec-c")
    expect(inbox.cards()).to_have_count(3, timeout=PUSH_WAIT_MS)
    assert [c.get_attribute("data-run-id") for c in inbox.cards().all()] == [first, second, third], (
        "new pauses are appended: nothing moves under the pointer"
    )
    expect(inbox.card(third).get_by_test_id("new")).to_be_visible()
    # Pushed by the server over one event stream: the page never polled the listing.
    api_paths = [p.split("/api", 1)[1] for p in inbox.requests if "/api/" in p]
    assert api_paths == ["/inbox/events"], api_paths

    # Half-typed input survives the listings that arrive meanwhile.
    inbox.card(second).locator('input[data-field="people"]').fill("7")
    inbox.card(first).get_by_test_id("approve").click()
    expect(inbox.card(first).get_by_test_id("final-text")).to_have_text('call-1={"deleted": "rec-a"}')
    # Decided elsewhere (another person, over the API): the page sees it go.
    api.post("/agents/sup/decline-tool-call", json={"runId": third, "toolCallId": "d1", "reason": "no"})
    expect(inbox.card(third)).to_have_attribute("data-state", "gone", timeout=PUSH_WAIT_MS * 2)
    expect(inbox.card(third).get_by_test_id("gone")).to_be_visible()
    expect(inbox.card(second).locator('input[data-field="people"]')).to_have_value("7")

    inbox.page.reload()
    expect(inbox.cards()).to_have_count(1)
    assert inbox.shown_runs() == pending(api) == {second}
    expect(inbox.card(second)).to_have_attribute("data-state", "pending")
    assert calls.count("delete_record") == 1


def test_with_an_api_key_a_tenant_sees_and_decides_only_its_own_pauses(http_server, tmp_path, calls, tabs):
    server = http_server(inbox_runtime(tmp_path, calls), keys=KEYS)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        own = start(api, "ops", "rec-a1", A, resourceId="a1")
        asks = start(api, "planner", "supper", A, resourceId="a2")
        other = start(api, "ops", "rec-b1", B, resourceId="b1")

        inbox = tabs(server.url)
        inbox.allow(401)
        login = inbox.page.get_by_test_id("login")
        expect(login).to_be_visible()
        # Plain words for a person, not the API's instructions to a program.
        expect(login).to_contain_text("This server needs an API key or a sign-in token")
        expect(login).not_to_contain_text("Authorization")
        expect(inbox.cards()).to_have_count(0)
        inbox.page.locator("#api-key").fill("not-a-key")
        inbox.page.locator("#api-key").press("Enter")
        expect(login).to_contain_text("That key was not accepted")
        expect(login).not_to_contain_text("Bearer")

        inbox.page.locator("#api-key").fill("key-a")
        inbox.page.get_by_role("button", name="Use key").click()
        expect(inbox.cards()).to_have_count(2)
        assert inbox.shown_runs() == {own, asks}, "never another tenant's pause"
        assert other not in inbox.shown_runs()
        expect(inbox.page.get_by_test_id("who")).to_have_text("Key …ey-a")
        assert inbox.page.evaluate("sessionStorage.getItem('troupe.inbox.apiKey')") == "key-a"
        inbox.screenshot("inbox-tenant.png")

        inbox.card(own).get_by_test_id("approve").click()
        expect(inbox.card(own).get_by_test_id("final-text")).to_have_text('call-1={"deleted": "rec-a1"}')
        decisions, _ = audit(tmp_path, own)
        assert [(d.kind, d.decided_by) for d in decisions] == [("approved", "tenant-a")]
        assert [e["id"] for e in calls.entries("delete_record")] == ["rec-a1"]

        inbox.page.reload()  # the key stays for this tab
        expect(inbox.cards()).to_have_count(1)
        assert inbox.shown_runs() == {asks}
        assert pending(api, B) == {other}, "the other tenant's pause is untouched"


def test_a_card_shows_who_started_the_run_and_who_approved_so_far(http_server, tmp_path, calls, tabs):
    """Separation of duties by eye: the card names the run's starter and the quorum's approvers, and an
    approval from the page is audited as the inbox's, under the key's subject."""
    from troupe.core.deciding.approvers import ApproverPolicy

    keys = {
        **KEYS,
        "key-bob": {"subject": "u-bob", "name": "Bob", "resources": ["a1"]},
        "key-carol": {"subject": "u-carol", "name": "Carol", "resources": ["a1"]},
    }
    policy = ApproverPolicy(agent="ops", separation_of_duties=True, quorum=2)
    server = http_server(inbox_runtime(tmp_path, calls, approver_policies=[policy]), keys=keys)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run = start(api, "ops", "rec-q", A, resourceId="a1")
        decide = {"runId": run, "toolCallId": "call-1"}
        counted = api.post(
            "/agents/ops/approve-tool-call", json=decide, headers={"Authorization": "Bearer key-bob"}
        )
        assert counted.status_code == 200

        inbox = tabs(server.url)
        inbox.allow(401)
        inbox.page.locator("#api-key").fill("key-carol")
        inbox.page.locator("#api-key").press("Enter")
        card = inbox.card(run)
        expect(card.get_by_test_id("started-by")).to_have_text("tenant-a")
        expect(card.get_by_test_id("approvals")).to_have_text("1 of 2 (Bob), 1 more needed")
        assert card.get_by_test_id("approvals").get_attribute("title") == "u-bob at troupe"
        inbox.screenshot("inbox-quorum.png")

        card.get_by_test_id("approve").click()
        expect(card.get_by_test_id("final-text")).to_have_text('call-1={"deleted": "rec-q"}')
    decisions, _ = audit(tmp_path, run)
    assert [(d.kind, d.subject, d.surface) for d in decisions] == [
        ("approval-recorded", "u-bob", "http"),
        ("approved", "u-carol", "inbox"),
    ]
    assert decisions[-1].approvals == ["Bob", "Carol"]


# "hi" in Unicode tag characters: text that no screen draws (a model reading it later would).
TAGS_HI = "\U000e0068\U000e0069"


def test_a_card_shows_its_context_and_marks_invisible_characters(http_server, tmp_path, calls, tabs):
    """What a person needs to judge a call is on its card, and a right-to-left override in model-written
    arguments is shown as a mark instead of silently reversing what the person reads; so are the
    characters that draw nothing at all (Unicode tags spelling out hidden text, a soft hyphen)."""

    def said_then_called(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if any(m["role"] == "tool" for m in messages):
            return text("done")
        return [
            text("The user wants the old report gone; deleting it."),
            tool_call("delete_record", {"id": f"report-\u202egpj.exe{TAGS_HI}\u00ad"}, id="f1"),
        ]

    def build() -> Runtime:
        files = Agent("files", model=FunctionModel(said_then_called), tools=[delete_tool(calls)])
        return Runtime(
            [*inbox_agents(calls), files], storage=SqliteStore(tmp_path / "inbox.db"), executor="local"
        )

    server = http_server(build, open_mode=True)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run = start(api, "files", "Please clean up the old quarterly report")
        nested = start(api, "sup", "rec-7")
    inbox = tabs(server.url)
    card = inbox.card(run)
    expect(card.get_by_test_id("context-request")).to_have_text("Please clean up the old quarterly report")
    expect(card.get_by_test_id("context-model-text")).to_have_text(
        "The user wants the old report gone; deleting it."
    )
    expect(card.get_by_test_id("context-tool")).to_have_text("Delete a record by id")
    expect(card.get_by_test_id("agent-path")).to_have_text("files")
    marks = card.get_by_test_id("args").get_by_test_id("invisible")
    expect(marks).to_have_text([f"\u27e6U+{code}\u27e7" for code in ("202E", "E0068", "E0069", "00AD")])
    shown = card.get_by_test_id("args").text_content() or ""
    assert not {"\u202e", "\U000e0068", "\U000e0069", "\u00ad"} & set(shown)
    deep = inbox.card(nested)
    expect(deep.get_by_test_id("context-request")).to_have_text("rec-7")
    expect(deep.get_by_test_id("context-tool")).to_have_text("Delete a record by id")
    expect(deep.get_by_test_id("agent-path")).to_have_text("sup\u203adata")
    card.scroll_into_view_if_needed()
    path = ARTIFACTS / "inbox-context.png"
    card.screenshot(path=str(path))
    assert path.stat().st_size > 5_000


class Transfer(BaseModel):
    memo: str
    to_account: int
    amount: int


def transfer_server(http_server: Any, tmp_path: Path, calls: Any, args: dict[str, Any]) -> Any:
    """A server whose ``bank`` agent asks to approve one transfer with ``args``, as the model wrote them."""

    def asked(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if any(m["role"] == "tool" for m in messages):
            return text("done")
        return tool_call("transfer", args, id="t1")

    def send(inp: Transfer, ctx: Any) -> dict[str, Any]:
        calls.record("transfer", to_account=inp.to_account)
        return {"sent": inp.amount}

    tool = create_tool("transfer", "Send money", Transfer, send, require_approval=True)

    def build() -> Runtime:
        bank = Agent("bank", model=FunctionModel(asked), tools=[tool])
        return Runtime([bank], storage=SqliteStore(tmp_path / "inbox.db"), executor="local")

    return http_server(build, open_mode=True)


def test_a_padded_argument_cannot_push_the_one_that_matters_out_of_view(http_server, tmp_path, calls, tabs):
    """A model may pad an early argument with pages of text so that the one that matters sits far below,
    in a box the person would have to scroll: the card cuts long values where they are, says how much
    it cut, and shows every argument at once; "Show all arguments" shows them whole."""
    memo = "Routine monthly payroll, approved as every month. " * 400
    server = transfer_server(http_server, tmp_path, calls, {"memo": memo, "to_account": 666, "amount": 5})
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run = start(api, "bank", "pay the staff")
    card = tabs(server.url).card(run)
    args = card.get_by_test_id("args")
    expect(args).to_contain_text('"to_account": 666')
    expect(card.get_by_test_id("cut")).to_have_text(f"\u2026 {len(memo) - 300:,} more characters")
    below_a_scroll = args.evaluate("box => box.scrollHeight > box.clientHeight + 1")
    assert not below_a_scroll, "every argument shows without scrolling inside the box"
    card.get_by_test_id("show-all-args").click()
    expect(args).to_contain_text(memo.strip())
    expect(card.get_by_test_id("cut")).to_have_count(0)


def test_a_number_javascript_cannot_hold_is_shown_as_the_tool_gets_it(http_server, tmp_path, calls, tabs):
    """An account number of 17 digits is past what a JavaScript number holds exactly: the card shows the
    digits the tool will get, not the nearest double (12345678901234568)."""
    account, amount = 12345678901234567, 9007199254740993
    args = {"memo": "rent", "to_account": account, "amount": amount}
    server = transfer_server(http_server, tmp_path, calls, args)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run = start(api, "bank", "pay the rent")
    shown = tabs(server.url).card(run).get_by_test_id("args")
    expect(shown).to_contain_text(f'"to_account": {account}')
    expect(shown).to_contain_text(f'"amount": {amount}')


def test_the_page_decides_only_the_call_it_shows(server, api, browser, calls):
    """The page names the fingerprint of the call it shows. Here what it shows is not what waits (the
    listings it reads, streamed or fetched, are rewritten on the way to it): the server refuses the
    decision, the page says why, the tool never runs and the call stays pending."""
    ops = start(api, "ops", "rec-1")
    inbox = Inbox(browser, server.url)
    inbox.allow(409)

    def stale_listing() -> dict[str, Any]:
        listing = api.get("/inbox").json()
        for run in listing["runs"]:
            for call in run["toolCalls"]:
                call["fingerprint"] = "0" * 32
        return listing

    def stale_stream(route: Any) -> None:  # one listing, then the stream ends (the page reconnects)
        body = f"data: {json.dumps(stale_listing())}\n\n"
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)

    inbox.page.route("**/api/inbox/events*", stale_stream)
    inbox.page.route("**/api/inbox", lambda route: route.fulfill(json=stale_listing()))
    try:
        card = inbox.open().card(ops)
        card.get_by_test_id("approve").click()
        expect(card.get_by_test_id("error")).to_contain_text("fingerprint")
        assert calls.count() == 0
        assert pending(api) == {ops}
    finally:
        inbox.close()


def test_a_long_inbox_is_shown_a_page_at_a_time_and_stays_live(server, api, tabs, calls):
    """With more pauses than a page holds, the page shows the oldest ones and the count of all, and
    "Show more" brings the next page (by its cursor); a pause decided elsewhere is marked gone from the
    stream's changes, and once every page is shown a new pause is appended."""
    runs = [start(api, "ops", f"rec-{i}") for i in range(5)]
    inbox = tabs(server.url, "?perPage=2")  # the page's address sets its page size
    expect(inbox.cards()).to_have_count(2)
    assert [c.get_attribute("data-run-id") for c in inbox.cards().all()] == runs[:2], "the oldest first"
    count = inbox.page.get_by_test_id("count")
    expect(count).to_have_text("5 runs waiting, 2 calls shown")
    more = inbox.page.get_by_test_id("more")
    more.click()
    expect(inbox.cards()).to_have_count(4)
    more.click()
    expect(inbox.cards()).to_have_count(5)
    assert [c.get_attribute("data-run-id") for c in inbox.cards().all()] == runs
    expect(more).to_be_hidden()
    expect(count).to_have_text("5 waiting")

    # Decided elsewhere, on the last page: the stream's change reaches its card.
    api.post("/agents/ops/decline-tool-call", json={"runId": runs[3], "toolCallId": "call-1"})
    expect(inbox.card(runs[3])).to_have_attribute("data-state", "gone", timeout=PUSH_WAIT_MS * 2)
    expect(count).to_have_text("4 waiting")
    later = start(api, "ops", "rec-later")
    expect(inbox.card(later)).to_be_visible(timeout=PUSH_WAIT_MS)
    expect(inbox.card(later).get_by_test_id("new")).to_be_visible()
    assert [c.get_attribute("data-run-id") for c in inbox.cards().all()] == [*runs, later]
    api_paths = [p.split("/api", 1)[1] for p in inbox.requests if "/api/" in p]
    # Pages by cursor, the rest pushed; the one card that went asks once why (was it cancelled?).
    assert api_paths == ["/inbox/events", "/inbox", "/inbox", f"/agents/ops/runs/{runs[3]}"]
    assert calls.count() == 0
