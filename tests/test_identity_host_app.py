"""Troupe inside a team's own FastAPI app: its login (a session cookie), its ``Depends(current_user)`` and
its own routes; Troupe's router mounted under ``/troupe`` with the app's dependency naming the principal.
Its users start and decide with their sessions; separation of duties holds; a user of another tenant
sees and decides nothing. Real uvicorn, real httpx."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import httpx
import pytest
from fastapi import Cookie, Depends, FastAPI, HTTPException
from http_server import ops_agents
from test_decision_links import SIGNER
from troupe.api.app import troupe_router
from troupe.core.deciding.approvers import ApproverPolicy
from troupe.core.notifying.outbox import Notifications
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.state import fingerprint

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog

IDP = "https://login.team.example"


@dataclass(frozen=True)
class User:
    id: str
    name: str
    team: str
    roles: tuple[str, ...] = ()


SESSIONS = {
    "s-alice": User("u1", "Alice", "acme", ("approver",)),
    "s-bob": User("u2", "Bob", "acme", ("approver",)),
    "s-mallory": User("u3", "Mallory", "globex", ("approver",)),
}


def current_user(session: Annotated[str | None, Cookie()] = None) -> User:
    """The team's own dependency: who is signed in, from its session cookie."""
    user = SESSIONS.get(session or "")
    if user is None:
        raise HTTPException(401, "sign in first")
    return user


async def troupe_principal(user: Annotated[User, Depends(current_user)]) -> Principal:
    return Principal(user.id, IDP, user.name, resources=frozenset({user.team}), roles=frozenset(user.roles))


def host_app(runtime: Runtime) -> FastAPI:
    # Lenient about content types, as FastAPI was before 0.132 (and any app may be): Troupe's routes must
    # not count on the framework to refuse a JSON body sent as text.
    app = FastAPI(strict_content_type=False)

    @app.get("/me")
    def me(user: Annotated[User, Depends(current_user)]) -> dict[str, str]:
        return {"name": user.name}

    app.include_router(troupe_router(runtime, identity=troupe_principal), prefix="/troupe")
    return app


@pytest.fixture
def server(http_server, tmp_path, calls: CallLog):
    policy = ApproverPolicy(agent="ops", roles=frozenset({"approver"}), separation_of_duties=True)

    def build() -> Runtime:
        return Runtime(
            ops_agents(calls)[:1],
            storage=SqliteStore(tmp_path / "host.db"),
            executor="local",
            notifications=Notifications((), links=SIGNER),
            approver_policies=[policy],
        )

    return http_server(build, make_app=host_app)


def session(server, name: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, cookies={"session": name}, timeout=30)


def test_the_apps_users_decide_with_its_own_sessions(server, calls: CallLog):
    api = "/troupe/api/agents/ops"
    with session(server, "s-alice") as alice, session(server, "s-bob") as bob:
        assert alice.get("/me").json() == {"name": "Alice"}, "the app's own routes are untouched"
        started = alice.post(f"{api}/generate", json={"messages": "go", "resourceId": "acme"})
        assert started.status_code == 200 and started.json()["finishReason"] == "suspended", started.text
        decide = {"runId": started.json()["runId"], "toolCallId": "call-1"}

        mine = alice.post(f"{api}/approve-tool-call", json=decide)
        assert mine.status_code == 403 and "separation of duties" in mine.json()["error"]
        listed = bob.get("/troupe/api/inbox").json()
        assert listed["runs"][0]["startedBy"] == "Alice"
        assert listed["runs"][0]["starter"] == {
            "name": "Alice",
            "subject": "u1",
            "issuer": IDP,
            "surface": None,
        }
        assert bob.get("/troupe/inbox").status_code == 200, "the inbox page, under the app's prefix"

        done = bob.post(f"{api}/approve-tool-call-generate", json=decide)
        assert done.status_code == 200 and done.json()["finishReason"] == "stop", done.text
    assert calls.count() == 1


