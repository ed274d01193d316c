"""OIDC / JWT bearer tokens: an identity provider's access or ID tokens, checked with PyJWT.

A token is accepted only when it is signed by one of the issuer's keys (a JWKS URL, kept and fetched
again when a token names a key id it has not seen, at most once per ``jwks_cooldown_s``, and in the
background every five minutes, the keys held staying in use while the issuer is slow or down: see
``troupe.api.jwks``; or a JWKS file, read again when it changes), with an algorithm the configuration
allows (never ``none``, never an HMAC: the keys are public), for this audience, from this issuer, and
inside its ``exp``/``nbf`` window give or take ``leeway_s`` (at most five minutes). Its claims then make
the principal: ``sub`` (or ``subject_claim``) with the issuer is the stable subject; ``roles_claim`` and
``resources_claim`` (dotted paths into the claims, a list or a space-separated string) give roles and
resources; ``admin_role`` makes an admin. Every failure is one ``AuthenticationError`` (401) that names
what is wrong and never echoes the token.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import jwt
from troupe.api.errors import AuthenticationError
from troupe.api.guards import is_loopback
from troupe.api.jwks import JwksKeys
from troupe.core.vocabulary.identity import Principal

DEFAULT_ALGORITHMS = ("RS256", "ES256")
ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
MAX_LEEWAY_S = 300.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OidcSettings:
    """How bearer tokens from one identity provider are checked and read (see the module docstring)."""

    issuer: str
    audience: str | tuple[str, ...]
    jwks_url: str | None = None
    jwks_file: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_s: float = 60.0
    subject_claim: str = "sub"
    name_claim: str = "name"
    roles_claim: str | None = "roles"
    resources_claim: str | None = "troupe_resources"
    admin_role: str | None = None
    jwks_cooldown_s: float = 30.0
    jwks_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.issuer or "#" in self.issuer:
            raise ValueError(f"oidc issuer must be a URL without a fragment, got {self.issuer!r}")
        if not self.audience:
            raise ValueError("oidc audience is required: the token's aud must name this server")
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise ValueError("oidc needs exactly one of jwks_url and jwks_file")
        refused = [a for a in self.algorithms if a not in ASYMMETRIC]
        if refused or not self.algorithms:
            raise ValueError(
                f"oidc algorithms {refused or '(none)'} are not allowed: choose from {sorted(ASYMMETRIC)} "
                "('none' and HMAC algorithms never: the keys are public)"
            )
        if not 0 <= self.leeway_s <= MAX_LEEWAY_S:
            raise ValueError(f"oidc leeway_s must be between 0 and {MAX_LEEWAY_S:.0f} seconds")
        if not self.jwks_cooldown_s > 0:
            raise ValueError(
                f"oidc jwks_cooldown_s must be more than 0 seconds (got {self.jwks_cooldown_s!r}): each "
                "token naming an unknown key would fetch the issuer's keys again"
            )
        if self.jwks_url is not None:
            _check_jwks_url(self.jwks_url)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> OidcSettings:
        """The ``"oidc"`` object of a config file (the field names above)."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown oidc setting(s) {unknown}; known: {sorted(known)}")
        values = dict(data)
        for name in ("audience", "algorithms"):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        return cls(**values)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> OidcSettings:
        """A settings file: ``{"oidc": {"issuer", "audience", "jwks_url" or "jwks_file", ...}}``."""
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or not isinstance(data.get("oidc"), dict):
            raise ValueError('expected {"oidc": {"issuer", "audience", "jwks_url" or "jwks_file", ...}}')
        return cls.from_mapping(data["oidc"])


def _check_jwks_url(url: str) -> None:
    """A JWKS URL must be https (the keys decide who anyone is), or http to this machine only."""
    parts = urlsplit(url)
    local = parts.scheme == "http" and parts.hostname is not None and is_loopback(parts.hostname)
    if not (parts.scheme == "https" and parts.hostname) and not local:
        raise ValueError(
            f"oidc jwks_url must be https://... (or http:// to a loopback address), got {url!r}: the "
            "issuer's keys must not be read over a connection anyone between could change, nor from a file "
            "(use jwks_file)"
        )


