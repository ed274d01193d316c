"""examples/chat_approvals.py against a local chat receiver: the pause arrives as a chat message with
Approve / Decline links, signed; following the Approve link (the confirmation page, then its form)
runs the tool once and the decision is posted too. Real uvicorn, real receiver, real SQLite."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from standardwebhooks.webhooks import Webhook
from test_notifications import FAST, SECRET
from webhook_receiver import Receiver

from examples.chat_approvals import build_runtime

LINK_SECRET = "whsec_" + base64.b64encode(b"the example's link signing key!!").decode()
PUBLIC = "https://troupe.test"
ADMIN = {"Authorization": "Bearer key-admin"}


async def test_the_chat_message_carries_working_decision_links(http_server, tmp_path: Path):
    chat = Receiver().start()
    try:
        server = http_server(
            lambda: build_runtime(
                chat.url, PUBLIC, SECRET, LINK_SECRET, str(tmp_path / "chat.db"), "local", retry=FAST
            ),
            keys={"key-admin": {"name": "ops", "admin": True}},
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            body = {"messages": "please delete rec-42"}
            started = await client.post("/api/agents/records/generate", json=body, headers=ADMIN)
            assert started.json()["finishReason"] == "suspended", started.text

            (posted,) = await chat.arrived(1)
            message = Webhook(SECRET).verify(posted.body, posted.headers)
            assert set(message) == {"text", "blocks"}
            assert "`delete_record`" in message["text"] and '{"id": "rec-42"}' in message["text"]
            buttons = {b["text"]["text"]: b["url"] for b in message["blocks"][1]["elements"]}
            assert set(buttons) == {"Approve", "Decline"}
            assert f"<{buttons['Approve']}|Approve>" in message["text"]

            approve = urlsplit(buttons["Approve"]).path
            page = await client.get(approve)
            assert page.status_code == 200 and "rec-42" in page.text
            done = await client.post(approve)
            assert done.status_code == 200, done.text

            decided = await chat.arrived(2)
            text = Webhook(SECRET).verify(decided[1].body, decided[1].headers)["text"]
            assert "was decided" in text and "Decision: approved by `decision-link`" in text

            async with asyncio.timeout(20):
                while True:
                    listed = await client.get("/api/agents/records/suspended-runs", headers=ADMIN)
                    if listed.json()["total"] == 0:
                        break
                    await asyncio.sleep(0.02)
    finally:
        chat.stop()
