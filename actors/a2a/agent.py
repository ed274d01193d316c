"""``A2AAgent``: a remote A2A agent (another team's, a vendor's, another Troupe) as a subagent.

    supervisor = Agent("desk", model=..., agents={
        "vendor": A2AAgent("vendor", card_url="https://vendor.example/a2a/agent", bearer_token=token),
    })

It stands wherever a subagent stands: the supervisor's model sees an ``agent-vendor`` tool, a call of it
sends the prompt to the remote agent as a new task, and the task's final artifact is the call's result.
When the remote task goes ``input-required``, the delegation pauses here like any other: the pause
bubbles up to the top supervisor (its origin: the remote agent), and the person's answer is sent to the
remote task as a message. The remote task's id is checkpointed, so any process can carry the answer.
``troupe.actors.a2a.proxy`` does the work; the agent itself is only where to find the remote agent and
how to authenticate (``headers``, ``bearer_token``: kept out of its repr).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from troupe.actors.a2a.errors import RemoteCardError
from troupe.core.run.agent import AgentSpec
from troupe.core.vocabulary.model import Model, ModelEvent, ModelRequest
from troupe.core.vocabulary.seconds import check_seconds

DEFAULT_TIMEOUT_S = 300.0


class _Remote(Model):
    """An A2A agent's model is the remote agent's own: nothing here ever asks this one."""

    def __init__(self, agent_id: str) -> None:
        self.id = f"a2a:{agent_id}"

    def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise RuntimeError(f"{self.id} runs remotely; its turns are taken by the remote agent")


class A2AAgent(AgentSpec):
    """A remote A2A agent, to stand as a subagent (``Agent(..., agents={"key": A2AAgent(...)})``).

    Args:
        id: Its id in this runtime (the supervisor's tool is ``agent-<key>``).
        card_url: Where its agent card is: the card's own URL (ending in ``.json``) or the agent's base
            URL (the card is then at ``/.well-known/agent-card.json`` under it). Give this or ``card``.
        card: The agent card itself (its JSON as a dict), instead of fetching it.
        name: The name shown for it (default: the card's name, else ``id``).
        description: What the supervisor's model is told it does (default: the card's description).
        headers: HTTP headers sent with every request to it (e.g. an API key header).
        bearer_token: Sent as ``Authorization: Bearer <token>``.
        timeout_s: How long one request to it may take (a blocking send waits for the task).

    Raises:
        ValueError: Neither or both of ``card_url`` and ``card``; a header that is not text; a
            ``timeout_s`` that is not a number of seconds above 0 and at most 100 years.
        RemoteCardError: ``card`` does not parse as an A2A agent card.

    Example:
        >>> vendor = A2AAgent("vendor", card_url="http://127.0.0.1:9000/a2a/ops", bearer_token="k")
        >>> vendor
        A2AAgent(id='vendor', card_url='http://127.0.0.1:9000/a2a/ops')
    """

    def __init__(
        self,
        id: str,
        *,
        card_url: str | None = None,
        card: Mapping[str, Any] | None = None,
        name: str | None = None,
        description: str | None = None,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if (card_url is None) == (card is None):
            raise ValueError(f"A2A agent {id!r} needs exactly one of card_url and card")
        parsed = parse_card(id, dict(card)) if card is not None else None
        super().__init__(
            id,
            name=name or (parsed.name if parsed is not None else None),
            description=description or (parsed.description if parsed is not None else None),
            model=_Remote(id),
        )
        self.card_url = card_url
        self.card = dict(card) if card is not None else None
        self.timeout_s = check_seconds(timeout_s, f"A2A agent {id!r}: timeout_s")
        sent = dict(headers or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in sent.items()):
            raise ValueError(f"A2A agent {id!r}: headers must map text to text")
        if bearer_token is not None:
            sent["Authorization"] = f"Bearer {bearer_token}"
        self._headers = sent

    @property
    def where(self) -> str:
        """Where the agent is, as errors and pauses name it: its card URL, or the card's first URL,
        without any user, password, query or fragment (a credential some put in a URL)."""
        if self.card_url is not None:
            return shown_url(self.card_url)
        interfaces = (self.card or {}).get("supportedInterfaces") or [{}]
        return shown_url(str(interfaces[0].get("url") or (self.card or {}).get("url") or self.id))

    def request_headers(self) -> dict[str, str]:
        """The headers every request to the agent carries (credentials included: never log them)."""
        return dict(self._headers)

    def __repr__(self) -> str:
        where = f"card_url={self.where!r}" if self.card_url is not None else "card=..."
        return f"A2AAgent(id={self.id!r}, {where})"


def shown_url(url: str) -> str:
    """``url`` as it may be shown: scheme, host, port and path only."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return url.split("?", 1)[0].split("#", 1)[0]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


# A URL as exception texts quote one (httpx: "for url 'http://...'"): up to a space or a quote.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redacted(text: str) -> str:
    """``text`` (an exception's, to be quoted in an error) with each URL in it as ``shown_url`` shows it.

    What the a2a-sdk and httpx raise quotes the URL a request went to, credentials and all (a user and
    password, an ``?api_key=``), and a remote agent's error reaches the supervisor's model, its stored
    run and the logs.

    Example:
        >>> redacted("Server error '500' for url 'https://u:p@a.example/rpc?api_key=s'")
        "Server error '500' for url 'https://a.example/rpc'"
    """

    def shown(match: re.Match[str]) -> str:
        try:
            return shown_url(match.group(0))
        except ValueError:  # not a URL urllib can take apart (a port out of range): none of it
            return "<url>"

    return _URL.sub(shown, text)


def parse_card(agent_id: str, data: Any) -> Any:
    """An A2A ``AgentCard`` from its JSON; ``RemoteCardError`` naming the agent if it does not parse."""
    try:
        from a2a.client.card_resolver import parse_agent_card
    except ImportError as exc:
        raise ImportError("A2A agents need the a2a-sdk: pip install 'troupe-runtime[a2a]'") from exc
    try:
        return parse_agent_card(data)
    except Exception as exc:  # the SDK's ParseError, or whatever a malformed card trips on
        raise RemoteCardError(
            f"the agent card of A2A agent {agent_id!r} does not parse: {exc}", agent_id=agent_id
        ) from None


__all__ = ["DEFAULT_TIMEOUT_S", "A2AAgent", "parse_card", "redacted", "shown_url"]
