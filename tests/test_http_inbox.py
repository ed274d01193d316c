"""``GET /api/inbox`` (every pending pause a caller may decide, across agents, in one call) and the
``GET /inbox`` page's files, over real HTTP."""

from __future__ import annotations

import base64
import contextlib
import json
import time

import httpx
import pytest
from http_server import ADMIN, KEYS, A, B
from inbox_agents import inbox_runtime
from troupe.api.keys import KeyRing, digest, write_file


@pytest.fixture
def server(http_server, tmp_path, calls):
    return http_server(inbox_runtime(tmp_path, calls), keys=KEYS)


@pytest.fixture
def api(server):
    with httpx.Client(base_url=server.url + "/api", timeout=30) as client:
        yield client


def start(api: httpx.Client, agent: str, message: str, resource: str, headers: dict[str, str]) -> str:
    body = {"messages": message, "resourceId": resource, "threadId": f"thread-{message}"}
    response = api.post(f"/agents/{agent}/generate", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["finishReason"] == "suspended"
    return response.json()["runId"]


def inbox(api: httpx.Client, headers: dict[str, str], **query) -> tuple[list[str], int, dict]:
    response = api.get("/inbox", params=query, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    return [r["runId"] for r in body["runs"]], body["total"], body


def error_code(response: httpx.Response) -> tuple[int, str]:
    assert response.headers["content-type"] == "application/json"
    return response.status_code, response.json()["code"]


def test_every_agents_pauses_once_oldest_first_with_what_the_page_shows(api):
    ops = start(api, "ops", "rec-1", "a1", ADMIN)
    planner = start(api, "planner", "dinner", "a2", ADMIN)
    nested = start(api, "sup", "rec-9", "b1", ADMIN)

    ids, total, body = inbox(api, ADMIN)
    assert (ids, total) == ([ops, planner, nested], 3), "one entry per top-level run, oldest first"
    runs = {r["runId"]: r for r in body["runs"]}

    [call] = runs[ops]["toolCalls"]
    assert runs[ops]["agentId"] == "ops" and runs[ops]["resourceId"] == "a1"
    assert runs[ops]["threadId"] == "thread-rec-1"
    assert call["toolName"] == "delete_record" and call["args"] == {"id": "rec-1"}
    assert call["requiresApproval"] is True and call["agentPath"] == ["ops"]
    assert call["fingerprint"] and call["pausedAt"] and call["expiresAt"] is None
    assert call["interrupted"] is False
    assert call["context"] == {
        "request": "rec-1",
        "modelText": None,
        "toolDescription": "Delete a record by id",
    }

    [ask] = runs[planner]["toolCalls"]
    assert ask["requiresApproval"] is False
    assert ask["suspendPayload"] == {"question": "How many people?"}
    schema = ask["resumeSchema"]
    assert schema["required"] == ["people"]
    assert schema["properties"]["people"]["type"] == "integer"
    assert schema["properties"]["seating"]["enum"] == ["indoor", "outdoor"]

    # The subagent's pause shows once, at the top, with the top's ids; its own run is not listed.
    [deep] = runs[nested]["toolCalls"]
    assert runs[nested]["agentId"] == "sup"
    assert deep["toolCallId"] == "d1" and deep["toolName"] == "delete_record"
    assert deep["agentPath"] == ["sup", "data"] and deep["args"] == {"id": "rec-9"}
    assert all(r["agentId"] != "data" for r in body["runs"])

    assert inbox(api, ADMIN, perPage=2)[:2] == ([ops, planner], 3)
    assert inbox(api, ADMIN, perPage=2, page=1)[:2] == ([nested], 3)
    assert inbox(api, ADMIN, page=1)[:2] == ([], 3), "a page without perPage has 100 runs"
    assert error_code(api.get("/inbox", params={"perPage": 0}, headers=ADMIN)) == (422, "INVALID_REQUEST")

    # Decided through the listed ids and fingerprint, the pause leaves the inbox.
    decided = api.post(
        "/agents/sup/approve-tool-call-generate",
        json={"runId": nested, "toolCallId": "d1", "fingerprint": deep["fingerprint"]},
        headers=ADMIN,
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["finishReason"] == "stop"
    assert inbox(api, ADMIN)[:2] == ([ops, planner], 2)


def test_a_key_sees_only_its_resources_and_anonymous_callers_none(api, calls):
    mine = [start(api, "ops", "r1", "a1", A), start(api, "planner", "p", "a2", A)]
    theirs = start(api, "sup", "r2", "b1", B)

    assert inbox(api, A)[:2] == (mine, 2)
    assert inbox(api, B)[:2] == ([theirs], 1)
    assert inbox(api, ADMIN)[:2] == ([*mine, theirs], 3)
    for headers in ({}, {"Authorization": "Bearer nope"}):
        response = api.get("/inbox", headers=headers)
        assert error_code(response) == (401, "UNAUTHENTICATED")
        assert response.headers["www-authenticate"] == "Bearer"
    # Another tenant cannot decide what it cannot see.
    refused = api.post(
        "/agents/ops/approve-tool-call", json={"runId": mine[0], "toolCallId": "call-1"}, headers=B
    )
    assert error_code(refused) == (404, "AGENT_RESUME_NO_SNAPSHOT_FOUND")
    assert calls.count("delete_record") == 0


def test_open_mode_lists_everything_without_a_key(http_server, tmp_path, calls):
    server = http_server(inbox_runtime(tmp_path, calls), open_mode=True)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run = api.post("/agents/ops/generate", json={"messages": "x"}).json()["runId"]
        assert inbox(api, {})[:2] == ([run], 1)


def test_the_page_and_its_files_are_served_without_a_key(server):
    with httpx.Client(base_url=server.url, timeout=30) as web:
        page = web.get("/inbox")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "connect-src 'self'" in page.headers["content-security-policy"]
        assert '<script src="inbox/assets/inbox.js" defer></script>' in page.text
        assert 'href="inbox/assets/inbox.css"' in page.text
        slash = web.get("/inbox/")
        assert slash.status_code == 307 and slash.headers["location"].endswith("/inbox")
        script = web.get("/inbox/assets/inbox.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        assert "/inbox" in script.text and "sessionStorage" in script.text
        style = web.get("/inbox/assets/inbox.css")
        assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
        missing = web.get("/inbox/assets/secret.py")
        assert error_code(missing) == (404, "HTTP_ERROR")
        assert error_code(web.get("/inbox/assets/..%2Fapp.py")) == (404, "HTTP_ERROR")
        # The page is not part of the API document; the JSON listing is.
        paths = web.get("/openapi.json").json()["paths"]
        assert "/api/inbox" in paths and "/inbox" not in paths


def test_changes_are_pushed_as_server_sent_events(server, api):
    """``/api/inbox/events`` sends the listing's first page at once, then only what changed (runs that
    entered, with what the page shows of them, and runs that left), only what the key may see; without a
    key it is refused like the listing."""
    first = start(api, "ops", "rec-1", "a1", A)
    assert error_code(api.get("/inbox/events")) == (401, "UNAUTHENTICATED")
    with api.stream("GET", "/inbox/events", params={"interval": 0.05}, headers=A) as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        frames = (line[len("data: ") :] for line in events.iter_lines() if line.startswith("data: "))
        now = json.loads(next(frames))
        assert now["type"] == "page" and [r["runId"] for r in now["runs"]] == [first]
        assert (now["total"], now["nextCursor"]) == (1, None)
        start(api, "sup", "rec-2", "b1", B)  # another tenant's: nothing to push to this key
        second = start(api, "planner", "lunch", "a2", A)
        pushed = json.loads(next(frames))
        assert pushed["type"] == "changes" and pushed["total"] == 2
        assert [r["runId"] for r in pushed["listed"]] == [second] and pushed["unlisted"] == []
        assert pushed["listed"][0]["toolCalls"][0]["context"]["request"] == "lunch", "shown as listed"
        answer = {"runId": first, "toolCallId": "call-1", "reason": "no"}
        declined = api.post("/agents/ops/decline-tool-call-generate", json=answer, headers=A)
        assert declined.status_code == 200, declined.text
        gone = json.loads(next(frames))
        assert (gone["listed"], gone["unlisted"], gone["total"]) == ([], [first], 1)


def test_an_event_stream_ends_when_its_key_is_revoked_and_follows_its_resources(
    http_server, tmp_path, calls
):
    """The stream checks its key again before each look: a key given other resources gets its first page
    again, as it may see it now; a key removed from the keys file ends its stream with an UNAUTHENTICATED
    frame, before a pause of a resource it could once see is shown to it."""
    path = tmp_path / "keys.json"

    def grant(**resources: list[str]) -> None:
        entries = [{"sha256": digest(k), "subject": k, "resources": r} for k, r in resources.items()]
        write_file(path, {"keys": entries})

    grant(alice=["a1", "a2"], bob=["a1", "a2"])
    server = http_server(inbox_runtime(tmp_path, calls), keys=KeyRing.load(path))
    alice, bob = {"Authorization": "Bearer alice"}, {"Authorization": "Bearer bob"}
    # Frames come every look (a second) here; the stream's keep-alive only after 15 s of quiet.
    with httpx.Client(base_url=server.url + "/api", timeout=httpx.Timeout(30, read=10)) as api:
        first = start(api, "ops", "rec-1", "a1", bob)
        with api.stream("GET", "/inbox/events", params={"interval": 0.05}, headers=alice) as events:
            frames = (json.loads(line[6:]) for line in events.iter_lines() if line.startswith("data: "))
            assert [r["runId"] for r in next(frames)["runs"]] == [first]
            grant(alice=["a2"], bob=["a1", "a2"])  # a1 is no longer hers
            again = next(frames)
            assert (again["type"], again["runs"], again["total"]) == ("page", [], 0)
            grant(bob=["a1", "a2"])  # her key is revoked
            start(api, "planner", "lunch", "a2", bob)
            ended = next(frames)["error"]
            assert (ended["code"], ended["message"]) == ("UNAUTHENTICATED", "unknown API key")
            assert list(frames) == [], "the stream ends"


def test_a_caller_keeps_a_few_event_streams_open_at_most(server, api):
    """Each stream re-reads the caller's paused runs: a fifth one of the same key is refused (429),
    another key is not held back, and a closed stream makes room again."""
    start(api, "ops", "rec-1", "a1", A)
    with contextlib.ExitStack() as open_streams:
        readers = []  # kept: a reader let go of closes its stream
        for _ in range(4):
            stream = open_streams.enter_context(api.stream("GET", "/inbox/events", headers=A))
            assert stream.status_code == 200
            readers.append(stream.iter_lines())
            assert next(readers[-1]).startswith("data: ")  # the first frame: the stream is counted
        with api.stream("GET", "/inbox/events", headers=A) as refused:
            assert refused.status_code == 429
            refused.read()
        assert error_code(refused) == (429, "TOO_MANY_STREAMS") and "close one first" in refused.text
        with api.stream("GET", "/inbox/events", headers=B) as other:
            assert other.status_code == 200
    deadline = time.monotonic() + 20
    while True:  # the server notices each closed stream at its next re-read
        with api.stream("GET", "/inbox/events", headers=A) as again:
            if again.status_code == 200:
                break
        assert time.monotonic() < deadline, "closed streams were never given back"


def test_a_wrong_method_names_the_allowed_ones_and_a_page_needs_no_size(api):
    wrong = api.put("/inbox", headers=A)
    assert error_code(wrong) == (405, "HTTP_ERROR") and wrong.headers["allow"] == "GET"
    start(api, "ops", "rec-1", "a1", A)
    assert inbox(api, A, page=0)[:2] == (inbox(api, A)[0], 1)
    assert inbox(api, A, page=1)[0] == []
    listed = api.get("/agents/ops/suspended-runs", params={"page": 0}, headers=A)
    assert listed.status_code == 200 and listed.json()["total"] == 1


def test_the_server_says_which_surface_a_decision_came_through(server, api, tmp_path):
    """Issue 40: the audit's surface was read from the client's ``X-Troupe-Surface`` header, so any
    caller could claim to be the inbox. The route decides it now: the inbox page's own routes are
    ``inbox``, everything else ``http``, whatever a header says."""
    import asyncio

    from troupe import SqliteStore

    by_api = start(api, "ops", "rec-1", "a1", A)
    by_page = start(api, "ops", "rec-2", "a1", A)
    claimed = api.post(
        "/agents/ops/approve-tool-call", json={"runId": by_api}, headers={**A, "X-Troupe-Surface": "inbox"}
    )
    assert claimed.status_code == 200, claimed.text
    page = api.post("/inbox/agents/ops/approve-tool-call", json={"runId": by_page}, headers=A)
    assert page.status_code == 200, page.text
    schema = httpx.get(f"{server.url}/openapi.json", timeout=30).text
    assert "/api/agents/{agentId}/approve-tool-call" in schema and "/api/inbox/agents/" not in schema

    async def surfaces() -> list[str | None]:
        store = SqliteStore(tmp_path / "inbox.db")
        try:
            return [(await store.list_audit(r))[0].surface for r in (by_api, by_page)]
        finally:
            await store.close()

    assert asyncio.run(surfaces()) == ["http", "inbox"]


def test_the_inbox_is_read_a_page_at_a_time_and_narrowed_by_resource_role_and_age(
    http_server, tmp_path, calls
):
    """``cursor`` follows ``nextCursor`` to the end in the same order; ``resourceId`` narrows within the
    key's own resources (another's is refused); ``role`` lists the calls an approver policy gives that
    role (recorded when they paused); ``fromDate`` the pauses since."""
    from troupe.core.deciding.approvers import ApproverPolicy

    policy = ApproverPolicy(agent="ops", roles=frozenset({"finance"}))
    server = http_server(inbox_runtime(tmp_path, calls, approver_policies=[policy]), keys=KEYS)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        ops = [start(api, "ops", f"rec-{i}", "a1" if i % 2 else "a2", A) for i in range(4)]
        plan = start(api, "planner", "dinner", "a1", A)
        every = [*ops, plan]
        assert inbox(api, A)[:2] == (every, 5)

        seen, cursor = [], None
        while True:
            ids, total, body = inbox(api, A, perPage=2, **({"cursor": cursor} if cursor else {}))
            assert total == 5 and len(ids) <= 2
            seen += ids
            cursor = body["nextCursor"]
            if cursor is None:
                break
        assert seen == every, "the pages of a cursor, in order, each run once"

        assert inbox(api, A, resourceId="a1")[:2] == ([ops[1], ops[3], plan], 3)
        assert error_code(api.get("/inbox", params={"resourceId": "b1"}, headers=A)) == (403, "FORBIDDEN")
        assert inbox(api, ADMIN, role="finance")[:2] == (ops, 4), "ops's approvals need finance"
        assert inbox(api, A, role="finance", resourceId="a2")[:2] == ([ops[0], ops[2]], 2)
        assert inbox(api, ADMIN, role="legal")[:2] == ([], 0)
        since = inbox(api, A)[2]["runs"][3]["suspendedAt"]
        assert inbox(api, A, fromDate=since)[:2] == ([ops[3], plan], 2)
        damaged = api.get("/inbox", params={"cursor": "c1.not-ours"}, headers=A)
        assert error_code(damaged) == (422, "INVALID_PAGINATION")
        other_filters = api.get("/inbox", params={"cursor": body_cursor(api)}, headers=A)
        assert error_code(other_filters) == (422, "INVALID_PAGINATION")


def test_a_made_up_cursor_is_refused_whatever_number_it_holds(api):
    """A cursor is the client's text: one shaped like ours but placed at a number no float can hold (JSON
    reads integers of any length) is refused as damaged by both listings, never a 500."""
    start(api, "ops", "rec-1", "a1", A)
    for at in (10**400, -(10**400), 1e308):
        place = json.dumps(["oldest", at, "r", "0" * 16]).encode()
        cursor = "c1." + base64.urlsafe_b64encode(place).decode().rstrip("=")
        for path in ("/inbox", "/agents/ops/suspended-runs"):
            response = api.get(path, params={"cursor": cursor}, headers=A)
            code = 422, "INVALID_PAGINATION"
            if at == 1e308:  # a finite place: not damaged, only of another listing
                assert error_code(response) == code and "other filters" in response.json()["error"]
            else:
                assert error_code(response) == code, (path, response.text)
                assert "damaged" in response.json()["error"]


def body_cursor(api: httpx.Client) -> str:
    """A cursor of another listing (the admin's, narrowed to a role)."""
    cursor = api.get("/inbox", params={"role": "finance", "perPage": 1}, headers=ADMIN).json()["nextCursor"]
    assert isinstance(cursor, str)
    return cursor


async def test_an_inbox_stream_leaves_out_a_run_it_cannot_read_and_goes_on(tmp_path, calls):
    """A run that entered the listings and that this Troupe cannot read (a newer Troupe's, sharing the
    store) failed every look of every open inbox stream, for good: the stream stays where it was when a
    look fails, so it read the same run again. It is left out; the run beside it is sent."""
    import sqlite3
    from contextlib import closing

    from helpers import delete_tool, one_call
    from troupe.api.inbox import inbox_json, run_json
    from troupe.api.inbox_feed import InboxFeed
    from troupe.core.vocabulary.identity import Principal

    from troupe import Agent, Runtime, SqliteStore

    db = tmp_path / "feed.db"
    agent = Agent("ops", model=one_call("delete_record", {"id": "abc-123"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(db), executor="local")
    try:
        admin = Principal(issuer="local", subject="admin", name="admin", admin=True)
        feed = InboxFeed(runtime, admin, inbox_json, run_json)
        assert (await feed.next() or {}).get("total") == 0
        newer = (await agent.generate("delete abc-123")).run_id
        with closing(sqlite3.connect(db)) as raw, raw:
            body = json.loads(raw.execute("SELECT body FROM runs WHERE run_id = ?", (newer,)).fetchone()[0])
            body["schema_version"] = 99
            raw.execute("UPDATE runs SET body = ? WHERE run_id = ?", (json.dumps(body), newer))
        readable = (await agent.generate("delete abc-123")).run_id

        pushed = await feed.next()
        assert pushed is not None and pushed["type"] == "changes"
        assert [r["runId"] for r in pushed["listed"]] == [readable]
        assert pushed["total"] == 2, "the run left out still waits"
    finally:
        await runtime.shutdown()
