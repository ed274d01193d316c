"""Troupe's errors (see ``core.errors`` for the tree)."""

from core.errors import *  # noqa: F403
from core.errors import __all__ as _core_all
from core.store import StaleSnapshotError

__all__ = [*_core_all, "StaleSnapshotError"]
