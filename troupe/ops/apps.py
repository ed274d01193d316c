"""Finding the user's runtime and store from command-line strings (``module:attr``, store URLs)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from troupe.core.notifying.links import LinkSigner
from troupe.core.notifying.outbox import Notifications
from troupe.core.vocabulary.store import Store
from troupe.storage.redis_link import REDIS_SCHEMES

if TYPE_CHECKING:
    from troupe.supervisor import Runtime


async def load_runtime(spec: str, ray_address: str | None = None) -> Runtime:
    """Import ``module:attr`` (a Runtime, or a sync/async function returning one)."""
    from troupe.supervisor import Runtime  # imports Ray: only commands that run agents pay for it

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"--app must be MODULE:ATTR, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like uvicorn: the current directory's modules can be used
    try:
        made: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"--app {spec}: cannot import {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(made, part):
            raise SystemExit(f"--app {spec}: {module_name!r} has no {attr!r}")
        made = getattr(made, part)
    if not isinstance(made, Runtime) and callable(made):
        made = made()
        if inspect.isawaitable(made):
            made = await made
    if not isinstance(made, Runtime):
        raise SystemExit(
            f"--app {spec}: expected a Runtime (or a function returning one), got {type(made).__name__}"
        )
    if ray_address and made.executor == "ray":
        made.ray_address = ray_address
    return made


def open_store(url: str, prefix: str = "troupe:") -> Store:
    """A Redis URL (``redis://``, ``rediss://``, ``redis+cluster://``, ...) is a RedisStore;
    ``sqlite:///path`` or a plain path is SQLite."""
    from troupe.storage import RedisStore, SqliteStore

    if url.partition("://")[0] in REDIS_SCHEMES:
        return RedisStore.from_url(url, prefix=prefix)
    return SqliteStore(url.removeprefix("sqlite://") if url.startswith("sqlite:///") else url)


__all__ = ["load_runtime", "open_store"]


def load_notifications(path: str) -> Notifications:
    """The ``troupe serve --notify FILE`` file: webhook targets, and optionally decision links
    (``"links": {"public_url": "https://…", "secret": "whsec_…" or "secret_env": VAR, "ttl_s": 3600}``)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    links = data.get("links") if isinstance(data, dict) else None
    signer = None
    if links is not None:
        if not isinstance(links, dict) or not isinstance(links.get("public_url"), str):
            raise ValueError('"links" needs "public_url" (where approvers reach this server) and a secret')
        secret = os.environ.get(str(links["secret_env"])) if "secret_env" in links else links.get("secret")
        signer = LinkSigner(links["public_url"], str(secret or ""), links.get("ttl_s", 24 * 3600))
    return Notifications.from_mapping(data, links=signer)
