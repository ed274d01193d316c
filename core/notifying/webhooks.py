"""Posting outbox entries as signed webhooks, and the loop that keeps every due entry moving.

Signing follows the Standard Webhooks specification through its reference library (``standardwebhooks``):
headers ``webhook-id`` (the event id, the receiver's idempotency key), ``webhook-timestamp`` (epoch
seconds) and ``webhook-signature`` = ``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``.

``Dispatcher`` runs beside a host's runs, never in their way: a run only writes its entries to the store
(and pokes the dispatcher); sending happens in the dispatcher's own task, each attempt bounded by a
timeout, so a slow or failing receiver never delays, fails or resumes a run. Any live host may send any
entry: it claims due entries with a lease, so two hosts do not send one at once, and an entry whose host
died mid-attempt is taken again once the lease runs out (at least once, never lost).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook
from troupe.core.cancellation import stop_if_cancelled, wait_or_timeout
from troupe.core.notifying.outbox import Notifications, NotificationTarget, check_secret
from troupe.core.vocabulary.store import OutboxEntry, Store

log = logging.getLogger(__name__)

_BATCH = 32
_ERROR_CHARS = 300
_PRUNE_BATCH = 500
# How often a host deletes what was delivered long enough ago: every ten minutes, or twice per
# keep_delivered_s if that is shorter; so an entry of a finished run goes at most ten minutes (or half a
# keep_delivered_s) after it is due to.
_PRUNE_EVERY_S = 600.0


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


class Dispatcher:
    """Delivers due outbox entries for one host. ``clock`` is injectable so schedules can be tested."""

    def __init__(
        self,
        store: Store,
        notifications: Notifications,
        owner: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.notifications = notifications
        self.owner = owner
        self.clock = clock
        self._poked = asyncio.Event()
        self._client: httpx.AsyncClient | None = None
        keep = notifications.keep_delivered_s
        self._prune_every = None if keep is None else min(_PRUNE_EVERY_S, keep / 2)
        self._prune_at = clock()
        for target in notifications.targets:
            check_secret(target.secret, f"notification target {target.name!r}")

    def poke(self) -> None:
        """New entries were written here: look now rather than at the next poll."""
        self._poked.set()

    async def run(self) -> None:
        while True:
            try:
                await self.pump()
                await self._prune_when_due()
            except Exception:
                # A storage outage: the entries stay in the store; try again at the next poll.
                log.warning("delivering notifications from %s failed", self.owner, exc_info=True)
            stop_if_cancelled()
            self._poked.clear()
            await wait_or_timeout(self._poked, self.notifications.retry.poll_s)

    async def pump(self) -> int:
        """Claim what is due and attempt it; returns how many attempts were made."""
        retry = self.notifications.retry
        attempted = 0
        while True:
            claimed = await self.store.claim_deliveries(self.owner, self.clock(), retry.lease_s, _BATCH)
            if not claimed:
                return attempted
            await asyncio.gather(*(self._attempt(entry) for entry in claimed))
            attempted += len(claimed)

    async def _prune_when_due(self) -> None:
        now = self.clock()
        if self._prune_every is None or now < self._prune_at:
            return
        self._prune_at = now + self._prune_every
        await self.prune()

    async def prune(self) -> int:
        """Delete the entries of finished runs delivered ``keep_delivered_s`` or more ago (any host may: a
        store deletes each once); returns how many went."""
        keep = self.notifications.keep_delivered_s
        if keep is None:
            return 0
        now, pruned = self.clock(), 0
        while (batch := await self.store.prune_deliveries(now, keep, _PRUNE_BATCH)) == _PRUNE_BATCH:
            pruned += batch
        return pruned + batch

    async def _attempt(self, entry: OutboxEntry) -> None:
        target = self.notifications.target(entry.target)
        now = self.clock()
        error: str | None
        if target is None:
            error = f"no notification target named {entry.target!r} is configured on this host"
        else:
            error = await self._post(target, entry, now)
        attempts = entry.attempts + 1
        update: dict[str, Any]
        if error is None:
            update = {"status": "delivered", "delivered_at": self.clock(), "last_error": None}
        else:
            delays = self.notifications.retry.delays
            failed = attempts > len(delays)
            update = {
                "status": "failed" if failed else "pending",
                "next_at": now if failed else now + delays[attempts - 1],
                "last_error": error,
            }
        settled = entry.model_copy(update={"attempts": attempts, **update})
        if not await self.store.settle_delivery(settled):
            log.info("delivery %s was taken over or redelivered while being sent", entry.id)

    async def _post(self, target: NotificationTarget, entry: OutboxEntry, now: float) -> str | None:
        """Send one attempt; None on a 2xx answer, else what went wrong (never the URL: it may hold a
        credential)."""
        body, headers = signed_request(target, entry, now)
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False, trust_env=False)
        try:
            response = await self._client.post(
                target.url, content=body, headers=headers, timeout=self.notifications.retry.timeout_s
            )
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {str(exc).replace(target.url, target.name)}"[:_ERROR_CHARS]
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


__all__ = ["Dispatcher", "signed_request"]
