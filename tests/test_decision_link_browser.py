"""A decision link's confirmation page in a real browser (Debian's Chromium through Playwright), under a
host app's session cookie: the page's own form decides, and a page of another site (here another port of
the same host, which the cookie does not tell apart) posting the same form decides nothing. What the
browser sends (``Sec-Fetch-Site``, ``Origin``) is the browser's, not a test's guess."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from static_site import answering
from test_identity_host_app import _token, server  # noqa: F401 - the host app's server fixture
from test_inbox_browser import browser  # noqa: F401 - the Chromium fixture
from webhook_receiver import free_port

from troupe.testing import CallLog

with contextlib.suppress(ImportError):  # the browser fixture reports it missing
    from playwright.sync_api import Browser, BrowserContext, Route


@pytest.fixture
def bob(browser: Browser, server) -> Iterator[BrowserContext]:  # noqa: F811 - the fixtures above
    context = browser.new_context()
    context.add_cookies([{"name": "session", "value": "s-bob", "url": server.url}])
    yield context
    context.close()


def paused_link(live, tmp_path) -> tuple[str, str]:
    with httpx.Client(base_url=live.url, cookies={"session": "s-alice"}, timeout=30) as alice:
        started = alice.post("/troupe/api/agents/ops/generate", json={"messages": "go", "resourceId": "acme"})
    run_id = started.json()["runId"]
    # Issued on a thread of its own: Playwright's sync API keeps an event loop running on this one.
    with ThreadPoolExecutor(1) as thread:
        token = thread.submit(_token, tmp_path / "host.db", run_id).result()
    return run_id, f"{live.url}/troupe/decide/{token}"


def test_the_links_own_page_decides_as_the_signed_in_user(server, bob, tmp_path, calls: CallLog):  # noqa: F811
    _, link = paused_link(server, tmp_path)
    page = bob.new_page()
    assert page.goto(link).status == 200
    with page.expect_navigation():
        page.get_by_role("button", name="Approve").click()
    assert page.locator("h1").inner_text() == "Approved"
    assert "Approved by Bob" in page.content()
    deadline = time.monotonic() + 20
    while calls.count() < 1:
        assert time.monotonic() < deadline, "the approved tool never ran"
        page.wait_for_timeout(20)


def test_a_form_on_another_site_posting_the_link_decides_nothing(
    server, bob, tmp_path, calls: CallLog  # noqa: F811
):
    run_id, link = paused_link(server, tmp_path)
    elsewhere = f"http://127.0.0.1:{free_port()}/"  # same host, so the session cookie goes along
    attack = (
        f'<!doctype html><form method="post" action="{link}"><input name="reason" value="x"></form>'
        "<script>document.forms[0].submit()</script>"
    )

    def attacker(route: Route) -> None:
        route.fulfill(status=200, content_type="text/html", body=attack)

    page = bob.new_page()
    page.route(elsewhere, attacker)
    with page.expect_response(lambda r: "/decide/" in r.url and r.request.method == "POST") as posted:
        page.goto(elsewhere)
    response = posted.value
    assert response.status == 403 and "another site" in response.text()
    assert response.request.headers.get("cookie") == "session=s-bob", "the attack carried bob's session"
    with httpx.Client(base_url=server.url, cookies={"session": "s-bob"}, timeout=30) as api:
        listed = api.get("/troupe/api/agents/ops/suspended-runs").json()
    assert [r["runId"] for r in listed["runs"]] == [run_id], "the call still waits"
    assert calls.count() == 0


def test_a_page_on_another_site_cannot_approve_through_the_json_routes(
    server, bob, tmp_path, calls: CallLog  # noqa: F811
):
    # What a page can send without asking the server first: a no-cors fetch of a Blob (no content type),
    # with the visitor's cookies. The host app here parses such a body as JSON, as FastAPI before 0.132 did.
    run_id, _ = paused_link(server, tmp_path)
    target = f"{server.url}/troupe/api/agents/ops/approve-tool-call-generate"
    body = f'{{"runId": "{run_id}", "toolCallId": "call-1"}}'
    attack = (
        "<!doctype html><script>"
        f"fetch({target!r}, {{method: 'POST', mode: 'no-cors', credentials: 'include', "
        f"body: new Blob([{body!r}])}})"
        "</script>"
    )
    page = bob.new_page()
    page_elsewhere = answering("text/html", attack.encode())
    with page_elsewhere as elsewhere, page.expect_response(lambda r: r.url == target) as posted:
        page.goto(elsewhere)
    response = posted.value
    assert "content-type" not in response.request.all_headers(), "a simple request: no preflight"
    # Not the host app's 401 ("sign in first"): bob's session went along and was taken, and Troupe's
    # check refused what it asked (bob holds the role the policy asks, and did not start the run).
    assert response.status == 403
    with httpx.Client(base_url=server.url, cookies={"session": "s-bob"}, timeout=30) as api:
        listed = api.get("/troupe/api/agents/ops/suspended-runs").json()
    assert [r["runId"] for r in listed["runs"]] == [run_id], "the call still waits"
    assert calls.count() == 0
