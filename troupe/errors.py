"""Troupe's errors: every one is a ``TroupeError`` with a stable ``code``, a message and ``details``.

Catch ``TroupeError`` for any of them, or a class for one kind: a decision on a call decided already
is a ``DecisionConflictError`` (HTTP 409), an unknown or finished run a ``SnapshotNotFoundError`` (404),
invalid resume data a ``ResumeDataValidationError`` (422), a server the client cannot reach a
``ServerUnreachableError``. Over HTTP the same ``code`` is in the error body, and the Python client
raises the same class.
"""

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
