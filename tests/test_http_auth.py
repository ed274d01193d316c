"""Isolation over HTTP: a key sees and decides only runs of its own resources; anonymous callers get 401
unless the app is in open mode; an admin key sees everything."""

from __future__ import annotations

import httpx
import pytest
from http_server import ADMIN, KEYS, A, B, runtime_factory, sse_frames


@pytest.fixture
def server(http_server, tmp_path, calls):
    return http_server(runtime_factory(tmp_path, calls), keys=KEYS)


@pytest.fixture
def api(server):
    with httpx.Client(base_url=server.url + "/api", timeout=30) as client:
        yield client


def start(api, agent: str, resource: str, headers, thread: str = "t") -> str:
    body = {"messages": "go", "resourceId": resource, "threadId": thread}
    response = api.post(f"/agents/{agent}/generate", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["finishReason"] == "suspended"
    return response.json()["runId"]


def status(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["code"]


def test_anonymous_and_unknown_keys_get_401_everywhere(api):
    calls = [
        ("GET", "/agents", None),
        ("GET", "/agents/ops", None),
        ("POST", "/agents/ops/stream", {"messages": "x"}),
        ("POST", "/agents/ops/generate", {"messages": "x"}),
        ("POST", "/agents/ops/approve-tool-call", {"runId": "r", "toolCallId": "c"}),
        ("POST", "/agents/ops/decline-tool-call-generate", {"runId": "r", "toolCallId": "c"}),
        ("POST", "/agents/ops/resume-stream", {"runId": "r", "resumeData": {}}),
        ("POST", "/agents/ops/send-tool-approval", {"threadId": "t", "approved": True}),
        ("GET", "/agents/ops/suspended-runs", None),
    ]
    for method, path, body in calls:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic key-a"}):
            response = api.request(method, path, json=body, headers=headers)
            assert status(response) == (401, "UNAUTHENTICATED"), (method, path, headers)
            assert response.headers["www-authenticate"] == "Bearer"


def test_open_mode_lets_anonymous_callers_in_but_not_bad_keys(http_server, tmp_path, calls):
    server = http_server(runtime_factory(tmp_path, calls), open_mode=True)
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:
        run_id = api.post("/agents/ops/generate", json={"messages": "x"}).json()["runId"]
        assert api.get("/agents/ops/suspended-runs").json()["runs"][0]["runId"] == run_id
        bad = api.get("/agents", headers={"Authorization": "Bearer nope"})
        assert status(bad) == (401, "UNAUTHENTICATED")


def test_a_key_starts_runs_only_on_its_own_resources(api):
    assert status(api.post("/agents/ops/stream", json={"messages": "x"}, headers=A)) == (
        422,
        "INVALID_REQUEST",
    )
    foreign = {"messages": "x", "resourceId": "b1"}
    assert status(api.post("/agents/ops/stream", json=foreign, headers=A)) == (403, "FORBIDDEN")
    via_memory = {"messages": "x", "memory": {"thread": "t", "resource": "b1"}}
    assert status(api.post("/agents/ops/generate", json=via_memory, headers=A)) == (403, "FORBIDDEN")
    own = api.post(
        "/agents/ops/stream", json={"messages": "x", "memory": {"thread": "t", "resource": "a2"}}, headers=A
    )
    assert own.status_code == 200
    assert api.get("/agents", headers=B).status_code == 200, "every key may read the agent definitions"


def test_a_key_with_one_resource_uses_it_unnamed_and_a_key_with_several_must_name_one(api):
    started = api.post("/agents/ops/generate", json={"messages": "x", "threadId": "t"}, headers=B)
    assert started.status_code == 200, started.text
    [run] = api.get("/agents/ops/suspended-runs", headers=B).json()["runs"]
    assert (run["runId"], run["resourceId"]) == (started.json()["runId"], "b1")

    several = api.post("/agents/ops/generate", json={"messages": "x"}, headers=A)
    assert status(several) == (422, "INVALID_REQUEST")
    assert "'tenant-a' has several resources ('a1', 'a2'): name one" in several.json()["error"]
    assert several.json()["details"]["resources"] == ["a1", "a2"]
    assert api.get("/agents/ops/suspended-runs", headers=A).json()["runs"] == []  # nothing started


def test_another_tenant_never_decides_a_run_and_it_stays_paused(api, calls):
    ops_run = start(api, "ops", "a1", A)
    planner_run = start(api, "planner", "a1", A)
    attempts = [
        ("ops", "approve-tool-call", {"runId": ops_run, "toolCallId": "call-1"}),
        ("ops", "decline-tool-call", {"runId": ops_run, "toolCallId": "call-1"}),
        ("ops", "approve-tool-call-generate", {"runId": ops_run, "toolCallId": "call-1"}),
        ("ops", "decline-tool-call-generate", {"runId": ops_run, "toolCallId": "call-1", "reason": "x"}),
        ("planner", "resume-stream", {"runId": planner_run, "resumeData": {"city": "Rome"}}),
        ("planner", "resume-generate", {"runId": planner_run, "resumeData": {"city": "Rome"}}),
    ]
    unknown = api.post("/agents/ops/approve-tool-call", json={"runId": "nope", "toolCallId": "c"}, headers=B)
    assert status(unknown) == (404, "AGENT_RESUME_NO_SNAPSHOT_FOUND")
    for agent, route, body in attempts:
        # Someone else's run is answered exactly as an unknown one: nothing says it exists, or whose it is.
        refused = api.post(f"/agents/{agent}/{route}", json=body, headers=B)
        assert status(refused) == (404, "AGENT_RESUME_NO_SNAPSHOT_FOUND"), route
        assert refused.text == unknown.text.replace("nope", body["runId"]).replace("'ops'", repr(agent))

    # Nor through the thread: B cannot name A's resource, and under its own (named, or its only one
    # unnamed) it finds nothing there.
    approval = {"threadId": "t", "approved": True, "toolCallId": "call-1"}
    theirs = {**approval, "resourceId": "a1"}
    assert status(api.post("/agents/ops/send-tool-approval", json=theirs, headers=B)) == (403, "FORBIDDEN")
    for mine in ({**approval, "resourceId": "b1"}, approval):
        assert status(api.post("/agents/ops/send-tool-approval", json=mine, headers=B)) == (
            404,
            "AGENT_NO_SUSPENDED_RUN",
        )

    assert calls.count("delete_record") == 0
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend"], "never resumed"
    listed = api.get("/agents/ops/suspended-runs", headers=A).json()
    assert [r["runId"] for r in listed["runs"]] == [ops_run]
    # The owner (and an admin) still can.
    owner = api.post(
        "/agents/ops/approve-tool-call", json={"runId": ops_run, "toolCallId": "call-1"}, headers=A
    )
    assert sse_frames(owner.text)[-2]["payload"]["finishReason"] == "stop"
    admin = api.post(
        "/agents/planner/resume-generate",
        json={"runId": planner_run, "resumeData": {"city": "Rome"}},
        headers=ADMIN,
    )
    assert admin.json()["finishReason"] == "stop"
    assert calls.count("delete_record") == 1


def test_listing_shows_a_key_only_its_resources_merged_and_paged(api):
    mine = [start(api, "ops", r, A) for r in ("a1", "a2", "a1", "a2")]
    theirs = [start(api, "ops", "b1", B) for _ in range(2)]

    def listing(headers, **query):
        response = api.get("/agents/ops/suspended-runs", params=query, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        return [r["runId"] for r in body["runs"]], body["total"]

    assert listing(A) == (mine[::-1], 4), "both resources, merged newest first"
    assert listing(A, perPage=3, page=0) == (mine[::-1][:3], 4)
    assert listing(A, perPage=3, page=1) == (mine[::-1][3:], 4)
    assert listing(A, resourceId="a2") == ([mine[3], mine[1]], 2)
    assert listing(B) == (theirs[::-1], 2)
    assert listing(ADMIN) == ((mine + theirs)[::-1], 6)
    assert status(api.get("/agents/ops/suspended-runs", params={"resourceId": "b1"}, headers=A)) == (
        403,
        "FORBIDDEN",
    )
    assert listing(A, page=1) == ([], 4), "a page without perPage has 100 runs"


def test_a_finished_run_is_still_its_tenants_and_no_one_elses(api, calls):
    run_id = start(api, "ops", "a1", A)
    call_id = api.get("/agents/ops/suspended-runs", headers=A).json()["runs"][0]["toolCalls"][0]["toolCallId"]
    decide = {"runId": run_id, "toolCallId": call_id}
    assert api.post("/agents/ops/approve-tool-call-generate", json=decide, headers=A).status_code == 200

    # The snapshot is gone, yet the audit log still says whose the run was: the owner hears that the
    # call was decided already, another tenant hears nothing about it.
    assert status(api.post("/agents/ops/decline-tool-call-generate", json=decide, headers=A)) == (
        409,
        "AGENT_DECISION_CONFLICT",
    )
    assert status(api.post("/agents/ops/decline-tool-call-generate", json=decide, headers=B)) == (
        404,
        "AGENT_RESUME_NO_SNAPSHOT_FOUND",
    )
    # Nor can anyone start a new run under the finished one's id and mix into its audit trail.
    reuse = {"messages": "delete", "resourceId": "b1", "runId": run_id}
    assert status(api.post("/agents/ops/generate", json=reuse, headers=B)) == (409, "AGENT_RUN_EXISTS")


def test_a_key_removed_from_the_keys_file_stops_working_at_once(http_server, tmp_path, calls, caplog):
    """Issue 40: the keys file was read once at start, so a revoked key worked until a restart. It is
    read again whenever it changes (no signal, no restart); a file that breaks keeps the last keys, and
    says so in the log. And a key's digest, as the file stores it, is never a key itself."""
    from troupe.api.keys import KeyRing, digest, new_key, write_file

    file = tmp_path / "keys.json"
    alice, bob = new_key(), new_key()

    def entry(key: str, subject: str) -> dict:
        return {"sha256": digest(key), "subject": subject, "resources": ["a1"]}

    write_file(file, {"keys": [entry(alice, "alice"), entry(bob, "bob")]})
    server = http_server(runtime_factory(tmp_path, calls), keys=KeyRing.load(file))
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api:

        def status_of(key: str) -> int:
            return api.get("/agents", headers={"Authorization": f"Bearer {key}"}).status_code

        assert (status_of(alice), status_of(bob)) == (200, 200)
        assert status_of(digest(alice)) == 401, "what keys.json holds is not a key"

        write_file(file, {"keys": [entry(bob, "bob")]})  # alice's key revoked
        assert (status_of(alice), status_of(bob)) == (401, 200)

        file.write_text('{"keys": [{"sha256": ')  # half-written by hand
        assert (status_of(alice), status_of(bob)) == (401, 200), "the keys read last stay in use"
        assert any("could not be read again" in r.getMessage() for r in caplog.records)
        assert not any(bob in r.getMessage() or digest(bob) in r.getMessage() for r in caplog.records)

        write_file(file, {"keys": [entry(alice, "alice")]})
        assert (status_of(alice), status_of(bob)) == (200, 401)
