"""Where the operator commands find runs: a server (``--server``), a runtime (``--app``) or a bare store
(``--store``, read-only). Opening one never creates anything: a store that is not there is an error that
names it, so an operator is never told "nothing is waiting" about the wrong place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from troupe.core.vocabulary.agent_api import AsyncAgentAPI
from troupe.core.vocabulary.listing import Order, PausedQuery, listed
from troupe.core.vocabulary.pause_shapes import suspended_list, suspended_run
from troupe.core.vocabulary.store import Store, SuspendedRunQuery
from troupe.core.vocabulary.suspended import SuspendedRun, SuspendedRunList
from troupe.ops.apps import load_runtime, open_store
from troupe.ops.terminal import Progress, safe
from troupe.storage.redis_link import REDIS_SCHEMES, redacted

if TYPE_CHECKING:
    from troupe.api.client import AsyncTroupeClient
    from troupe.supervisor import Runtime

_EPOCH = datetime.min.replace(tzinfo=UTC)


def existing_store(url: str, prefix: str) -> Store:
    """The store at ``url`` for a read-only look: Redis URLs as they are, SQLite only if the file exists;
    any other scheme is refused. Raises ``SystemExit`` naming what is wrong."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in REDIS_SCHEMES:
        _check_redis_url(url)
        return open_store(url, prefix)
    if sep and scheme != "sqlite":
        raise SystemExit(
            f"--store {safe(redacted(url))}: unknown URL scheme {safe(scheme)!r} "
            "(use a SQLite file path, sqlite:///PATH, or redis://HOST:PORT)"
        )
    path = Path(rest if sep else url)
    if not path.is_file():
        raise SystemExit(f"--store {safe(url)}: no such SQLite file (nothing was created)")
    return open_store(str(path), prefix)


def _check_redis_url(url: str) -> None:
    """redis-py reads a URL only at the store's first command, and a malformed one (a port that is no
    number) then ends the command in a traceback: read it now, as redis-py will, and say what is wrong
    without the URL's password."""
    from redis.asyncio.connection import parse_url

    scheme = url.partition("://")[0]
    if scheme not in ("redis", "rediss", "unix"):
        return  # cluster and Sentinel URLs list several hosts, which the store splits itself
    try:
        parse_url(url)
    except ValueError as exc:
        password = urlsplit(url).password  # read lazily: the port that failed is not parsed here
        reason = str(exc).replace(password, "***") if password else str(exc)
        raise SystemExit(f"--store {safe(redacted(url))}: {safe(reason)}") from None


