"""A person approves a Troupe tool call in an AG-UI front end: a small chat page built on the official
``@ag-ui/client`` (tests/agui_js/page, bundled from the pinned npm packages with the pinned esbuild), in
Debian's Chromium driven by Playwright, against Troupe's router mounted in a host FastAPI app
(``troupe_router``). The page shows the interrupt as a card; clicking Approve resumes the run, the tool
runs once and the answer appears. Screenshots go to the test's own directory (their paths are printed).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agui_agents import KEYS, agui_runtime
from fastapi import FastAPI
from fastapi.responses import FileResponse
from helpers import sqlite_audit
from playwright.sync_api import Browser, expect
from test_agui import AGUI_JS, NODE, need_node_packages
from test_inbox_browser import browser  # noqa: F401 - the shared Chromium fixture
from troupe.api.app import troupe_router

from troupe import Runtime


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's script with @ag-ui/client in it, one ES module (no CDN, nothing fetched)."""
    need_node_packages()
    out = tmp_path_factory.mktemp("agui-page") / "app.js"
    subprocess.run([str(NODE), "bundle.mjs", str(out)], cwd=AGUI_JS, check=True, timeout=120)
    return out


def host_app(bundle: Path) -> Any:
    """A host application: the chat page at ``/``, Troupe's routes under ``/troupe``."""

    def make(runtime: Runtime) -> FastAPI:
        app = FastAPI()
        app.include_router(troupe_router(runtime, keys=KEYS), prefix="/troupe")
        app.get("/")(lambda: FileResponse(AGUI_JS / "page" / "index.html"))
        app.get("/app.js")(lambda: FileResponse(bundle, media_type="text/javascript"))
        return app

    return make


@pytest.fixture
def chat(browser: Browser, http_server, tmp_path, calls, bundle) -> Iterator[Any]:  # noqa: F811
    server = http_server(agui_runtime(tmp_path / "agui.db", calls), make_app=host_app(bundle))
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    query = "agent=ops&key=key-a&resource=a1&thread=chat-1&base=/troupe"
    page.goto(f"{server.url}/?{query}")
    yield page
    context.close()
    assert not problems, problems


def test_a_person_approves_the_interrupt_on_an_ag_ui_page(chat, tmp_path, calls):
    chat.get_by_role("button", name="Send").click()
    card = chat.get_by_test_id("interrupt")
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-interrupt-id", re.compile(r"^call-1@[0-9a-f-]{36}$"))  # call@run
    expect(card.get_by_test_id("interrupt-message")).to_have_text(
        'ops wants to call delete_record with {"id": "abc-123"}. Approve?'
    )
    expect(chat.get_by_test_id("status")).to_have_text("waiting for you")
    asked = tmp_path / "agui-interrupt.png"
    chat.screenshot(path=str(asked), full_page=True)
    assert calls.count("delete_record") == 0, "nothing ran before the person approved"

    card.get_by_role("button", name="Approve").click()
    expect(chat.get_by_test_id("status")).to_have_text("done")
    expect(chat.get_by_test_id("assistant")).to_have_text('assistant: call-1={"deleted": "abc-123"}')
    expect(card).to_have_count(0)
    done = tmp_path / "agui-approved.png"
    chat.screenshot(path=str(done), full_page=True)
    print(f"screenshots: {asked} {done}")
    assert asked.stat().st_size > 10_000 and done.stat().st_size > 10_000, "pictures of the page, not blanks"
    assert calls.count("delete_record") == 1

    [entry] = sqlite_audit(tmp_path / "agui.db", calls.entries("delete_record")[0]["run_id"])
    assert (entry.kind, entry.surface, entry.decided_by) == ("approved", "ag-ui", "tenant-a")
