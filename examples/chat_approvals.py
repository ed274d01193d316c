"""Approve from chat: every pause posts a message to a chat's incoming webhook, with Approve and
Decline links that open a confirmation page on this server.

    export TROUPE_CHAT_WEBHOOK=https://hooks.example-chat.com/services/...   # the incoming webhook
    export TROUPE_PUBLIC_URL=https://troupe.example.com    # where people reach this server
    export TROUPE_WEBHOOK_SECRET=whsec_...  TROUPE_LINK_SECRET=whsec_...   # 16+ random bytes each, base64
    troupe serve --app examples.chat_approvals:runtime --keys keys.json

The message is ``{"text", "blocks"}`` (what Slack, Mattermost, Rocket.Chat and Google Chat accept),
signed with Standard Webhooks headers that the chat ignores and a relay can check. Opening a link only
shows the call; confirming decides it once. The model here is scripted (no API key needed): it asks to
delete the record named in the message, then reports what happened.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel

from troupe import Agent, LinkSigner, Notifications, NotificationTarget, Runtime, SqliteStore, create_tool
from troupe.testing import FunctionModel, text, tool_call


class RecordId(BaseModel):
    id: str


def _delete(record: RecordId, ctx: Any) -> dict[str, str]:
    return {"deleted": record.id}


def _turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    results = [m for m in messages if m["role"] == "tool"]
    if results:
        return text(f"Done: {results[-1]['content']}")
    asked = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    found = re.search(r"rec-[\w-]+", str(asked))
    return tool_call("delete_record", {"id": found.group(0) if found else "rec-1"}, id="delete-1")


def build_runtime(
    chat_webhook: str,
    public_url: str,
    webhook_secret: str,
    link_secret: str,
    store: str,
    executor: Any = "ray",
    **options: Any,
) -> Runtime:
    delete = create_tool("delete_record", "Delete a record", RecordId, _delete, require_approval=True)
    agent = Agent("records", model=FunctionModel(_turn), tools=[delete])
    chat = NotificationTarget(chat_webhook, webhook_secret, name="chat", format="chat")
    notifications = Notifications((chat,), links=LinkSigner(public_url, link_secret), **options)
    return Runtime([agent], storage=SqliteStore(store), executor=executor, notifications=notifications)


def runtime() -> Runtime:
    """For ``troupe serve --app examples.chat_approvals:runtime``: everything from the environment."""
    return build_runtime(
        os.environ["TROUPE_CHAT_WEBHOOK"],
        os.environ["TROUPE_PUBLIC_URL"],
        os.environ["TROUPE_WEBHOOK_SECRET"],
        os.environ["TROUPE_LINK_SECRET"],
        os.environ.get("TROUPE_STORE", "troupe-chat.db"),
    )
