"""A notification event as a chat message: the JSON that chat tools' incoming webhooks accept.

``{"text": ...}`` is what Slack, Mattermost, Rocket.Chat, Google Chat and Discord (as ``content``)
take; ``blocks`` adds Slack's richer layout, with the decision links as buttons, where it is understood
(others ignore it). The text alone carries everything a person needs: what waits, and the links.
Values from the model (tool name, arguments) are put in code spans with backticks removed, so they
cannot break out of the formatting or forge a link.
"""

from __future__ import annotations

import json
from typing import Any

_ARGS_CHARS = 500

_HEADLINES = {
    "tool-call.paused": "needs a decision",
    "tool-call.decided": "was decided",
    "tool-call.expired": "expired without a decision",
    "tool-call.interrupted": "was interrupted by a crash",
    "tool-call.approval-recorded": "got an approval",
}


def chat_message(event: dict[str, Any]) -> dict[str, Any]:
    data = event.get("data", {})
    lines = [_headline(event)]
    args = json.dumps(data.get("args"), ensure_ascii=False, sort_keys=True)
    lines.append(f"Arguments: {_code(args[:_ARGS_CHARS])}")
    lines.append(f"Run {_code(data.get('runId', '?'))}, resource {_code(data.get('resourceId') or '-')}")
    if data.get("decision"):
        lines.append(f"Decision: {data['decision']} by {_plain(data.get('decidedBy') or '?')}")
    if data.get("quorum"):
        lines.append(f"Approvals: {len(data.get('approvals') or [])} of {data['quorum']}")
    links = data.get("links") or {}
    actions = [(label, links[key]) for key, label in _ACTIONS if links.get(key)]
    if actions:
        shown = " | ".join(f"<{url}|{label}>" for label, url in actions)
        lines.append(f"{shown} (until {links['expiresAt']})")
    text = "\n".join(lines)
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if actions:
        buttons = [_button(label, url) for label, url in actions]
        blocks.append({"type": "actions", "elements": buttons})
    return {"text": text, "blocks": blocks}


_ACTIONS = (("approve", "Approve"), ("decline", "Decline"))


def _headline(event: dict[str, Any]) -> str:
    data = event.get("data", {})
    path = " / ".join(str(a) for a in data.get("agentPath") or [data.get("agentId", "?")])
    kind = str(event.get("type", ""))
    return f"*{_code(data.get('toolName', '?'))}* ({_plain(path)}) {_HEADLINES.get(kind, _plain(kind))}"


def _button(label: str, url: str) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": label}, "url": url}


def _code(value: Any) -> str:
    return "`" + str(value).replace("`", "'").replace("\n", " ") + "`"


def _plain(value: str) -> str:
    """Text with the characters that make links or formatting in chat markup taken out."""
    return "".join(c for c in value if c not in "<>|*_~`")


__all__ = ["chat_message"]
