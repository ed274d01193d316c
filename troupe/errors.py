"""Troupe's errors (see ``troupe.core.errors`` for the tree)."""

from troupe.api.errors import AuthenticationError, HttpError, InvalidRequestError, PermissionDeniedError
from troupe.core.errors import *  # noqa: F403
from troupe.core.errors import __all__ as _core_all
from troupe.core.store import StaleSnapshotError

__all__ = [
    *_core_all,
    "AuthenticationError",
    "HttpError",
    "InvalidRequestError",
    "PermissionDeniedError",
    "StaleSnapshotError",
]