class _KeySource:
    """The issuer's signing keys by key id, from a JWKS URL (``troupe.api.jwks``) or from a file."""

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self._url = (
            JwksKeys(
                settings.jwks_url, timeout_s=settings.jwks_timeout_s, cooldown_s=settings.jwks_cooldown_s
            )
            if settings.jwks_url
            else None
        )
        self._file: tuple[float, jwt.PyJWKSet] | None = None
        if settings.jwks_file is not None:
            try:
                self._read_file(settings.jwks_file)
            except _Unreadable as exc:
                raise ValueError(f"oidc jwks_file {settings.jwks_file}: {exc}") from None

    async def key(self, kid: str) -> jwt.PyJWK:
        if self._url is not None:
            return await self._url.key(kid)
        return self._from_file(kid)

    def _from_file(self, kid: str) -> jwt.PyJWK:
        path = self.settings.jwks_file
        assert path is not None
        try:
            self._read_file(path)
        except _Unreadable as exc:
            # Half-written (being replaced) or gone: the keys read last stay in use until it is whole
            # again; a server that never read it refuses tokens (401), never fails (500).
            log.warning("oidc jwks_file %s: %s", path, exc)
            if self._file is None:
                raise jwt.PyJWKClientConnectionError(str(exc)) from None
        assert self._file is not None
        for found in self._file[1].keys:
            if found.key_id == kid:
                return found
        raise jwt.PyJWKClientError(f"no key with kid {kid!r} in the JWKS file")

    def _read_file(self, path: str) -> None:
        """Read the JWKS file if it changed since it was read (a rotated file is read again)."""
        try:
            stamp = os.stat(path).st_mtime_ns
            if self._file is not None and self._file[0] == stamp:
                return
            with open(path, encoding="utf-8") as f:
                self._file = (stamp, jwt.PyJWKSet.from_dict(json.load(f)))
        except OSError as exc:
            raise _Unreadable(f"cannot be read ({type(exc).__name__}: {exc.strerror or exc})") from None
        except (ValueError, jwt.PyJWKSetError, jwt.PyJWKError) as exc:
            raise _Unreadable(f"is not a JWKS ({type(exc).__name__}: {exc})") from None


class _Unreadable(Exception):
    """The JWKS file is missing, unreadable or not (yet) a whole JWKS."""


@dataclass
class TokenVerifier:
    """Checks bearer tokens against one identity provider and makes principals of them."""

    settings: OidcSettings
    _keys: _KeySource = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._keys = _KeySource(self.settings)

    @staticmethod
    def looks_like_token(credential: str) -> bool:
        """A compact JWS has three dot-separated parts; an API key has none."""
        return credential.count(".") == 2

    async def principal(self, token: str) -> Principal:
        claims = await self.verify(token)
        return self._principal(claims)

    async def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, once every check passed; ``AuthenticationError`` saying which failed."""
        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in s.algorithms:
                raise _refused(f"its algorithm {header.get('alg')!r} is not one of {list(s.algorithms)}")
            kid = header.get("kid")
            if not isinstance(kid, str) or not kid:
                raise _refused("it names no key (kid)")
            key = await self._keys.key(kid)
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(s.algorithms),
                audience=list(s.audience) if isinstance(s.audience, tuple) else s.audience,
                issuer=s.issuer,
                leeway=s.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWKClientConnectionError as exc:
            raise _refused(f"the issuer's keys could not be fetched ({type(exc).__name__})") from None
        except (jwt.PyJWKClientError, jwt.PyJWKSetError):
            raise _refused("it is signed with a key the issuer does not publish (unknown kid)") from None
        except jwt.PyJWTError as exc:
            raise _refused(_reason(exc)) from None
        return claims

    def _principal(self, claims: dict[str, Any]) -> Principal:
        s = self.settings
        subject = _claim(claims, s.subject_claim)
        if not isinstance(subject, str) or not subject:
            raise _refused(f"its {s.subject_claim!r} claim is missing or not a string")
        roles = _strings(claims, s.roles_claim)
        name = _claim(claims, s.name_claim)
        try:
            return Principal(
                subject,
                s.issuer,
                name if isinstance(name, str) else "",
                resources=_strings(claims, s.resources_claim),
                roles=roles,
                admin=s.admin_role is not None and s.admin_role in roles,
            )
        except ValueError as exc:
            raise _refused(f"its claims do not make a principal: {exc}") from None


def _refused(why: str) -> AuthenticationError:
    return AuthenticationError(f"the bearer token was refused: {why}")


def _reason(exc: jwt.PyJWTError) -> str:
    reasons: Sequence[tuple[type[jwt.PyJWTError], str]] = (
        (jwt.ExpiredSignatureError, "it has expired"),
        (jwt.ImmatureSignatureError, "it is not valid yet (nbf or iat in the future)"),
        (jwt.InvalidAudienceError, "it is not for this server (aud)"),
        (jwt.InvalidIssuerError, "it is from another issuer (iss)"),
        (jwt.MissingRequiredClaimError, "it lacks a required claim (exp, iss, aud)"),
        (jwt.InvalidSignatureError, "its signature does not verify"),
        (jwt.InvalidAlgorithmError, "its algorithm does not fit its key"),
        (jwt.DecodeError, "it is not a well-formed JWT"),
    )
    return next((why for kind, why in reasons if isinstance(exc, kind)), "it is not valid")


def _claim(claims: dict[str, Any], path: str | None) -> Any:
    """The claim at a dotted path (``realm_access.roles``); None if the path is unset or absent."""
    if not path:
        return None
    found: Any = claims
    for part in path.split("."):
        found = found.get(part) if isinstance(found, dict) else None
    return found


def _strings(claims: dict[str, Any], path: str | None) -> frozenset[str]:
    value = _claim(claims, path)
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str) and v)


__all__ = ["DEFAULT_ALGORITHMS", "OidcSettings", "TokenVerifier"]
