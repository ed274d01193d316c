"""Troupe's errors (see ``core.errors`` for the tree)."""

from api.errors import AuthenticationError, HttpError, InvalidRequestError, PermissionDeniedError
from core.errors import *  # noqa: F403
from core.errors import __all__ as _core_all
from core.store import StaleSnapshotError

__all__ = [
    *_core_all,
    "AuthenticationError",
    "HttpError",
    "InvalidRequestError",
    "PermissionDeniedError",
    "StaleSnapshotError",
]
