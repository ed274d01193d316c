"""Decision links: signed, expiring URLs that approve or decline exactly one paused call.

A link's token carries the action, the agent, run, tool call and fingerprint of the pause it was made
for, and when it expires, signed with HMAC-SHA256 under the server's link secret. Opening it (GET) only
shows a confirmation page; confirming it (POST) decides the call through the ordinary decision path, so it
is bound to the fingerprint (a call that changed since the link was made is refused) and used once (the
decision is claimed once). A link says nothing about who uses it, unless it was issued to one named
approver (``approver``), and then it decides only as them; a call an approver policy governs is decided
only by someone who says who they are (troupe.api.decision_links).

    token = base64url(payload JSON) "." base64url(HMAC-SHA256(key, "troupe-link.v1." + payload part))
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from troupe.core.notifying.outbox import check_secret
from troupe.core.vocabulary.errors import DecisionLinkError
from troupe.core.vocabulary.identity import Principal

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
    # A link issued to one named approver decides only as that approver: {"issuer", "subject", "name",
    # "roles": [...]}. None: whoever uses the link says who they are (or, with no policy, nobody needs to).
    approver: dict[str, Any] | None = None

    @property
    def approver_principal(self) -> Principal | None:
        a = self.approver
        if a is None:
            return None
        return Principal(a["subject"], a["issuer"], a.get("name", ""), roles=frozenset(a.get("roles", ())))


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
        """The claim of a genuine, well-formed, unexpired token; ``DecisionLinkError`` otherwise (a
        claim of the wrong type, even one signed with this server's key, is refused, never a crash)."""
        payload, _, mac = token.partition(".")
        try:
            genuine = hmac.compare_digest(_unb64(mac), self._mac(payload))
            claim = _claim(json.loads(_unb64(payload))) if genuine else None
        except (ValueError, TypeError):
            claim = None
        if claim is None:
            raise DecisionLinkError("this decision link is not valid (damaged, or not made by this server)")
        if (time.time() if now is None else now) >= claim.expires_at:
            at = datetime.fromtimestamp(claim.expires_at, UTC).isoformat()
            raise DecisionLinkError(f"this decision link expired at {at}", run_id=claim.run_id)
        return claim

    def links_for(
        self, data: dict[str, Any], now: float | None = None, approver: Principal | None = None
    ) -> dict[str, Any]:
        """Approve and decline links for a pause event's ``data`` (camelCase, see
        troupe.core.notifying.outbox); with ``approver``, links issued to that one person, which decide
        only as them (send them to that person alone)."""
        expires = (time.time() if now is None else now) + self.ttl_s
        if data.get("expiresAt"):
            expires = min(expires, datetime.fromisoformat(data["expiresAt"]).timestamp())
        links: dict[str, Any] = {"expiresAt": datetime.fromtimestamp(expires, UTC).isoformat()}
        if data.get("kind") != "approval":
            return links  # a tool waiting for data is answered with the data, not a link
        for action in ("approve", "decline"):
            claim = LinkClaim(
                action,
                data["agentId"],
                data["runId"],
                data["toolCallId"],
                data["fingerprint"],
                expires,
                _approver(approver),
            )
            links[action] = f"{self.public_url}/decide/{self.sign(claim)}"
        return links


def _approver(who: Principal | None) -> dict[str, Any] | None:
    if who is None:
        return None
    return {"issuer": who.issuer, "subject": who.subject, "name": who.display, "roles": sorted(who.roles)}


_TEXT_FIELDS = ("agent_id", "run_id", "tool_call_id", "fingerprint")


def _claim(data: Any) -> LinkClaim | None:
    """A claim whose every field has its type (None if any has not)."""
    if not isinstance(data, dict) or set(data) - {*_TEXT_FIELDS, "action", "expires_at", "approver"}:
        return None
    expires = data.get("expires_at")
    if not isinstance(expires, int | float) or isinstance(expires, bool) or not math.isfinite(expires):
        return None
    if data.get("action") not in ("approve", "decline"):
        return None
    if not all(isinstance(data.get(name), str) for name in _TEXT_FIELDS):
        return None
    approver = data.get("approver")
    if approver is not None and not _approver_ok(approver):
        return None
    return LinkClaim(**data)


def _approver_ok(a: Any) -> bool:
    if not isinstance(a, dict) or not all(isinstance(a.get(k), str) and a[k] for k in ("issuer", "subject")):
        return False
    if "#" in a["issuer"]:
        return False
    roles = a.get("roles", [])
    return (
        isinstance(a.get("name", ""), str)
        and isinstance(roles, list)
        and all(isinstance(r, str) for r in roles)
    )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


__all__ = ["Action", "LinkClaim", "LinkSigner"]
