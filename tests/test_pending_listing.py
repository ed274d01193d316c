"""The paged listings in Python: ``Runtime.list_pending`` (the inbox's, for every surface to call) and an
agent's ``list_suspended_runs``, each a page with ``total`` and ``next_cursor`` that the next call
continues, in process and over HTTP (the clients take the cursor too)."""

from __future__ import annotations

from typing import Any

import pytest
from http_server import KEYS
from inbox_agents import inbox_runtime
from troupe.api.client import AsyncTroupeClient
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.suspended import SuspendedRunList

from troupe.errors import InvalidPaginationError

TENANT = Principal("tenant", "troupe", "tenant", resources=frozenset({"a1"}))


async def every_page(list_page: Any, **filters: Any) -> tuple[list[str], list[int]]:
    """The run ids of every page, following each page's cursor, and each page's total."""
    ids: list[str] = []
    totals: list[int] = []
    cursor = None
    while True:
        page: SuspendedRunList = await list_page(**filters, cursor=cursor)
        ids += [run.run_id for run in page.runs]
        totals.append(page.total)
        cursor = page.next_cursor
        if cursor is None:
            return ids, totals


async def test_the_runtimes_pending_listing_and_an_agents_are_pages_with_a_cursor(tmp_path, calls):
    runtime = inbox_runtime(tmp_path, calls)()
    try:
        ops, sup = runtime.get_agent("ops"), runtime.get_agent("sup")
        mine = [(await ops.generate(f"rec-{i}", resource_id="a1")).run_id for i in range(3)]
        theirs = (await ops.generate("rec-b", resource_id="b1")).run_id
        nested = (await sup.generate("rec-n", resource_id="a1")).run_id

        everything = [*mine, theirs, nested]
        assert await every_page(runtime.list_pending, per_page=2) == (everything, [5, 5, 5])
        assert (await every_page(runtime.list_pending, caller=TENANT, per_page=2))[0] == [*mine, nested]
        first = await runtime.list_pending(caller=TENANT, per_page=3)
        assert [r.agent_id for r in first.runs] == ["ops"] * 3, "a subagent's pause is listed at the top"
        # One agent's runs, newest first as Mastra lists them, its subagent's run too (its own agent's).
        assert await every_page(ops.list_suspended_runs, per_page=2) == ([theirs, *mine[::-1]], [4, 4])
        data = runtime.get_agent("data")
        assert [r.agent_id for r in (await data.list_suspended_runs()).runs] == ["data"]
        with pytest.raises(InvalidPaginationError):
            await ops.list_suspended_runs(per_page=2, cursor=first.next_cursor)  # the inbox's cursor
        with pytest.raises(InvalidPaginationError):
            await runtime.list_pending(page=1, cursor=first.next_cursor)
    finally:
        await runtime.shutdown()


async def test_the_http_client_follows_the_same_cursors(http_server, tmp_path, calls):
    server = http_server(inbox_runtime(tmp_path, calls), keys=KEYS)
    client = AsyncTroupeClient(server.url, api_key="key-admin")
    try:
        agent = client.get_agent("ops")
        runs = [(await agent.generate(f"rec-{i}")).run_id for i in range(3)]
        assert await every_page(client.list_inbox, per_page=2) == (runs, [3, 3])
        assert await every_page(agent.list_suspended_runs, per_page=2) == (runs[::-1], [3, 3])
    finally:
        await client.aclose()
