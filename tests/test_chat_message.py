"""A chat message made from an event whose tool name, arguments, agents and decider a model or a caller
chose: nothing in any field of it pings, links, formats or hides text, and arguments that are cut say so.
(The message travelling to a real receiver with working links: test_chat_example.py.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from troupe.core.notifying.chat_message import chat_message
from troupe.core.vocabulary.hidden_chars import hidden

APPROVE = "https://troupe.test/decide/a.b"
DECLINE = "https://troupe.test/decide/c.d"
HOSTILE = (
    "<!channel> <!here> <@U123> <#C1> <https://evil.example/approve|Approve> &amp; "
    "\u202eexe.txt \u200b \r\n\t` *bold* _it_ ~s~ @channel"
)
# Slack's control sequences, and any entity-like text, are all that '<' or '&' may start.
_CONTROL = re.compile(r"<(?!" + re.escape(APPROVE) + r"\|Approve>|" + re.escape(DECLINE) + r"\|Decline>)")
_RAW_AMP = re.compile(r"&(?!(amp|lt|gt);)")


def hostile_event(kind: str = "tool-call.decided") -> dict[str, Any]:
    return {
        "type": kind,
        "data": {
            "toolName": HOSTILE,
            "agentId": HOSTILE,
            "agentPath": [HOSTILE, "sub " + HOSTILE],
            "runId": HOSTILE,
            "resourceId": HOSTILE,
            "args": {"id": HOSTILE, HOSTILE: [HOSTILE]},
            "decision": "approved",
            "decidedBy": HOSTILE,
            "quorum": 2,
            "approvals": [{"name": HOSTILE}],
            "links": {"approve": APPROVE, "decline": DECLINE, "expiresAt": "2030-01-01T00:00:00+00:00"},
        },
    }


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_no_control_sequence_entity_or_hidden_character_of_a_models_text_survives_anywhere():
    for kind in ("tool-call.paused", "tool-call.decided", "a <!channel> kind \u202e"):
        message = chat_message(hostile_event(kind))
        for text in strings(message):
            if text in (APPROVE, DECLINE):
                continue  # a button's url, ours
            assert not _CONTROL.search(text), f"a control sequence survived in {text!r}"
            assert ">" not in text.replace("|Approve>", "").replace("|Decline>", ""), text
            assert not _RAW_AMP.search(text), f"a raw & survived in {text!r}"
            assert not any(hidden(c) for c in text.replace("\n", "")), f"a hidden character in {text!r}"
            assert "\r" not in text
        text = message["text"]
        assert message["blocks"][0]["text"]["text"] == text
        # Shown, not dropped: the approver sees what the model wrote, marks naming the hidden ones.
        assert "&lt;!channel&gt;" in text and "&lt;https://evil.example/approve|Approve&gt;" in text
        assert "&amp;amp;" in text and "\u27e6U+202E\u27e7exe.txt" in text and "\u27e6U+200B\u27e7" in text
        assert "\u27e6U+000D\u27e7" in text or "\\r" in text
        # Each line Troupe writes is one line: a value's newline cannot start a line of its own.
        assert len(text.splitlines()) == 6
        assert text.count("<https://") == 2, "only Troupe's own two links are links"


def test_arguments_cut_for_length_say_how_much_and_where_to_see_them_all():
    args = {"a_memo": "routine monthly payroll " * 25, "to_account": "ATTACKER-IBAN-666", "amount": 990000}
    event = {"type": "tool-call.paused", "data": {"toolName": "transfer", "runId": "r1", "args": args}}
    (line,) = [x for x in chat_message(event)["text"].splitlines() if x.startswith("Arguments:")]
    cut = len(json.dumps(args, ensure_ascii=False, sort_keys=True)) - 500
    assert f"cut: {cut} more characters not shown" in line
    assert "decision page and the inbox show them all" in line

    short = {"type": "tool-call.paused", "data": {"toolName": "transfer", "args": {"amount": 5}}}
    assert "cut" not in chat_message(short)["text"]
