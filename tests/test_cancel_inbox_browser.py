"""The inbox's Cancel run button in a real browser (issue 41): headless Chromium (Debian's, driven by
Playwright) against a real server. The button asks first; confirmed, it cancels the run bound to the
call the card shows, and every card of the run says it was cancelled, by whom and why. A run cancelled
elsewhere turns its card to "cancelled" too."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect
from test_inbox_browser import api, audit, browser, pending, server, start, tabs  # noqa: F401 - fixtures


def test_cancel_run_asks_first_then_cancels_the_run(server, api, tabs, calls, tmp_path):  # noqa: F811
    run = start(api, "ops", "rec-7")
    nested = start(api, "sup", "rec-8")
    inbox = tabs(server.url)
    card = inbox.card(run)
    expect(card.get_by_test_id("cancel-confirm")).to_be_hidden()

    card.get_by_test_id("cancel-run").click()
    expect(card.get_by_test_id("cancel-confirm")).to_be_visible()
    card.get_by_test_id("keep-run").click()  # second thoughts: nothing is sent
    expect(card.get_by_test_id("cancel-confirm")).to_be_hidden()
    assert not [r for r in inbox.requests if r.endswith("/cancel-run")]
    assert pending(api) == {run, nested}

    card.get_by_test_id("cancel-run").click()
    card.get_by_test_id("cancel-reason").fill("wrong record")
    card.get_by_test_id("confirm-cancel").click()

    expect(card).to_have_attribute("data-state", "cancelled")
    expect(card.get_by_test_id("badge")).to_have_text("cancelled")
    expect(card.get_by_test_id("verdict")).to_have_text("Run cancelled by anonymous: wrong record")
    expect(card.get_by_test_id("approve")).to_be_hidden()
    decisions, snapshot = audit(tmp_path, run)
    assert [(d.kind, d.tool_call_id, d.reason, d.surface) for d in decisions] == [
        ("cancelled", "", "wrong record", "inbox"),
        ("cancelled", "call-1", "wrong record", "inbox"),
    ]
    assert pending(api) == {nested}
    expect(inbox.card(nested)).to_have_attribute("data-state", "pending")
    inbox.screenshot("inbox-cancelled.png")

    # Cancelled elsewhere (over HTTP): the card learns why its pause went, and says so.
    answer = api.post("/agents/sup/cancel-run", json={"runId": nested, "reason": "from the API"})
    assert answer.status_code == 200, answer.text
    expect(inbox.card(nested)).to_have_attribute("data-state", "cancelled")
    expect(inbox.card(nested).get_by_test_id("verdict")).to_have_text(
        "Run cancelled by anonymous: from the API"
    )
    assert calls.count("delete_record") == 0
    assert snapshot is None or snapshot.state.cancel is not None


def test_a_cancel_from_the_page_loses_to_an_approval_that_came_first(server, api, tabs, calls):  # noqa: F811
    run = start(api, "ops", "rec-9")
    inbox = tabs(server.url)
    inbox.page.goto(server.url + "/inbox?interval=60")  # the listing stays as it is while the call is decided
    inbox.allow(409)
    card = inbox.card(run)
    expect(card).to_have_attribute("data-state", "pending")
    approved = httpx.post(
        f"{server.url}/api/agents/ops/approve-tool-call-generate", json={"runId": run, "toolCallId": "call-1"}
    )
    assert approved.status_code == 200, approved.text

    card.get_by_test_id("cancel-run").click()
    card.get_by_test_id("confirm-cancel").click()

    expect(card.get_by_test_id("error")).to_contain_text("already approved by anonymous")
    assert calls.count("delete_record") == 1
