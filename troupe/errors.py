"""Troupe's errors (see ``troupe.core.vocabulary.errors`` for the tree)."""

from troupe.api.errors import (
    AuthenticationError,
    HttpError,
    InvalidRequestError,
    ListenError,
    PermissionDeniedError,
    ServerUnreachableError,
)
from troupe.core.vocabulary.errors import *  # noqa: F403
from troupe.core.vocabulary.errors import __all__ as _core_all
from troupe.core.vocabulary.store import StaleSnapshotError

__all__ = [
    *_core_all,
    "AuthenticationError",
    "HttpError",
    "InvalidRequestError",
    "ListenError",
    "PermissionDeniedError",
    "ServerUnreachableError",
    "StaleSnapshotError",
]
