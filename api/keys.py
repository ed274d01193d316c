"""API keys, for machines: each key stands for one principal (a subject, its resources, its roles).

A keys file holds SHA-256 digests of the keys, never the keys themselves::

    {"keys": [
      {"sha256": "<hex digest>", "subject": "alice", "issuer": "https://login.example.com",
       "name": "Alice", "resources": ["acme"], "roles": ["dba"]},
      {"sha256": "<hex digest>", "subject": "ops-bot", "admin": true}
    ]}

``troupe keys new`` makes a key, prints it once and adds its digest to the file; ``troupe keys convert``
turns a file of plain keys (the old ``{"<key>": {"name", ...}}`` shape, which is refused) into this one.
A key's ``issuer`` defaults to the local issuer ``troupe``; give it your identity provider's issuer and
the person's ``sub`` as ``subject`` and the key and that person's tokens are one approver.

A keys file is read again whenever it changes (checked on every use of a key: its size, time and inode),
so a key removed from it stops working at once, in every process that reads it, with no restart or
signal. A file that cannot be read or is not valid (half-written by an editor, say) is reported in the
log and the keys read last stay in use until it is whole again.

A plain digest suits keys only because they are random (``troupe keys new`` draws 32 bytes): a digest
of a guessable key could be reversed by guessing, so never make keys by hand. In Python, ``create_app(
keys=...)`` also takes ``{"<key>": {...}}`` as code (digested as it is read).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from collections.abc import Mapping
from typing import Any

from troupe.core.vocabulary.identity import LOCAL_ISSUER, Principal

log = logging.getLogger(__name__)

DIGEST = "sha256"
CONVERT = "troupe keys convert"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return "tk_" + secrets.token_urlsafe(32)


class PlainKeysError(ValueError):
    """A keys file that holds keys in plain text."""


class KeyRing:
    """API keys (by digest) and the principal each stands for."""

    def __init__(self, by_digest: Mapping[str, Principal] | None = None) -> None:
        self._by_digest = dict(by_digest or {})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> KeyRing:
        """The keys-file shape (``{"keys": [...]}``), or ``{"<key>": {...} | Principal}`` given in code."""
        if "keys" in data and isinstance(data["keys"], list):
            return cls(dict(_entry(i, e) for i, e in enumerate(data["keys"])))
        ring: dict[str, Principal] = {}
        for key, spec in data.items():
            if not isinstance(key, str) or not key:
                raise ValueError("API keys must be non-empty strings")
            ring[digest(key)] = spec if isinstance(spec, Principal) else principal_of(_label(key), spec)
        return cls(ring)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KeyRing:
        """A keys file, read again whenever it changes (``KeyFile``); one holding keys in plain text is
        refused, naming the command that converts it."""
        return KeyFile(path)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> KeyRing:
        """The keys of a keys file as it is now (``PlainKeysError`` for plain keys, ``ValueError`` or
        ``OSError`` for a file that is not a keys file)."""
        data = read_file(path)
        if "keys" not in data:
            raise PlainKeysError(
                f"{os.fspath(path)} holds API keys in plain text; convert it to digests with "
                f"`{CONVERT} {os.fspath(path)}` (the keys stay the same; each gets a subject)"
            )
        return cls.from_mapping(data)

    def __len__(self) -> int:
        return len(self._by_digest)

    def find(self, key: str) -> Principal | None:
        return self._by_digest.get(digest(key))


class KeyFile(KeyRing):
    """The keys of a file, read again whenever the file changes (see the module docstring).

    Args:
        path: A keys file (``{"keys": [...]}``). Read at once: a missing or invalid file raises here.

    Example:
        ``create_app(runtime, keys=KeyRing.load("keys.json"))``: remove a key from the file (``troupe
        keys`` writes it whole, at once) and the next request with it is a 401.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._stamp = _stamp(self.path)
        super().__init__(KeyRing.read(self.path)._by_digest)

    def find(self, key: str) -> Principal | None:
        self._read_again_if_changed()
        return super().find(key)

    def __len__(self) -> int:
        self._read_again_if_changed()
        return super().__len__()

    def _read_again_if_changed(self) -> None:
        try:
            stamp = _stamp(self.path)
        except OSError as exc:
            stamp = ("gone", type(exc).__name__)
        if stamp == self._stamp:
            return
        self._stamp = stamp  # a broken file is reported once per change, not on every request
        try:
            self._by_digest = KeyRing.read(self.path)._by_digest
        except (OSError, ValueError) as exc:
            log.error(
                "keys file %s could not be read again (%s: %s); the keys read last stay in use",
                self.path,
                type(exc).__name__,
                exc,
            )


def _stamp(path: str) -> Any:
    found = os.stat(path)
    return (found.st_mtime_ns, found.st_size, found.st_ino, found.st_ctime_ns)


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{os.fspath(path)}: expected a JSON object")
    return data


def _label(key: str) -> str:
    return f"key ending {key[-4:]!r}" if len(key) > 8 else "a key"


def _entry(index: int, entry: Any) -> tuple[str, Principal]:
    label = f"keys[{index}]"
    found = entry.get(DIGEST) if isinstance(entry, dict) else None
    if not isinstance(found, str) or len(found) != 64 or any(c not in "0123456789abcdef" for c in found):
        raise ValueError(f"{label}: expected {{'{DIGEST}': '<64 hex digits>', 'subject', ...}}")
    return found, principal_of(label, entry)


def principal_of(label: str, spec: Any) -> Principal:
    """The principal a key's grants describe (``subject``, ``issuer``, ``name``, ``resources``, ``roles``,
    ``admin``); a key without a subject is known by its name."""
    if not isinstance(spec, dict):
        raise ValueError(f"{label}: expected {{'subject', 'resources': [...]}} or {{'admin': true}}")
    name = str(spec.get("name") or spec.get("subject") or label)
    admin = spec.get("admin") is True
    resources = spec.get("resources", [] if admin else None)
    if not _names(resources):
        raise ValueError(
            f"{label} ({name}): 'resources' must be a list of resource ids, or set 'admin': true"
        )
    roles = spec.get("roles", [])
    if not _names(roles):
        raise ValueError(f"{label} ({name}): 'roles' must be a list of role names")
    try:
        return Principal(
            str(spec.get("subject") or name),
            str(spec.get("issuer") or LOCAL_ISSUER),
            name,
            frozenset(resources or ()),
            frozenset(roles),
            admin=admin,
        )
    except ValueError as exc:
        raise ValueError(f"{label} ({name}): {exc}") from None


def _names(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) and v for v in values)


def digested(data: Mapping[str, Any]) -> dict[str, Any]:
    """A plain keys file's content as digests, each entry with a subject (its name, when it had none)."""
    entries = []
    for key, spec in data.items():
        principal_of(_label(key), spec)  # refuse a bad entry before anything is written
        entry = {DIGEST: digest(key), **spec}
        entry.setdefault("subject", spec.get("name") or _label(key))
        entries.append(entry)
    return {"keys": entries}


def write_file(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write a keys file readable by its owner only, replacing any old one at once (never half-written)."""
    path = os.fspath(path)
    part = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(part, path)
    except BaseException:
        if os.path.exists(part):
            os.unlink(part)
        raise


__all__ = [
    "CONVERT",
    "KeyFile",
    "KeyRing",
    "PlainKeysError",
    "digest",
    "digested",
    "new_key",
    "principal_of",
    "read_file",
    "write_file",
]
