"""Decision links: signed, expiring URLs that approve or decline exactly one paused call.

A link's token carries the action, the agent, run, tool call and fingerprint of the pause it was made
for, and when it expires, signed with HMAC-SHA256 under the server's link secret. Opening it (GET) only
shows a confirmation page; confirming it (POST) decides the call through the ordinary decision path, so it
is bound to the fingerprint (a call that changed since the link was made is refused) and used once (the
decision is claimed once; a quorum counts a link's principal once).

    token = base64url(payload JSON) "." base64url(HMAC-SHA256(key, "troupe-link.v1." + payload part))
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from troupe.core.notifying.outbox import check_secret
from troupe.core.vocabulary.errors import DecisionLinkError

Action = Literal["approve", "decline"]
_CONTEXT = b"troupe-link.v1."


@dataclass(frozen=True)
class LinkClaim:
    """What a valid link allows."""

    action: Action
    agent_id: str
    run_id: str
    tool_call_id: str
    fingerprint: str
    expires_at: float


@dataclass(frozen=True)
class LinkSigner:
    """Makes and checks links. ``public_url`` is where approvers reach the server (links are
    ``<public_url>/decide/<token>``); ``secret`` is ``whsec_<base64>``; a link lives ``ttl_s`` seconds, or
    until its pause expires if that is sooner."""

    public_url: str
    secret: str = field(repr=False)
    ttl_s: float = 24 * 3600

    def __post_init__(self) -> None:
        check_secret(self.secret, "decision links")
        object.__setattr__(self, "public_url", self.public_url.rstrip("/"))

    @property
    def _key(self) -> bytes:
        return check_secret(self.secret, "decision links")

    def sign(self, claim: LinkClaim) -> str:
        payload = _b64(json.dumps(claim.__dict__, separators=(",", ":"), sort_keys=True).encode())
        return f"{payload}.{_b64(self._mac(payload))}"

    def _mac(self, payload: str) -> bytes:
        return hmac.new(self._key, _CONTEXT + payload.encode(), hashlib.sha256).digest()

    def verify(self, token: str, now: float | None = None) -> LinkClaim:
        """The claim of a genuine, unexpired token; ``DecisionLinkError`` otherwise."""
        payload, _, mac = token.partition(".")
        try:
            genuine = hmac.compare_digest(_unb64(mac), self._mac(payload))
            claim = LinkClaim(**json.loads(_unb64(payload))) if genuine else None
        except (ValueError, TypeError):
            claim = None
        if claim is None or claim.action not in ("approve", "decline"):
            raise DecisionLinkError("this decision link is not valid (damaged, or not made by this server)")
        if (time.time() if now is None else now) >= claim.expires_at:
            at = datetime.fromtimestamp(claim.expires_at, UTC).isoformat()
            raise DecisionLinkError(f"this decision link expired at {at}", run_id=claim.run_id)
        return claim

    def links_for(self, data: dict[str, Any], now: float | None = None) -> dict[str, Any]:
        """Approve and decline links for a pause event's ``data`` (camelCase, see
        troupe.core.notifying.outbox)."""
        expires = (time.time() if now is None else now) + self.ttl_s
        if data.get("expiresAt"):
            expires = min(expires, datetime.fromisoformat(data["expiresAt"]).timestamp())
        links: dict[str, Any] = {"expiresAt": datetime.fromtimestamp(expires, UTC).isoformat()}
        if data.get("kind") != "approval":
            return links  # a tool waiting for data is answered with the data, not a link
        for action in ("approve", "decline"):
            claim = LinkClaim(
                action, data["agentId"], data["runId"], data["toolCallId"], data["fingerprint"], expires
            )
            links[action] = f"{self.public_url}/decide/{self.sign(claim)}"
        return links


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


__all__ = ["Action", "LinkClaim", "LinkSigner"]
