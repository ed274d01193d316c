"""Who is calling: API keys sent as ``Authorization: Bearer <key>``, each mapped to the resources it may
see and decide, or to everything (admin).

A keys file is JSON: ``{"<key>": {"name": "acme", "resources": ["acme-1", "acme-2"]}, "<key2>":
{"name": "ops", "admin": true}}``; a key may also carry ``"roles": ["dba", ...]``, which approver
policies check (a key without roles has none; files without them work as before). Keys are kept only
as SHA-256 digests, so a lookup does not compare secrets character by character. In open mode (local
use) a request without a key acts as an admin named ``anonymous``; a key that is sent must still be
valid.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from troupe.api.errors import AuthenticationError, InvalidRequestError, PermissionDeniedError


@dataclass(frozen=True)
class Principal:
    name: str
    # None: an admin, who may see every resource (and runs that have none).
    resources: frozenset[str] | None
    # What approver policies check (``troupe.core.deciding.approvers``); ``name`` is the principal they
    # record.
    roles: frozenset[str] = frozenset()

    @property
    def admin(self) -> bool:
        return self.resources is None

    def may(self, resource_id: str | None) -> bool:
        return self.resources is None or (resource_id is not None and resource_id in self.resources)

    def check(self, resource_id: str | None, what: str = "run") -> None:
        """Raise ``PermissionDeniedError`` unless this caller may act on ``resource_id``."""
        if not self.may(resource_id):
            raise PermissionDeniedError(
                f"key {self.name!r} may not access this {what}: it belongs to another resource",
                resource_id=resource_id,
            )

    def decider(self) -> dict[str, Any]:
        """Who decides, as the decision methods take it."""
        return {"decided_by": self.name, "roles": self.roles}

    def own_resource(self, resource_id: str | None) -> str | None:
        """The resource a new run of this caller belongs to: an admin may name any (or none); any other
        key must name one of its own."""
        if self.admin:
            return resource_id
        if resource_id is None:
            raise InvalidRequestError(
                f"key {self.name!r} must name one of its resources (resourceId or memory.resource)",
                resources=sorted(self.resources or ()),
            )
        self.check(resource_id, "resource")
        return resource_id


ANONYMOUS = Principal("anonymous", None)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyRing:
    """API keys and what each may see."""

    def __init__(self, principals: Mapping[str, Principal] | None = None) -> None:
        self._by_digest = {_digest(key): p for key, p in (principals or {}).items()}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> KeyRing:
        """Build from the keys-file shape (``{key: {"name", "resources": [...]} | {"admin": true}}``);
        ``Principal`` values are taken as they are."""
        principals: dict[str, Principal] = {}
        for key, spec in data.items():
            if not isinstance(key, str) or not key:
                raise ValueError("API keys must be non-empty strings")
            principals[key] = spec if isinstance(spec, Principal) else _principal(key, spec)
        return cls(principals)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KeyRing:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError(f"{os.fspath(path)}: expected a JSON object mapping each key to its grants")
        return cls.from_mapping(data)

    def __len__(self) -> int:
        return len(self._by_digest)

    def find(self, key: str) -> Principal | None:
        return self._by_digest.get(_digest(key))


def _principal(key: str, spec: Any) -> Principal:
    label = f"key ending {key[-4:]!r}" if len(key) > 8 else "a key"
    if not isinstance(spec, dict):
        raise ValueError(f"{label}: expected {{'name', 'resources': [...]}} or {{'admin': true}}")
    name = str(spec.get("name") or label)
    roles = spec.get("roles", [])
    if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
        raise ValueError(f"{label} ({name}): 'roles' must be a list of role names")
    if spec.get("admin") is True:
        return Principal(name, None, frozenset(roles))
    resources = spec.get("resources")
    if not isinstance(resources, list) or not all(isinstance(r, str) and r for r in resources):
        raise ValueError(
            f"{label} ({name}): 'resources' must be a list of resource ids, or set 'admin': true"
        )
    return Principal(name, frozenset(resources), frozenset(roles))


@dataclass(frozen=True)
class Gate:
    """The app's authentication policy: its keys, and whether anonymous callers are let in (open mode)."""

    keys: KeyRing
    open_mode: bool = False

    def authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            if self.open_mode:
                return ANONYMOUS
            raise AuthenticationError("an API key is required: send 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.partition(" ")
        principal = self.keys.find(token.strip()) if scheme.lower() == "bearer" else None
        if principal is None:
            raise AuthenticationError("unknown API key")
        return principal


def keyring(keys: KeyRing | Mapping[str, Any] | None) -> KeyRing:
    if keys is None:
        return KeyRing()
    if isinstance(keys, KeyRing):
        return keys
    if isinstance(keys, Mapping):
        return KeyRing.from_mapping(keys)
    raise TypeError("keys must be a KeyRing or a mapping {key: {'name', 'resources'} | {'admin': true}}")


__all__ = ["ANONYMOUS", "Gate", "KeyRing", "Principal", "keyring"]
