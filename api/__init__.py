"""The HTTP front door: Mastra-compatible routes (``troupe.api.app.create_app``), SSE, API keys per
resource, and
the Python client (``troupe.api.client``, public as ``troupe.client``).

Nothing is imported here eagerly: the client must not pull in the server (FastAPI, Ray) with it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KeyRing", "Principal", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from troupe.api.app import create_app

        return create_app
    if name in ("KeyRing", "Principal"):
        from troupe.api import auth

        return getattr(auth, name)
    raise AttributeError(f"module 'troupe.api' has no attribute {name!r}")