def _server_url(url: str) -> str:
    """``url`` if it can name a server (http or https, with a host); else ``SystemExit`` saying why.
    httpx would only say so at the first request, in a traceback."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise SystemExit(f"--server {safe(redacted(url))}: not a URL ({safe(str(exc))})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise SystemExit(f"--server {safe(redacted(url))}: not an http(s) URL, e.g. http://127.0.0.1:8000")
    return url


@dataclass(frozen=True)
class Page:
    """Which page ``runs list`` shows: ``size`` runs, the ``number``-th (0-based), or the one after
    ``cursor``."""

    size: int
    number: int = 0
    cursor: str | None = None

    @property
    def offset(self) -> int:
        return 0 if self.cursor is not None else self.number * self.size


@dataclass
class Source:
    """A runtime (from --app or over a bare --store) or a server client; both give agent-like objects
    with the Python API's method names."""

    where: str
    runtime: Runtime | None = None
    client: AsyncTroupeClient | None = None
    bare_store: Store | None = None  # --store: read-only

    @property
    def store(self) -> Store | None:
        return self.runtime.store() if self.runtime is not None else self.bare_store

    async def agent_ids(self) -> list[str]:
        if self.client is not None:
            return sorted(await self.client.list_agents())
        assert self.runtime is not None
        return sorted({agent.id for agent in self.runtime.list_agents()})

    def agent(self, agent_id: str) -> AsyncAgentAPI:
        """The agent, in-process or over HTTP: the same run methods either way (``AgentAPI``)."""
        if self.client is not None:
            return self.client.get_agent(agent_id)
        if self.runtime is None:
            raise SystemExit(
                "deciding a run runs its agent's tools, which needs the agents' code: "
                "use --app MODULE:ATTR (your runtime) or --server URL"
            )
        return self.runtime.get_agent(agent_id)

    async def pending_page(
        self, agent_id: str | None, thread: str | None, resource: str | None, page: Page
    ) -> tuple[SuspendedRunList, Order]:
        """One page of the paused runs the caller may see, and its order. From a store (or an app's),
        read from its indexes: every agent's top-level runs oldest first (a subagent's pause is listed
        once, under its top-level run), or one agent's runs. From a server, its inbox (oldest first), or
        one agent's suspended runs (newest first, as that route lists them)."""
        if thread is not None and agent_id is None:
            raise SystemExit("--thread needs --agent")
        store = self.store
        if store is not None:
            if resource is not None and agent_id is None:
                raise SystemExit("--resource needs --agent with --store or --app")
            found = await store.list_paused(
                PausedQuery(
                    agents=None if agent_id is None else (agent_id,),
                    top_level=agent_id is None,
                    resources=None if resource is None else (resource,),
                    thread_id=thread,
                    limit=page.size,
                    offset=page.offset,
                    cursor=page.cursor,
                )
            )
            return suspended_list(found), "oldest"
        paging: dict[str, Any] = {"per_page": page.size, "cursor": page.cursor}
        paging["page"] = page.number if page.cursor is None else None
        if self.client is not None and agent_id is None:
            return await self.client.list_inbox(resource_id=resource, **paging), "oldest"
        assert agent_id is not None
        return await self.agent(agent_id).list_suspended_runs(
            thread_id=thread, resource_id=resource, **paging
        ), "newest"

    async def find(self, run_id: str, agent_id: str | None, progress: Progress) -> list[SuspendedRun]:
        """The run if it waits for a decision (and is ``agent_id``'s when given): read by its id from a
        store; from a server, found in the listings."""
        store = self.store
        if store is None:
            return [r for r in await self.pending(agent_id, None, None, progress) if r.run_id == run_id]
        stored = await store.load_run(run_id)
        if stored is None or not listed(stored.state) or agent_id not in (None, stored.state.agent_id):
            return []
        return [suspended_run(stored.state)]

    async def pending(
        self, agent_id: str | None, thread: str | None, resource: str | None, progress: Progress
    ) -> list[SuspendedRun]:
        """Every paused run the caller may see, oldest pause first. A pause from a subagent is listed
        once, under its top-level run (with its agent path), where it is decided."""
        store = self.store
        if store is not None:
            query = SuspendedRunQuery(agent_id=agent_id, thread_id=thread, resource_id=resource)
            progress.note("reading the store")
            states, _ = await store.list_suspended_runs(query)
            progress.done()
            runs = [suspended_run(s) for s in states if s.parent is None or agent_id is not None]
        elif self.client is not None and agent_id is None and thread is None and resource is None:
            progress.note("asking the server")
            runs = (await self.client.list_inbox()).runs
            progress.done()
        else:
            ids = [agent_id] if agent_id else await self.agent_ids()
            runs = []
            for n, one in enumerate(ids, 1):
                progress.note(f"listing {one} ({n}/{len(ids)})")
                found = await self.agent(one).list_suspended_runs(thread_id=thread, resource_id=resource)
                runs.extend(found.runs)
            progress.done()
        return sorted((r for r in runs if r.pending), key=lambda r: (r.suspended_at or _EPOCH, r.run_id))

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.runtime is not None:
            await self.runtime.shutdown()
        if self.bare_store is not None:
            await self.bare_store.close()


async def open_source(args: Any) -> Source:
    if args.server:
        from troupe.api.client import AsyncTroupeClient

        # A key and a token both go as ``Authorization: Bearer``; the server tells them apart.
        credential = (
            getattr(args, "token", None)
            or args.key
            or os.environ.get("TROUPE_TOKEN")
            or os.environ.get("TROUPE_API_KEY")
        )
        client = AsyncTroupeClient(_server_url(args.server), api_key=credential, timeout=60.0)
        return Source(args.server, client=client)
    if args.app:
        return Source(args.app, runtime=await load_runtime(args.app))
    if args.store:
        return Source(args.store, bare_store=existing_store(args.store, args.prefix))
    raise SystemExit("say where the runs are: --server URL, --app MODULE:ATTR or --store URL")


__all__ = ["Page", "Source", "existing_store", "open_source", "redacted"]
