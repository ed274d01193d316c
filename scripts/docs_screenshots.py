"""Take the screenshots the documentation shows (docs/images/*.png), the way the browser tests drive the
pages: Debian's Chromium through Playwright, against a real server on a free loopback port.

- ``inbox.png``: the approval inbox (``GET /inbox``, open mode): a call just approved, with how its run
  ended, and three paused runs: an approval, a ``suspend()`` question with its form, and a subagent's
  call (the agents of tests/inbox_agents.py). ``inbox-before.png`` is the same page before issue 45's
  wording (taken by this script at that commit).
- ``agui.png``: the AG-UI chat page of tests/test_agui_browser.py (``@ag-ui/client``, bundled from the
  pinned npm packages) showing a tool call's interrupt with Approve and Decline.

    .venv/bin/python scripts/docs_screenshots.py [OUT_DIR] [inbox|agui]   # default: docs/images, both

Needs what the browser tests need: ``bash scripts/setup.sh --system`` (Chromium and the Node packages).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402
from agui_agents import agui_runtime  # noqa: E402
from http_server import LiveServer  # noqa: E402
from inbox_agents import inbox_runtime  # noqa: E402
from playwright.sync_api import Browser, expect, sync_playwright  # noqa: E402
from test_agui import AGUI_JS, NODE, need_node_packages  # noqa: E402
from test_agui_browser import host_app  # noqa: E402
from test_inbox_browser import CHROMIUM_ARGS, chromium_path, start  # noqa: E402

from troupe.testing import CallLog  # noqa: E402

WAIT_MS = 15_000


def inbox(browser: Browser, work: Path, out: Path) -> Path:
    """The inbox with a call just approved, and an approval, a question and a subagent's call waiting."""
    server = LiveServer(inbox_runtime(work, CallLog(work / "inbox-calls.jsonl")), open_mode=True).start()
    try:
        with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
            done = start(api, "ops", "xyz-999")
            start(api, "ops", "abc-123", approvalTimeout=3600)
            start(api, "planner", "dinner")
            start(api, "sup", "def-456")
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        try:
            page.goto(server.url + "/inbox")
            expect(page.get_by_test_id("pause")).to_have_count(4, timeout=WAIT_MS)
            decided = page.locator(f'[data-testid="pause"][data-run-id="{done}"]')
            decided.get_by_test_id("approve").click()
            outcome = decided.get_by_test_id("outcome")
            expect(outcome).to_have_attribute("data-finish", "stop", timeout=WAIT_MS)
            return _shot(page, out / "inbox.png")
        finally:
            page.close()  # its event stream ends before the server does
    finally:
        server.stop()


def agui(browser: Browser, work: Path, out: Path) -> Path:
    """The AG-UI chat page with the interrupt of a tool call that needs approval."""
    need_node_packages()
    bundle = work / "app.js"
    subprocess.run([str(NODE), "bundle.mjs", str(bundle)], cwd=AGUI_JS, check=True, timeout=120)
    runtime = agui_runtime(work / "agui.db", CallLog(work / "agui-calls.jsonl"))
    server = LiveServer(runtime, make_app=host_app(bundle)).start()
    try:
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        try:
            page.goto(f"{server.url}/?agent=ops&key=key-a&resource=a1&thread=chat-1&base=/troupe")
            page.get_by_role("button", name="Send").click()
            expect(page.get_by_test_id("interrupt")).to_have_count(1, timeout=WAIT_MS)
            return _shot(page, out / "agui.png")
        finally:
            page.close()
    finally:
        server.stop()


def _shot(page: object, path: Path) -> Path:
    page.evaluate("window.scrollTo(0, 0)")  # type: ignore[attr-defined]
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    if path.stat().st_size < 10_000:
        raise SystemExit(f"{path} is {path.stat().st_size} bytes: a blank page, not a screenshot")
    return path


def main(out: Path, only: str | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS
        )
        try:
            for take in (inbox, agui):
                if only is not None and take.__name__ != only:
                    continue
                work = Path(folder) / take.__name__
                work.mkdir()
                print(take(browser, work, out))
        finally:
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images", *sys.argv[2:3])