def test_no_session_is_401_and_another_tenant_sees_and_decides_nothing(server, calls: CallLog, tmp_path):
    api = "/troupe/api/agents/ops"
    with session(server, "s-alice") as alice, session(server, "s-mallory") as mallory:
        run_id = alice.post(f"{api}/generate", json={"messages": "go", "resourceId": "acme"}).json()["runId"]
        with httpx.Client(base_url=server.url, timeout=30) as nobody:
            refused = nobody.get("/troupe/api/inbox")  # the app's own dependency refuses: its 401 stands
            assert refused.status_code == 401 and refused.json()["error"] == "sign in first"
            assert nobody.post(f"{api}/approve-tool-call", json={"runId": run_id}).status_code == 401

        assert mallory.get("/troupe/api/inbox").json() == {"runs": [], "total": 0, "nextCursor": None}
        assert mallory.get(f"{api}/suspended-runs").json()["runs"] == []
        theirs = mallory.post(f"{api}/approve-tool-call", json={"runId": run_id, "toolCallId": "call-1"})
        assert theirs.status_code == 404, "someone else's run is answered as an unknown one"
        foreign = mallory.post(f"{api}/generate", json={"messages": "go", "resourceId": "acme"})
        assert foreign.status_code == 403
        link = f"/troupe/decide/{_token(tmp_path / 'host.db', run_id)}"
        assert mallory.post(link).status_code == 409, "nor through a link: not her run"
        assert alice.get(f"{api}/suspended-runs").json()["runs"][0]["runId"] == run_id
    assert calls.count() == 0


def test_a_decision_link_under_the_app_decides_as_the_signed_in_user(server, calls: CallLog, tmp_path):
    api = "/troupe/api/agents/ops"
    with session(server, "s-alice") as alice, session(server, "s-bob") as bob:
        run_id = alice.post(f"{api}/generate", json={"messages": "go", "resourceId": "acme"}).json()["runId"]
        link = f"/troupe/decide/{_token(tmp_path / 'host.db', run_id)}"
        with httpx.Client(base_url=server.url, timeout=30) as nobody:
            assert nobody.post(link).status_code == 401, "the app's login guards its links too"
        assert alice.post(link).status_code == 403, "the starter's session: separation of duties"
        done = bob.post(link)
        assert done.status_code == 200 and "Approved by Bob" in done.text
        deadline = time.monotonic() + 20
        while calls.count() < 1:
            assert time.monotonic() < deadline
            bob.get("/me")  # a round trip, not a sleep: the run carries on in the server meanwhile
    assert calls.count() == 1


def test_a_link_posted_from_another_site_under_the_apps_session_decides_nothing(
    server, calls: CallLog, tmp_path
):
    """Issue 40, MEDIUM 3: a page on another site posted bob's link as a form, with bob's session cookie,
    and the tool ran. Now the POST is refused when the browser says it came from elsewhere
    (``Sec-Fetch-Site``, else ``Origin``); the link's own page (same-origin) still decides."""
    api = "/troupe/api/agents/ops"
    form = {"content-type": "application/x-www-form-urlencoded"}
    with session(server, "s-alice") as alice, session(server, "s-bob") as bob:
        run_id = alice.post(f"{api}/generate", json={"messages": "go", "resourceId": "acme"}).json()["runId"]
        link = f"/troupe/decide/{_token(tmp_path / 'host.db', run_id)}"
        for headers in (
            {"origin": "https://evil.example"},
            {"origin": "null"},
            {"origin": server.url.replace("127.0.0.1", "localhost")},
            {"sec-fetch-site": "cross-site", "origin": "https://evil.example"},
            {"sec-fetch-site": "same-site", "origin": server.url},  # another port of the same host
        ):
            refused = bob.post(link, content=b"", headers={**form, **headers})
            assert refused.status_code == 403 and "another site" in refused.text, headers
        assert calls.count() == 0
        assert bob.get(f"{api}/suspended-runs").json()["runs"][0]["runId"] == run_id, "still paused"
        # What a browser sends from the link's own page: same-origin (and an Origin, or "null").
        own = {**form, "sec-fetch-site": "same-origin", "origin": "null"}
        done = bob.post(link, content=b"", headers=own)
        assert done.status_code == 200 and "Approved by Bob" in done.text
        deadline = time.monotonic() + 20
        while calls.count() < 1:
            assert time.monotonic() < deadline
            bob.get("/me")
    assert calls.count() == 1


