"""Decision links: expiring URLs that approve or decline exactly one paused call, each naming a record
the server keeps.

A link is ``<public_url>/decide/<token>``, and its token names one ``LinkRecord`` in the runtime's store
(``troupe.core.vocabulary.store``) and nothing else::

    token = <record id> "." base64url(HMAC-SHA256(link key, "troupe-link.v2." + record id))

Everything a link may do is read from its record, written by the server when it issued the link: the
action, the agent, run, tool call and fingerprint of the pause, the expiry, and whom it was issued to
(``approver``: it decides only as that one person; none: whoever uses it says who they are, or is its
anonymous holder, who decides only calls no approver policy governs). So nothing in a token is believed
but the record it names: whoever can read a webhook, or even holds the link key, can do with a link no
more than its record allows, and can make no record. The signature keeps tokens nobody issued away from
the store, and the key is the links' own: ``Notifications`` refuses a link secret that is also a
webhook's secret.

Opening a link (GET) only shows a confirmation page; confirming it (POST) claims the record for the
person deciding (once per person: ``Store.use_link``) and decides the call through the ordinary decision
path, bound to the fingerprint (troupe.api.decision_links).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from troupe.core.notifying.outbox import check_secret
from troupe.core.vocabulary.errors import DecisionLinkError
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.seconds import check_seconds
from troupe.core.vocabulary.store import LinkRecord, Store

Action = Literal["approve", "decline"]
ACTIONS: tuple[Action, ...] = ("approve", "decline")
_CONTEXT = b"troupe-link.v2."
_ID_CONTEXT = b"troupe-link-id.v2."
_ID_BYTES = 18  # 144 bits, 24 characters
_NOT_VALID = "this decision link is not valid (damaged, or not made by this server)"


@dataclass(frozen=True)
class LinkSigner:
    """Issues and opens decision links: one-click approve and decline pages for a paused call.

    Give it to ``Notifications(links=...)`` and pause events carry the links (``troupe serve
    --links``). A link decides one call once, as the approver it was issued to.

    Args:
        public_url: Where approvers reach the server; links are ``<public_url>/decide/<token>``.
        secret: ``whsec_<base64>`` (16 bytes or more), a key of the links' own (never a webhook's).
        ttl_s: How long a link lives, in seconds (default a day), or until its pause expires if sooner.

    Raises:
        ValueError: A secret that is not ``whsec_`` and base64 of at least 16 bytes, or a ``ttl_s``
            that is not a finite number above 0.

    Example:
        >>> key = "whsec_bGlua3MnIG93biBrZXksIDMyIGJ5dGVzIGxvbmch"  # yours: 16+ random bytes
        >>> signer = LinkSigner("https://troupe.example.com", key)
        >>> signer.public_url
        'https://troupe.example.com'
    """

    public_url: str
    secret: str = field(repr=False)
    ttl_s: float = 24 * 3600

    def __post_init__(self) -> None:
        check_secret(self.secret, "decision links")
        # Checked here, not when a link is issued: an infinite ttl_s failed every delivery of a pause
        # before it was posted, and one of 0 or less sent links already expired.
        check_seconds(self.ttl_s, "decision links: ttl_s")
        object.__setattr__(self, "public_url", self.public_url.rstrip("/"))

    @property
    def key(self) -> bytes:
        """The key's bytes (what ``Notifications`` compares with its targets' secrets)."""
        return check_secret(self.secret, "decision links")

    def _mac(self, context: bytes, text: str) -> bytes:
        return hmac.new(self.key, context + text.encode(), hashlib.sha256).digest()

    def token(self, link_id: str) -> str:
        """The signed token of a link.

        Args:
            link_id: The id of the link's record.
        """
        return f"{link_id}.{_b64(self._mac(_CONTEXT, link_id))}"

    def url(self, link_id: str) -> str:
        """The link's URL, ``<public_url>/decide/<token>``.

        Args:
            link_id: The id of the link's record.
        """
        return f"{self.public_url}/decide/{self.token(link_id)}"

    def link_id(self, token: str) -> str:
        """The record id a genuine token names.

        Args:
            token: The token from a link's URL.

        Raises:
            DecisionLinkError: The token is not one this signer issued.
        """
        link_id, _, mac = token.partition(".")
        try:
            genuine = bool(link_id) and hmac.compare_digest(_unb64(mac), self._mac(_CONTEXT, link_id))
        except (ValueError, TypeError):
            genuine = False
        if not genuine:
            raise DecisionLinkError(_NOT_VALID)
        return link_id

    async def open(self, store: Store, token: str, now: float | None = None) -> LinkRecord:
        """The record of a genuine, unexpired link.

        Args:
            store: The runtime's store, where the records are kept.
            token: The token from the link's URL.
            now: The time, in epoch seconds (default: now).

        Raises:
            DecisionLinkError: A token nobody issued, a record that is gone, or an expired link.
        """
        record = await store.load_link(self.link_id(token))
        if record is None:
            raise DecisionLinkError(_NOT_VALID)
        if (time.time() if now is None else now) >= record.expires_at:
            at = datetime.fromtimestamp(record.expires_at, UTC).isoformat()
            raise DecisionLinkError(f"this decision link expired at {at}", run_id=record.run_id)
        return record

    async def issue(
        self,
        store: Store,
        data: dict[str, Any],
        *,
        approver: Principal | None = None,
        channel: str | None = None,
        source: str | None = None,
        now: float | None = None,
        fresh_for_s: float = 0.0,
    ) -> dict[str, Any]:
        """Approve and decline links for a pause, their records written to ``store`` first.

        Args:
            store: The runtime's store (``runtime.store()``), where the records are kept.
            data: A ``tool-call.paused`` event's ``data`` (camelCase: ``kind``, ``agentId``, ``runId``,
                ``toolCallId``, ``fingerprint``, ``expiresAt``; see troupe.core.notifying.outbox).
            approver: Issue the links to this one person: they decide only as them (send them to that
                person alone). None: whoever uses them says who they are.
            channel: The notification target that carries them (kept in the record).
            source: Issuing again with the same ``source`` (a retried delivery) gives the same links
                while they have more than ``fresh_for_s`` left to live; after that, fresh ones (a
                receiver that was down longer than ``ttl_s`` still gets links that work).
            now: Epoch seconds (tests).
            fresh_for_s: How long, in seconds, a kept link must still live to be given again (the
                attempt's timeout: it must not expire on the way).

        Returns:
            ``{"approve": url, "decline": url, "expiresAt": iso}``; only ``expiresAt`` for a pause that
            waits for data (a ``suspend()``), which is answered with the data, not a link.

        Example:
            ``links = await signer.issue(runtime.store(), event["data"], approver=dana)``
        """
        at = time.time() if now is None else now
        expires = at + self.ttl_s
        if data.get("expiresAt"):
            expires = min(expires, datetime.fromisoformat(data["expiresAt"]).timestamp())
        links: dict[str, Any] = {"expiresAt": datetime.fromtimestamp(expires, UTC).isoformat()}
        if data.get("kind") != "approval":
            return links
        for action in ACTIONS:
            record = LinkRecord(
                id="",
                action=action,
                agent_id=data["agentId"],
                run_id=data["runId"],
                tool_call_id=data["toolCallId"],
                fingerprint=data["fingerprint"],
                expires_at=expires,
                approver=_approver(approver),
                channel=channel,
                created_at=at,
            )
            kept = await self._kept(store, record, source, at + fresh_for_s)
            links[action] = self.url(kept.id)
            links["expiresAt"] = datetime.fromtimestamp(kept.expires_at, UTC).isoformat()
        return links

    async def _kept(self, store: Store, record: LinkRecord, source: str | None, until: float) -> LinkRecord:
        """The record issued for ``source`` and this action that still lives past ``until``, or a new one.

        Issued again for one source, a link's id is derived from it, so a retried delivery sends the
        links its first attempt sent; once those expire (before ``until``), the next id in the source's
        line is issued, while a fresh record would live longer than the kept one (not once the pause
        itself has expired: then none would)."""
        generation = 0
        while True:
            named = record.model_copy(update={"id": self._new_id(source, record.action, generation)})
            kept = await store.issue_link(named)
            if source is None or kept.expires_at > until or kept.expires_at >= record.expires_at:
                return kept
            generation += 1

    def _new_id(self, source: str | None, action: Action, generation: int = 0) -> str:
        if source is None:
            return secrets.token_urlsafe(_ID_BYTES)
        line = f"{source}\x1f{action}" + (f"\x1f{generation}" if generation else "")
        return _b64(self._mac(_ID_CONTEXT, line)[:_ID_BYTES])


def approver_of(record: LinkRecord) -> Principal | None:
    """The one person a link was issued to, as the server recorded them (None: nobody in particular)."""
    a = record.approver
    if a is None:
        return None
    return Principal(a["subject"], a["issuer"], a.get("name", ""), roles=frozenset(a.get("roles", ())))


def _approver(who: Principal | None) -> dict[str, Any] | None:
    if who is None:
        return None
    return {"issuer": who.issuer, "subject": who.subject, "name": who.display, "roles": sorted(who.roles)}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """Strictly: only the one spelling ``_b64`` writes. The decoder skips characters outside the
    alphabet, so without the round trip a token with junk in or after its MAC was still genuine."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(raw) != text:
        raise ValueError("not the canonical base64url of its bytes")
    return raw


__all__ = ["ACTIONS", "Action", "LinkSigner", "approver_of"]
