"""Notifications: an event for every pause, decision, expiry and interrupted call, and for every pause a
cancel withdrew (``tool-call.withdrawn``), kept in a durable outbox until each target has it.

An event is written in the same atomic store write as the state change it reports (the pause's
checkpoint, the decision's claim), one ``OutboxEntry`` per target whose filters match, so a crash can
never lose one or announce one that did not happen. Event ids are derived from what they report: writing
the same pause again (a run that pauses again while one of its calls is still open) adds nothing, and the
receiver can use the id (sent as ``webhook-id``) to drop a repeat. Only a top-level run reports pauses and
decisions: a subagent's pause is announced, and decided, at the top.

The body follows the Standard Webhooks shape: ``{"type", "timestamp", "data"}`` (plus ``id``), camelCase
like the HTTP API.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal
from urllib.parse import SplitResult, urlsplit

from troupe.core.vocabulary.hidden_chars import hidden
from troupe.core.vocabulary.pause_shapes import notification_data
from troupe.core.vocabulary.seconds import check_seconds
from troupe.core.vocabulary.state import Pause, RunState, ToolCallState, utcnow
from troupe.core.vocabulary.store import AuditEntry, OutboxEntry

EventType = Literal[
    "tool-call.paused",
    "tool-call.decided",
    "tool-call.expired",
    "tool-call.interrupted",
    "tool-call.approval-recorded",  # one approver of a quorum has approved; the call still waits
    "tool-call.withdrawn",  # the run was cancelled: the pause no longer waits for anyone
]
_DECISION_EVENTS: dict[str, EventType] = {
    "expired": "tool-call.expired",
    "approval-recorded": "tool-call.approval-recorded",
    "cancelled": "tool-call.withdrawn",
}
SECRET_PREFIX = "whsec_"


@dataclass(frozen=True)
class NotificationTarget:
    """A webhook that pause and decision events are posted to, signed (Standard Webhooks).

    A filter left None lets everything through; given, the event's agent (any agent on its path), tool
    or resource must be in it.

    Args:
        url: The webhook's URL (http or https; a chat webhook carries its credential in it, so it is
            never shown).
        secret: ``whsec_<base64>`` (16 bytes or more), the key the events are signed with.
        name: The target's name in deliveries and logs (default: the URL's host).
        agents: Only events of these agents.
        tools: Only events of these tools.
        resources: Only events of runs of these resources.
        format: ``"event"`` (the event's JSON) or ``"chat"`` (a chat incoming-webhook message with the
            decision links, still signed).

    Raises:
        ValueError: A URL that is not http(s) or cannot be sent to (a port out of range, a space or
            control character), a bad secret, filters that are not names, or an unknown format.

    Example:
        >>> target = NotificationTarget("https://hooks.example.com/troupe", secret, tools={"pay_invoice"})
    """

    url: str = field(repr=False)  # chat webhooks carry their credential in the URL
    secret: str = field(repr=False)
    name: str = ""
    agents: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    resources: frozenset[str] | None = None
    # "event": the Standard Webhooks event JSON; "chat": a chat incoming-webhook message with the links
    # (``troupe.core.notifying.chat_message``), still signed.
    format: Literal["event", "chat"] = "event"

    def __post_init__(self) -> None:
        if self.format not in ("event", "chat"):
            raise ValueError(f"notification target {self.name or '?'}: format must be 'event' or 'chat'")
        what = f"notification target {self.name or '?'}"
        parts = _url_parts(self.url, what)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{what}: url must be http(s)://host/...")
        if not self.name:
            object.__setattr__(self, "name", parts.hostname + (f":{parts.port}" if parts.port else ""))
        check_secret(self.secret, f"notification target {self.name!r}")
        for attr in ("agents", "tools", "resources"):
            value = getattr(self, attr)
            if value is not None:
                object.__setattr__(self, attr, _names(value, f"notification target {self.name!r}: {attr}"))

    def matches(self, agents: Sequence[str], tool_name: str, resource_id: str | None) -> bool:
        """Whether an event passes this target's filters.

        Args:
            agents: The agents on the event's path.
            tool_name: The event's tool.
            resource_id: The event's run's resource.
        """
        if self.agents is not None and not self.agents.intersection(agents):
            return False
        if self.tools is not None and tool_name not in self.tools:
            return False
        return self.resources is None or resource_id in self.resources


def _url_parts(url: Any, what: str) -> SplitResult:
    """A target's URL, split, refused (without quoting it: it may hold a credential) when no HTTP
    client could send to it: a port out of range, or a space or control character anywhere (a
    trailing tab from a pasted secret), which would leave every delivery failing unexplained."""
    if not isinstance(url, str) or any(c.isspace() or hidden(c) for c in url):
        raise ValueError(f"{what}: url must be text without spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (read for its check: a port out of 0-65535 raises)
    except ValueError as exc:
        raise ValueError(f"{what}: url is not valid ({exc})") from None
    return parts


def _names(value: Any, what: str) -> frozenset[str]:
    """A filter's names; a string is refused, not read as its letters (``"ops"`` would match no agent)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValueError(f"{what} must be a list of names (strings), got {value!r}")
    names = frozenset(value)
    if not all(isinstance(name, str) for name in names):
        raise ValueError(f"{what} must be a list of names (strings), got {value!r}")
    return names


