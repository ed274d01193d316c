"""Posting signed webhooks over HTTP: the ``WebhookSender`` every agent host gives its dispatcher.

A receiver is someone else's server, so nothing it does may hold a host up or fill its memory:
- the whole attempt (connecting, sending, the answer's status line) is bounded by one deadline, not
  each read by its own: a receiver that trickles one byte every few seconds is cut off at the deadline,
  which stays below the delivery's lease, so the entry is never sent twice at once;
- the answer's body is never read (only its status counts), whatever its size;
- requests go through httpx's transport, not its client: the client logs every request's URL at INFO,
  and a chat webhook's URL is its credential. Redirects are not followed; proxies from the environment
  are not used.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from troupe.core.notifying.outbox import NotificationTarget
from troupe.core.notifying.webhooks import attempt_error

if TYPE_CHECKING:
    import httpx


class HttpSender:
    def __init__(self) -> None:
        self._transport: httpx.AsyncHTTPTransport | None = None

    async def send(
        self, target: NotificationTarget, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> str | None:
        # Imported on the first notification: every agent's actor has a sender, few ever send (httpx,
        # with the click it loads, is about 2 MiB of each actor's memory).
        import httpx

        if self._transport is None:
            self._transport = httpx.AsyncHTTPTransport()
        try:
            request = httpx.Request("POST", target.url, content=body, headers=headers)
        except (httpx.InvalidURL, ValueError) as exc:  # e.g. an IPv4 address out of range, bad IDNA
            # A failed attempt with its error, not an exception that leaves the delivery claimed,
            # unexplained, again and again.
            return attempt_error(target, "the request could not be made: ", exc)
        request.extensions["timeout"] = httpx.Timeout(timeout_s).as_dict()
        try:
            async with asyncio.timeout(timeout_s):
                response = await self._transport.handle_async_request(request)
                await response.aclose()  # the status is all that counts: the body is never read
        except TimeoutError:
            return f"no answer within {timeout_s:g} s"
        except httpx.HTTPError as exc:
            return attempt_error(target, "", exc)
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    async def close(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.aclose()


__all__ = ["HttpSender"]