def test_a_json_route_refuses_what_another_site_could_send_under_the_apps_session(server, calls: CallLog):
    """A page elsewhere can make bob's browser POST a JSON text with no content type (a no-cors fetch of
    a Blob), his session cookie included, and no preflight: the framework here parses it as JSON, so only
    Troupe's own check stands between it and the decision. What needs a preflight passes."""
    api = "/troupe/api/agents/ops"
    with session(server, "s-alice") as alice, session(server, "s-bob") as bob:
        run_id = alice.post(f"{api}/generate", json={"messages": "go", "resourceId": "acme"}).json()["runId"]
        body = json.dumps({"runId": run_id, "toolCallId": "call-1"}).encode()
        for headers in (
            {"sec-fetch-site": "cross-site", "origin": "https://evil.example"},
            {"sec-fetch-site": "cross-site", "origin": "https://evil.example", "content-type": "text/plain"},
            {"origin": "https://evil.example"},  # an older browser: no Sec-Fetch-Site
        ):
            for route in ("approve-tool-call-generate", "decline-tool-call", "cancel-run"):
                refused = bob.post(f"{api}/{route}", content=body, headers=headers)
                assert refused.status_code == 403, (route, headers, refused.text)
                assert "another site" in refused.json()["error"]
        assert calls.count() == 0
        assert bob.get(f"{api}/suspended-runs").json()["runs"][0]["runId"] == run_id, "still paused"
        # The same bytes as application/json (which another site can only send after a preflight) pass.
        done = bob.post(
            f"{api}/approve-tool-call-generate",
            content=body,
            headers={"content-type": "application/json", "sec-fetch-site": "same-origin"},
        )
        assert done.status_code == 200 and done.json()["finishReason"] == "stop", done.text
    assert calls.count() == 1


def _token(db: Path, run_id: str) -> str:
    """An approve link's token for the paused call, issued into the server's store as a host app would."""
    import asyncio

    fp = fingerprint("call-1", "delete_record", {"id": "abc-123"})
    data = {"kind": "approval", "agentId": "ops", "runId": run_id, "toolCallId": "call-1", "fingerprint": fp}

    async def issue() -> str:
        store = SqliteStore(db)
        try:
            return str((await SIGNER.issue(store, data))["approve"]).rsplit("/", 1)[1]
        finally:
            await store.close()

    return asyncio.run(issue())


def test_an_async_callable_on_the_request_names_the_principal_or_leaves_it_to_keys(
    http_server, tmp_path, calls: CallLog
):
    """``create_app(runtime, identity=who)`` with a plain ``async def who(request)``: a principal where
    it knows the caller, None (then Troupe's own keys answer, and 401 without one) where it does not."""
    from troupe.api.app import create_app

    async def who(request):
        user = request.headers.get("x-forwarded-user")  # set by the proxy in front, in this story
        return Principal(user, IDP, resources=frozenset({"acme"})) if user else None

    def build() -> Runtime:
        return Runtime(ops_agents(calls)[:1], storage=SqliteStore(tmp_path / "who.db"), executor="local")

    keys = {"key-bot": {"subject": "bot", "resources": ["acme"]}}
    server = http_server(build, make_app=lambda rt: create_app(rt, identity=who, keys=keys))
    body = {"messages": "go", "resourceId": "acme"}
    with httpx.Client(base_url=server.url + "/api/agents/ops", timeout=30) as api:
        by_proxy = api.post("/generate", json=body, headers={"x-forwarded-user": "u9"})
        assert by_proxy.status_code == 200, by_proxy.text
        by_key = api.post("/generate", json=body, headers={"Authorization": "Bearer key-bot"})
        assert by_key.status_code == 200
        nobody = api.post("/generate", json=body)
        assert nobody.status_code == 401 and nobody.json()["code"] == "UNAUTHENTICATED"
    assert calls.count() == 0


def test_an_event_stream_under_the_apps_login_ends_when_its_session_does(server, monkeypatch):
    """The app's own dependency is asked again before each look of an inbox event stream: once alice's
    session ends (she signed out), her stream ends with an UNAUTHENTICATED frame before a new pause of
    her team is shown to it."""
    generate = "/troupe/api/agents/ops/generate"
    with session(server, "s-alice") as alice, session(server, "s-bob") as bob:
        alice.timeout = httpx.Timeout(30, read=10)  # a look every second; a keep-alive only after 15 s
        with alice.stream("GET", "/troupe/api/inbox/events", params={"interval": 0.05}) as events:
            frames = (json.loads(line[6:]) for line in events.iter_lines() if line.startswith("data: "))
            assert next(frames)["total"] == 0
            first = bob.post(generate, json={"messages": "go", "resourceId": "acme"}).json()["runId"]
            assert [r["runId"] for r in next(frames)["listed"]] == [first], "while her session holds"
            monkeypatch.delitem(SESSIONS, "s-alice")  # she signs out: the app forgets her session
            assert alice.get("/me").status_code == 401
            bob.post(generate, json={"messages": "again", "resourceId": "acme"})
            ended = next(frames)["error"]
            assert ended["code"] == "UNAUTHENTICATED" and "signed out" in ended["message"], ended
            assert list(frames) == [], "the stream ends"
