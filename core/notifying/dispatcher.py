"""The loops that keep every due outbox entry moving, for one host: one lane per target.

``Dispatcher`` runs beside a host's runs, never in their way: a run only writes its entries to the store
(and pokes the dispatcher); sending happens in the dispatcher's own tasks, each attempt bounded as a whole
by the schedule's timeout, so a slow or failing receiver never delays, fails or resumes a run. Each
target has a lane of its own, which claims only that target's entries (``Store.claim_deliveries(...,
target=)``) and waits only for its own attempts: a slow or dead target holds up its own deliveries, never
another target's. Any live host may send any entry: it claims due entries with a lease (longer than an
attempt may take), so two hosts do not send one at once, and an entry whose host died mid-attempt is
taken again once the lease runs out (at least once, never lost). An entry for a target this host does
not have waits for a host that has it. The request itself is signed here and posted by the host's
``WebhookSender`` (``troupe.core.notifying.webhooks``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from troupe.core.cancellation import stop_if_cancelled, wait_or_timeout
from troupe.core.notifying.chat_message import chat_message
from troupe.core.notifying.outbox import Notifications, NotificationTarget, check_secret
from troupe.core.notifying.webhooks import WebhookSender, attempt_error, signed_request
from troupe.core.vocabulary.store import OutboxEntry, Store

log = logging.getLogger(__name__)

_BATCH = 32
_PRUNE_BATCH = 500
# How often a host deletes what was delivered long enough ago: every ten minutes, or twice per
# keep_delivered_s if that is shorter; so an entry of a finished run goes at most ten minutes (or half a
# keep_delivered_s) after it is due to.
_PRUNE_EVERY_S = 600.0


class Dispatcher:
    """Delivers due outbox entries for one host. ``clock`` is injectable so schedules can be tested."""

    def __init__(
        self,
        store: Store,
        notifications: Notifications,
        owner: str,
        sender: WebhookSender,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.notifications = notifications
        self.owner = owner
        self.sender = sender
        self.clock = clock
        self._poked = {target.name: asyncio.Event() for target in notifications.targets}
        keep = notifications.keep_delivered_s
        self._prune_every = None if keep is None else min(_PRUNE_EVERY_S, keep / 2)
        self._prune_at = clock()
        for target in notifications.targets:
            check_secret(target.secret, f"notification target {target.name!r}")

    def poke(self) -> None:
        """New entries were written here: every lane looks now rather than at the next poll."""
        for poked in self._poked.values():
            poked.set()

    async def run(self) -> None:
        """Run every target's lane, and prune what was delivered long enough ago, until cancelled."""
        lanes = [asyncio.create_task(self._lane(target.name)) for target in self.notifications.targets]
        try:
            while True:
                try:
                    await self._prune_when_due()
                except Exception:
                    log.warning("pruning notifications from %s failed", self.owner, exc_info=True)
                stop_if_cancelled()
                await asyncio.sleep(self.notifications.retry.poll_s)
        finally:
            for lane in lanes:
                lane.cancel()
            await asyncio.gather(*lanes, return_exceptions=True)

    async def _lane(self, target: str) -> None:
        poked = self._poked[target]
        while True:
            try:
                await self.pump(target)
            except Exception:
                # A storage outage: the entries stay in the store; try again at the next poll.
                log.warning("delivering to %s from %s failed", target, self.owner, exc_info=True)
            stop_if_cancelled()
            poked.clear()
            await wait_or_timeout(poked, self.notifications.retry.poll_s)

    async def pump(self, target: str | None = None) -> int:
        """Claim what is due (for ``target`` alone when given, as its lane does) and attempt it; returns
        how many attempts were made."""
        retry = self.notifications.retry
        attempted = 0
        while True:
            now = self.clock()
            claimed = await self.store.claim_deliveries(self.owner, now, retry.lease_s, _BATCH, target=target)
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
        try:
            sent = entry.model_copy(update={"body": await self._outgoing(target, entry, now)})
            body, headers = signed_request(target, sent, now)
        except Exception as exc:
            # A request that cannot be made is a failed attempt like any other: it backs off, and in the
            # end fails where an operator sees why, instead of being claimed again and again, unannounced.
            log.warning("making delivery %s for %s failed", entry.id, target.name, exc_info=True)
            return attempt_error(target, "the request could not be made: ", exc)
        return await self.sender.send(target, body, headers, self.notifications.retry.timeout_s)

    async def _outgoing(self, target: NotificationTarget, entry: OutboxEntry, now: float) -> dict[str, Any]:
        """What goes to ``target``: the event with its decision links (their records issued now, the same
        ones on every attempt at this entry until they expire, and issued to this target's channel), as a
        chat message for a chat target. An entry written by an older Troupe, already shaped, goes as it
        is."""
        body = entry.body
        if not ("type" in body and "data" in body):
            return body
        links = self.notifications.links
        if links is not None and body["type"] == "tool-call.paused":
            data = body["data"]
            # Fresh links once the kept ones would expire during this attempt: a receiver down for
            # longer than their ttl_s must still get links that work while the call waits.
            fresh_for = self.notifications.retry.timeout_s
            issued = await links.issue(
                self.store, data, channel=target.name, source=entry.id, now=now, fresh_for_s=fresh_for
            )
            body = {**body, "data": {**body["data"], "links": issued}}
        return chat_message(body) if target.format == "chat" else body

    async def close(self) -> None:
        await self.sender.close()


__all__ = ["Dispatcher"]
