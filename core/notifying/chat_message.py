"""A notification event as a chat message: the JSON that chat tools' incoming webhooks accept.

``{"text": ...}`` is what Slack, Mattermost, Rocket.Chat, Google Chat and Discord (as ``content``)
take; ``blocks`` adds Slack's richer layout, with the decision links as buttons, where it is understood
(others ignore it). The text alone carries everything a person needs: what waits, and the links.

The text is Slack mrkdwn (the links are Slack's ``<url|label>``), so every value that is not Troupe's
own (tool name, arguments, ids, who decided: a model or a caller chose them) is made inert before it
goes in:
- ``&``, ``<`` and ``>`` become entities, as Slack requires in all text: a model's ``<!channel>``,
  ``<@U123>`` or ``<https://evil.example|Approve>`` is shown, never pinged or linked;
- each hidden character (control, zero-width, bidi override; ``troupe.core.vocabulary.hidden_chars``)
  is shown as a mark naming it (``⟦U+202E⟧``), as on the decision page, and so are ``\\r`` and ``\\n``;
- the value sits in a code span with its backticks replaced, so it cannot end the span and bring in
  formatting, or a Markdown tool's ``@channel``.
"""

from __future__ import annotations

import json
from typing import Any

from troupe.core.vocabulary.hidden_chars import visible

# The arguments shown in the message (the rest: a note says how much was cut and where all of it is).
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
    lines = [_headline(event), _arguments(data.get("args"))]
    lines.append(f"Run {_code(data.get('runId', '?'))}, resource {_code(data.get('resourceId') or '-')}")
    if data.get("decision"):
        lines.append(f"Decision: {_inert(data['decision'])} by {_code(data.get('decidedBy') or '?')}")
    if data.get("quorum"):
        lines.append(f"Approvals: {len(data.get('approvals') or [])} of {_code(data['quorum'])}")
    links = data.get("links") or {}
    actions = [(label, links[key]) for key, label in _ACTIONS if links.get(key)]
    if actions:
        shown = " | ".join(f"<{url}|{label}>" for label, url in actions)
        lines.append(f"{shown} (until {_inert(links['expiresAt'])})")
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
    return f"*{_code(data.get('toolName', '?'))}* ({_code(path)}) {_HEADLINES.get(kind) or _code(kind)}"


def _arguments(args: Any) -> str:
    """The arguments, cut at ``_ARGS_CHARS`` with a note when they are: a model may pad an early key
    (they are sorted) to push the one that matters out, and the approver must see that happened."""
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
    line = f"Arguments: {_code(shown[:_ARGS_CHARS])}"
    if len(shown) > _ARGS_CHARS:
        cut = len(shown) - _ARGS_CHARS
        line += f" _(cut: {cut} more characters not shown; the decision page and the inbox show them all)_"
    return line


def _button(label: str, url: str) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": label}, "url": url}


def _code(value: Any) -> str:
    """A value that is not ours, inert, in a code span."""
    return "`" + _inert(value).replace("`", "'") + "`"


def _inert(value: Any) -> str:
    """``value`` with Slack's control characters as entities (``&`` first, or it would escape the
    others' entities again) and each hidden character as a visible mark."""
    text = visible(str(value))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = ["chat_message"]
