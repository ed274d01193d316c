"""An identity provider's signing keys from its JWKS URL, kept by key id for bearer tokens
(``troupe.api.tokens``).

The keys are fetched when a token names a key id not seen yet, and again in the background once the
keys held are ``LIFESPAN_S`` old; at most one fetch is under way at a time, and a new one starts at most
once per cooldown. A token naming a key already held is never held up by a fetch: an issuer that is
slow or down keeps the keys it last published in use (a key it stops publishing goes with the next
fetch that succeeds), instead of refusing every token once they are five minutes old, and tokens
checked at once wait for one shared fetch, not each for its own timeout one after another. A fetch
ends within its timeout, all of it (an issuer that answers a byte at a time is cut off), and reads at
most ``MAX_JWKS_BYTES``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable

import httpx
import jwt

# How old the keys may get before they are fetched again (PyJWKClient's default lifespan).
LIFESPAN_S = 300.0
# A JWKS holds a few public keys of a kilobyte or so each; an answer past this is not one.
MAX_JWKS_BYTES = 1 << 20

log = logging.getLogger(__name__)


class JwksKeys:
    """The signing keys published at a JWKS URL, by key id.

    Args:
        url: The JWKS URL (checked by ``OidcSettings``).
        timeout_s: How long one fetch may take.
        cooldown_s: The least time between two fetches.
        clock: Seconds, for the keys' age and the cooldown (default ``time.monotonic``).
    """

    def __init__(
        self, url: str, *, timeout_s: float, cooldown_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None  # the last fetch that succeeded (monotonic)
        self._tried_at: float | None = None  # the last fetch started
        self._failure: Exception | None = None  # why the last fetch failed, until one succeeds
        self._fetch: asyncio.Task[None] | None = None

    async def key(self, kid: str) -> jwt.PyJWK:
        """The key named ``kid``.

        Raises:
            jwt.PyJWKClientConnectionError: No keys are held, and they could not be fetched.
            jwt.PyJWKClientError: The issuer does not publish a key named ``kid``.
        """
        found = self._keys.get(kid)
        if found is not None:
            if self._fetched_at is not None and self.clock() - self._fetched_at >= LIFESPAN_S:
                self._start_fetch()  # in the background: this token is checked with the key held
            return found
        fetch = self._start_fetch() or self._under_way()
        if fetch is not None:
            await asyncio.shield(fetch)  # one fetch for every token waiting on it
        found = self._keys.get(kid)
        if found is not None:
            return found
        if not self._keys and self._failure is not None:
            raise jwt.PyJWKClientConnectionError(str(self._failure))
        raise jwt.PyJWKClientError(f"no key with kid {kid!r} in the issuer's JWKS")

    def _under_way(self) -> asyncio.Task[None] | None:
        fetch = self._fetch
        if fetch is None or fetch.done() or fetch.get_loop() is not asyncio.get_running_loop():
            return None
        return fetch

    def _start_fetch(self) -> asyncio.Task[None] | None:
        """A new fetch, unless one is under way or the last started less than a cooldown ago."""
        now = self.clock()
        if self._under_way() is not None or (
            self._tried_at is not None and now - self._tried_at < self.cooldown_s
        ):
            return None
        self._tried_at = now
        self._fetch = asyncio.get_running_loop().create_task(self._fetched())
        return self._fetch

    async def _fetched(self) -> None:
        try:
            async with asyncio.timeout(self.timeout_s):
                keys = await self._download()
        except Exception as exc:  # whatever it was (refused, cut off, too long, not a JWKS): not fetched
            # Slow, down, or not a JWKS now: the keys held stay in use until a fetch succeeds.
            self._failure = exc
            log.warning(
                "the issuer's keys could not be fetched (%s: %s); %d key(s) fetched before stay in use",
                type(exc).__name__,
                str(exc) or f"no whole answer within {self.timeout_s} s",
                len(self._keys),
            )
            return
        self._keys = keys
        self._fetched_at = self._tried_at
        self._failure = None

    async def _download(self) -> dict[str, jwt.PyJWK]:
        """The signing keys the URL publishes now, by key id (as PyJWT's client reads them: no
        redirect followed, keys for signing with a key id)."""
        # The machine's trust store, as PyJWT's client (urllib) used: an issuer behind a private CA
        # that the machine trusts stays reachable.
        verify = ssl.create_default_context()
        async with (
            httpx.AsyncClient(timeout=self.timeout_s, verify=verify, follow_redirects=False) as client,
            client.stream("GET", self.url, headers={"accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise ValueError(f"HTTP {response.status_code}")
            body = bytearray()
            async for part in response.aiter_bytes():
                body += part
                if len(body) > MAX_JWKS_BYTES:
                    raise ValueError(f"the answer is longer than {MAX_JWKS_BYTES:,} bytes")
        found = jwt.PyJWKSet.from_dict(json.loads(body))
        keys = {k.key_id: k for k in found.keys if k.key_id and k.public_key_use in ("sig", None)}
        if not keys:
            raise ValueError("it publishes no signing key with a key id")
        return keys


__all__ = ["LIFESPAN_S", "MAX_JWKS_BYTES", "JwksKeys"]
