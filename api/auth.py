"""Who is calling: ``Authorization: Bearer <credential>``, an API key (``troupe.api.keys``) or, when
an identity provider is configured, an OIDC/JWT token (``troupe.api.tokens``); or whatever the host
app's own dependency says (``troupe.api.identity``). Each way ends in one ``Principal``
(``troupe.core.vocabulary.identity``): a stable subject, the resources it may see, its roles.

In open mode (local use) a request without a credential acts as an anonymous admin: it sees
everything, but decides only calls no approver policy governs. A credential that is sent must still be
valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from troupe.api.errors import AuthenticationError, InvalidRequestError, PermissionDeniedError
from troupe.api.keys import KeyRing
from troupe.api.tokens import TokenVerifier
from troupe.core.vocabulary.identity import LOCAL_ISSUER, Principal

ANONYMOUS = Principal("anonymous", LOCAL_ISSUER, "anonymous", admin=True, anonymous=True)


def check_resource(caller: Principal, resource_id: str | None, what: str = "run") -> None:
    """Raise ``PermissionDeniedError`` unless ``caller`` may act on ``resource_id``."""
    if not caller.may(resource_id):
        raise PermissionDeniedError(
            f"{caller.display!r} may not access this {what}: it belongs to another resource",
            resource_id=resource_id,
        )


def own_resource(caller: Principal, resource_id: str | None) -> str | None:
    """The resource a new run of ``caller`` belongs to (or whose thread it decides on): an admin may
    name any, or none; anyone else names one of their own, or none when they have exactly one, which
    is then the one.

    Raises:
        InvalidRequestError: none named by a caller with several resources (the error lists them), or
            with none at all.
        PermissionDeniedError: a resource of someone else's named.
    """
    if caller.admin:
        return resource_id
    if resource_id is None:
        mine = sorted(caller.resources)
        if len(mine) == 1:
            return mine[0]
        listed = f"several resources ({', '.join(map(repr, mine))})" if mine else "no resources"
        raise InvalidRequestError(
            f"{caller.display!r} has {listed}: name one (resourceId or memory.resource)",
            resources=mine,
        )
    check_resource(caller, resource_id, "resource")
    return resource_id


@dataclass(frozen=True)
class Gate:
    """Troupe's own authentication: API keys, bearer tokens of one identity provider, and whether
    callers without a credential are let in (open mode)."""

    keys: KeyRing
    open_mode: bool = False
    tokens: TokenVerifier | None = None

    async def authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            if self.open_mode:
                return ANONYMOUS
            raise AuthenticationError(
                "a credential is required: send 'Authorization: Bearer <API key or token>'"
            )
        return await self.credential(_bearer(authorization))

    async def credential(self, credential: str) -> Principal:
        """The principal of an API key or a bearer token (given alone, e.g. in a link's form)."""
        if self.tokens is not None and TokenVerifier.looks_like_token(credential):
            return await self.tokens.principal(credential)
        principal = self.keys.find(credential) if credential else None
        if principal is None:
            raise AuthenticationError("unknown API key")
        return principal


def _bearer(authorization: str) -> str:
    scheme, _, credential = authorization.partition(" ")
    if scheme.lower() != "bearer":
        raise AuthenticationError("unknown API key: send 'Authorization: Bearer <API key or token>'")
    return credential.strip()


def keyring(keys: KeyRing | Mapping[str, Any] | None) -> KeyRing:
    if keys is None:
        return KeyRing()
    if isinstance(keys, KeyRing):
        return keys
    if isinstance(keys, Mapping):
        return KeyRing.from_mapping(keys)
    raise TypeError("keys must be a KeyRing or a mapping (see troupe.api.keys)")


__all__ = ["ANONYMOUS", "Gate", "KeyRing", "Principal", "check_resource", "keyring", "own_resource"]
