"""The inbox shows quorum progress and where each pause's notifications stand, in a real browser
(Debian's Chromium through Playwright) against a real server, real webhook receivers and real SQLite.
The screenshot is kept in ``test-artifacts/inbox-quorum-deliveries.png``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import delete_tool, echo_model
from test_inbox_browser import CHROMIUM_ARGS, WAIT_MS, Inbox, chromium_path
from test_notifications import SECRET
from troupe.core.deciding.approvers import ApproverPolicy
from troupe.core.notifying.outbox import Notifications, NotificationTarget, RetrySchedule
from webhook_receiver import Receiver

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, tool_call

try:
    from playwright.sync_api import Browser, expect, sync_playwright
except ImportError:  # pragma: no cover - reported by the fixture below
    sync_playwright = None  # type: ignore[assignment]

KEYS = {"key-alice": {"name": "alice", "admin": True}, "key-bob": {"name": "bob", "admin": True}}
# The failing receiver is retried slowly here, so its attempt count is stable while the page is looked at.
RETRY = RetrySchedule(delays=(30.0,) * 5, timeout_s=2.0, lease_s=5.0, poll_s=0.05)


@pytest.fixture
def browser() -> Iterator[Browser]:
    if sync_playwright is None:
        pytest.fail("Playwright is not installed: `pip install -e '.[dev]'` (or `pip install playwright`)")
    path = chromium_path()
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def receivers() -> Iterator[tuple[Receiver, Receiver]]:
    chat, pager = Receiver().start(), Receiver(status=503).start()
    yield chat, pager
    chat.stop()
    pager.stop()


def test_the_inbox_shows_quorum_progress_and_delivery_state(
    http_server, tmp_path: Path, calls: CallLog, browser: Browser, receivers: tuple[Receiver, Receiver]
):
    chat, pager = receivers

    def build() -> Runtime:
        agent = Agent(
            "ops",
            model=echo_model(tool_call("delete_record", {"id": "rec-7"}, id="call-1")),
            tools=[delete_tool(calls)],
        )
        targets = (
            NotificationTarget(chat.url, SECRET, name="chat"),
            NotificationTarget(pager.url, SECRET, name="pager"),
        )
        return Runtime(
            [agent],
            storage=SqliteStore(tmp_path / "inbox.db"),
            executor="local",
            notifications=Notifications(targets, retry=RETRY),
            approver_policies=[ApproverPolicy(tool="delete_record", quorum=2)],
        )

    server = http_server(build, keys=KEYS, open_mode=True)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run_id = api.post("/agents/ops/generate", json={"messages": "go"}).json()["runId"]
        alice = {"Authorization": "Bearer key-alice"}
        counted = api.post(
            "/agents/ops/approve-tool-call-generate",
            json={"runId": run_id, "toolCallId": "call-1"},
            headers=alice,
        )
        assert counted.status_code == 200 and counted.json()["finishReason"] == "suspended", counted.text
        chat.wait_for(2)  # the pause, then alice's approval
        pager.wait_for(2)
        listed = api.get("/inbox").json()["runs"][0]
        assert listed["toolCalls"][0]["approvals"] == ["alice"] and listed["toolCalls"][0]["quorum"] == 2

    tab = Inbox(browser, server.url)
    # The person at the page says who they are (an anonymous caller decides no governed call): the key
    # is in the tab's storage, as after "Use key".
    tab.page.add_init_script("sessionStorage.setItem('troupe.inbox.apiKey', 'key-bob')")
    tab.open()
    try:
        card = tab.card(run_id)
        expect(card.get_by_test_id("approvals")).to_have_text("1 of 2 (alice), 1 more needed")
        expect(card.get_by_test_id("delivery")).to_have_count(4)  # the pause and alice's approval, twice
        delivered = card.locator('[data-testid="delivery"][data-status="delivered"]')
        expect(delivered).to_have_text(["chat: paused delivered", "chat: approval-recorded delivered"])
        failing = card.locator('[data-testid="delivery"][data-status="pending"]')
        expect(failing).to_have_text(
            [
                re.compile(r"^pager: paused pending \(\d+ attempts?\)$"),
                re.compile(r"^pager: approval-recorded"),
            ]
        )
        tab.screenshot("inbox-quorum-deliveries.png")

        card.get_by_test_id("approve").click()  # the page's principal (bob's key) is the second approver
        expect(card).to_have_attribute("data-state", "decided")  # claimed: the tool runs after this
        result = card.get_by_test_id("outcome").get_by_test_id("result")
        expect(result).to_have_text('{\n  "deleted": "rec-7"\n}')  # the tool's result, streamed back
        assert calls.count() == 1
    finally:
        tab.close()


def test_an_earlier_approvers_edit_shows_its_hidden_characters_to_the_next_approver(
    http_server, tmp_path: Path, calls: CallLog, browser: Browser
):
    """Under a quorum the next approver reads what the first approved, edits included: a right-to-left
    override in an edit is shown as a mark, not applied to what they read."""

    def build() -> Runtime:
        tool = delete_tool(calls, allow_edited_args=True)
        agent = Agent(
            "ops", model=echo_model(tool_call("delete_record", {"id": "rec-7"}, id="call-1")), tools=[tool]
        )
        return Runtime(
            [agent],
            storage=SqliteStore(tmp_path / "inbox.db"),
            executor="local",
            approver_policies=[ApproverPolicy(tool="delete_record", quorum=2)],
        )

    server = http_server(build, keys=KEYS, open_mode=True)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run_id = api.post("/agents/ops/generate", json={"messages": "go"}).json()["runId"]
        edit = {"runId": run_id, "toolCallId": "call-1", "editedArgs": {"id": "rec-\u202e7-gol"}}
        counted = api.post(
            "/agents/ops/approve-tool-call-generate", json=edit, headers={"Authorization": "Bearer key-alice"}
        )
        assert counted.status_code == 200 and counted.json()["finishReason"] == "suspended", counted.text

    tab = Inbox(browser, server.url)
    tab.page.add_init_script("sessionStorage.setItem('troupe.inbox.apiKey', 'key-bob')")
    tab.open()
    try:
        approvals = tab.card(run_id).get_by_test_id("approvals")
        expect(approvals).to_contain_text('alice (edited: {"id":"rec-\u27e6U+202E\u27e77-gol"})')
        assert "\u202e" not in (approvals.text_content() or "")
    finally:
        tab.close()