def check_secret(secret: Any, what: str) -> bytes:
    """The key bytes of a ``whsec_<base64>`` secret; a clear error (without the secret) otherwise."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"{what}: the secret must be a string 'whsec_<base64>'")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what}: the secret after 'whsec_' is not valid base64") from None
    if len(key) < 16:
        raise ValueError(f"{what}: the secret must hold at least 16 bytes")
    return key


# How long a delivered notification is kept by default: a week.
KEEP_DELIVERED_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class RetrySchedule:
    """How notification deliveries are retried.

    Args:
        delays: The wait, in seconds, after each failed attempt; after the last the delivery is
            ``failed`` and waits for a redelivery (``Runtime.redeliver``, ``troupe redeliver``).
        timeout_s: How long one attempt may take.
        lease_s: How long a host's claim on a delivery lasts (more than ``timeout_s``).
        poll_s: How often hosts look for due deliveries that nobody poked them about.

    Raises:
        ValueError: A time that is not a finite number of seconds above 0, or ``lease_s`` not above
            ``timeout_s`` (a slow attempt could be sent twice at once).
    """

    delays: tuple[float, ...] = (1, 5, 30, 120, 600, 1800, 3600, 3600)
    timeout_s: float = 10.0
    lease_s: float = 30.0
    poll_s: float = 2.0

    def __post_init__(self) -> None:
        if isinstance(self.delays, str) or not isinstance(self.delays, Iterable):
            raise ValueError(f"retry.delays must be a list of seconds, got {self.delays!r}")
        delays = tuple(check_seconds(d, f"retry.delays[{n}]") for n, d in enumerate(self.delays))
        object.__setattr__(self, "delays", delays)
        for name in ("timeout_s", "lease_s", "poll_s"):
            check_seconds(getattr(self, name), f"retry.{name}")
        if self.lease_s <= self.timeout_s:
            raise ValueError("lease_s must exceed timeout_s, or a slow attempt could be sent twice at once")


@dataclass(frozen=True)
class Event:
    id: str
    type: EventType
    run_id: str
    agents: tuple[str, ...]
    tool_name: str
    resource_id: str | None
    data: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "timestamp": utcnow().isoformat(), "data": self.data}


def event_id(*parts: str) -> str:
    return "evt_" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _call_data(
    state: RunState, tool_call_id: str, tool_name: str, args: Any, path: list[str]
) -> dict[str, Any]:
    return {
        "runId": state.run_id,
        "agentId": state.agent_id,
        "threadId": state.thread_id,
        "resourceId": state.resource_id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "args": args,
        "agentPath": path,
    }


def pause_notification(state: RunState, call: ToolCallState, pause: Pause) -> Event:
    """The ``tool-call.paused`` event of a pause (its data: ``pause_shapes.notification_data``)."""
    key = event_id(state.run_id, "paused", call.tool_call_id, str(pause.seq), pause.fingerprint)
    agents = _agents(state, pause.agent_path)
    data = notification_data(state, call, pause)
    return Event(key, "tool-call.paused", state.run_id, agents, pause.tool_name, state.resource_id, data)


def decision_event(state: RunState, entry: AuditEntry) -> Event:
    data = _call_data(state, entry.tool_call_id, entry.tool_name, entry.args, entry.agent_path)
    data.update(
        fingerprint=entry.fingerprint,
        decision=entry.kind,
        reason=entry.reason,
        decidedBy=entry.decided_by,
        decidedAt=entry.decided_at.isoformat(),
    )
    if entry.quorum is not None:
        data.update(approvals=entry.approvals, quorum=entry.quorum)
    kind = _DECISION_EVENTS.get(entry.kind, "tool-call.decided")
    # The decision's own identity: who (issuer + subject, not a display name two people may share) and
    # when (two answers to one call, such as a tool that suspend()s twice with the same arguments, are
    # two decisions). The entry is written once, with its event id, so retries still send that one id.
    who = (entry.issuer or "", entry.subject or "", entry.decided_by or "")
    key = event_id(
        state.run_id, entry.kind, entry.tool_call_id, entry.fingerprint, *who, entry.decided_at.isoformat()
    )
    return Event(
        key, kind, state.run_id, _agents(state, entry.agent_path), entry.tool_name, state.resource_id, data
    )


def interrupted_event(state: RunState, call: ToolCallState) -> Event:
    data = _call_data(state, call.tool_call_id, call.tool_name, call.effective_args, [state.agent_id])
    data["gated"] = call.requires_approval
    key = event_id(state.run_id, "interrupted", call.tool_call_id, state.owner or "", str(state.step))
    return Event(
        key, "tool-call.interrupted", state.run_id, (state.agent_id,), call.tool_name, state.resource_id, data
    )


def _target(n: int, spec: Any) -> NotificationTarget:
    """One target of the ``--notify`` file."""
    if not isinstance(spec, dict) or not isinstance(spec.get("url"), str):
        raise ValueError(f"targets[{n}]: expected an object with a 'url'")
    secret = str(spec.get("secret") or "")
    if "secret_env" in spec:
        secret = os.environ.get(str(spec["secret_env"]), "")
        if not secret:
            raise ValueError(f"targets[{n}]: environment variable {spec['secret_env']} is not set")
    given = [k for k in ("agents", "tools", "resources") if spec.get(k) is not None]
    filters = {k: _names(spec[k], f"targets[{n}].{k}") for k in given}
    shape = spec.get("format", "event")
    return NotificationTarget(spec["url"], secret, name=str(spec.get("name") or ""), format=shape, **filters)


def _retry(spec: Any) -> RetrySchedule:
    """The ``retry`` object of the ``--notify`` file (absent: the default schedule)."""
    if spec is None:
        return RetrySchedule()
    known = [f.name for f in fields(RetrySchedule)]
    if not isinstance(spec, dict):
        raise ValueError(f'"retry" must be an object with some of {known}, got {spec!r}')
    unknown = sorted(set(spec) - set(known))
    if unknown:
        raise ValueError(f'"retry" has unknown keys {unknown}: it takes {known}')
    return RetrySchedule(**spec)


def _check_link_key(links: Any, targets: Sequence[NotificationTarget]) -> None:
    """Refuse a link key that is also a webhook's secret: whoever receives that target's webhooks (and
    can check their signatures) could then sign links."""
    key = check_secret(getattr(links, "secret", None), "decision links")
    shared = [t.name for t in targets if check_secret(t.secret, f"notification target {t.name!r}") == key]
    if shared:
        raise ValueError(
            "decision links must be signed with a key of their own, but the LinkSigner's secret is also "
            f"the webhook secret of notification target(s) {shared}: whoever receives those webhooks "
            "could sign links. Give LinkSigner a secret of its own (whsec_ + base64 of 16+ random bytes)."
        )


def _agents(state: RunState, path: Sequence[str]) -> tuple[str, ...]:
    return (state.agent_id, *path)


@dataclass(frozen=True)
class Notifications:
    """Where a runtime's pause and decision events go, and how they are retried.

    Events are written with the state change they report (a durable outbox) and sent by the agents'
    hosts; give it to ``Runtime(notifications=...)``.

    Args:
        targets: The webhooks (``NotificationTarget``), each with a distinct name.
        retry: How deliveries are retried (``RetrySchedule``).
        links: A ``LinkSigner``: pause events then carry one-click decision links.
        keep_delivered_s: How long a delivered entry is kept, in seconds (a week by default, and while
            its run lives: its state can be shown and it can be sent again); None keeps every one.
            Pending and failed entries are always kept.

    Raises:
        ValueError: Two targets with one name, a bad ``keep_delivered_s``, or a links key that is also
            a target's secret.
    """

    targets: tuple[NotificationTarget, ...] = ()
    retry: RetrySchedule = RetrySchedule()
    links: Any = None  # a LinkSigner; typed loosely so this module does not import it
    keep_delivered_s: float | None = KEEP_DELIVERED_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"notification targets need distinct names, got {names}")
        if self.keep_delivered_s is not None:
            check_seconds(self.keep_delivered_s, "keep_delivered_s (or None)")
        if self.links is not None:
            _check_link_key(self.links, self.targets)

    @classmethod
    def from_mapping(cls, data: Any, links: Any = None) -> Notifications:
        """Notifications from the shape of ``troupe serve --notify``'s file.

        Args:
            data: ``{"targets": [{"url", "secret" (or "secret_env": a variable holding it), "name",
                "agents", "tools", "resources"}], "retry": {...}, "keep_delivered_s": seconds or null}``.
            links: A ``LinkSigner`` for decision links, if any.

        Raises:
            ValueError: The data does not have that shape, or a target is invalid.
        """
        if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
            raise ValueError('expected {"targets": [{"url": ..., "secret": "whsec_..."}, ...]}')
        targets = [_target(n, spec) for n, spec in enumerate(data["targets"])]
        retry = _retry(data.get("retry"))
        keep = data.get("keep_delivered_s", KEEP_DELIVERED_S)
        return cls(tuple(targets), retry=retry, links=links, keep_delivered_s=keep)

    def target(self, name: str) -> NotificationTarget | None:
        """The target with this name, or None.

        Args:
            name: The target's name.
        """
        return next((t for t in self.targets if t.name == name), None)

    def entries(self, events: Iterable[Event], now: float | None = None) -> tuple[OutboxEntry, ...]:
        """One outbox entry per event and matching target, due at once.

        An entry holds the event as it is: decision links are issued, and a chat target's message is
        made, when it is sent (``troupe.core.notifying.dispatcher``), so the store never holds a link.

        Args:
            events: The events.
            now: The time, in epoch seconds (default: now).
        """
        at = time.time() if now is None else now
        out = []
        for event in events:
            body = event.body()
            for target in self.targets:
                if target.matches(event.agents, event.tool_name, event.resource_id):
                    out.append(
                        OutboxEntry(
                            id=f"{event.id}.{target.name}",
                            event_id=event.id,
                            target=target.name,
                            run_id=event.run_id,
                            body=body,
                            next_at=at,
                            created_at=at,
                        )
                    )
        return tuple(out)


__all__ = [
    "Event",
    "EventType",
    "NotificationTarget",
    "Notifications",
    "RetrySchedule",
    "check_secret",
    "decision_event",
    "event_id",
    "interrupted_event",
    "pause_notification",
]
