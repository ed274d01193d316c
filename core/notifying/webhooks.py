"""Webhooks as the Standard Webhooks specification signs them, and the interface that sends them.

Signing goes through the spec's reference library (``standardwebhooks``): headers ``webhook-id`` (the
event id, the receiver's idempotency key), ``webhook-timestamp`` (epoch seconds) and
``webhook-signature`` = ``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``.

How a signed request travels is not the core's business: a ``WebhookSender`` posts it (the hosts plug in
``troupe.actors.webhook_sender.HttpSender``), and ``troupe.core.notifying.dispatcher`` decides when.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Protocol

from standardwebhooks.webhooks import Webhook
from troupe.core.notifying.outbox import NotificationTarget
from troupe.core.vocabulary.store import OutboxEntry


def signed_request(target: NotificationTarget, entry: OutboxEntry, at: float) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one attempt at ``at`` (epoch seconds)."""
    body = json.dumps(entry.body, separators=(",", ":"), default=str)
    stamp = datetime.fromtimestamp(int(at), UTC)
    signature = Webhook(target.secret).sign(entry.event_id, stamp, body)
    headers = {
        "content-type": "application/json",
        "webhook-id": entry.event_id,
        "webhook-timestamp": str(int(at)),
        "webhook-signature": signature,
        "user-agent": "troupe-webhooks",
    }
    return body.encode(), headers


_ERROR_CHARS = 300


def attempt_error(target: NotificationTarget, what: str, exc: BaseException) -> str:
    """What a failed attempt's ``last_error`` says: the exception, bounded, with the target's URL (which
    may hold a credential) replaced by its name."""
    return f"{what}{type(exc).__name__}: {str(exc).replace(target.url, target.name)}"[:_ERROR_CHARS]


class WebhookSender(Protocol):
    """Posts one signed request to a target and says how it went."""

    async def send(
        self, target: NotificationTarget, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> str | None:
        """None when the target answered 2xx within ``timeout_s`` (the whole attempt: connecting,
        sending and the answer's status line), else what went wrong, never naming the target's URL (it
        may hold a credential)."""
        ...

    async def close(self) -> None: ...


__all__ = ["WebhookSender", "attempt_error", "signed_request"]
