"""OIDC bearer tokens against a local issuer on 127.0.0.1 (keys made here, JWKS served over HTTP):
valid RS256 and ES256 tokens decide; expired, premature, foreign, unsigned, HMAC-forged, unknown-key and
tampered tokens are 401 and change nothing; a rotated key is picked up; roles come from claims; and
one subject reached by key, token, link and CLI is one person for separation of duties and quorum."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from http_server import runtime_factory, sse_frames
from oidc_issuer import AUDIENCE, Issuer
from test_decision_links import SIGNER
from troupe.api.tokens import OidcSettings
from troupe.core.deciding.approvers import ApproverPolicy
from troupe.core.vocabulary.state import fingerprint

from troupe import Runtime, SqliteStore
from troupe.cli import main
from troupe.testing import CallLog


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    found = Issuer()
    yield found
    found.stop()


def settings(issuer: Issuer, **more) -> OidcSettings:
    return OidcSettings(issuer=issuer.url, audience=AUDIENCE, jwks_url=issuer.jwks_url, **more)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def policed(tmp_path: Path, calls: CallLog, *policies: ApproverPolicy):
    def build() -> Runtime:
        base = runtime_factory(tmp_path, calls)()
        return Runtime(
            [base.get_agent("ops")],
            storage=SqliteStore(tmp_path / "http.db"),
            executor="local",
            approver_policies=policies,
        )

    return build


def start(api: httpx.Client, headers: dict[str, str], resource: str = "acme") -> str:
    started = api.post("/generate", json={"messages": "go", "resourceId": resource}, headers=headers)
    assert started.status_code == 200, started.text
    assert started.json()["finishReason"] == "suspended"
    return str(started.json()["runId"])


def test_tokens_are_checked_before_anything_changes(http_server, tmp_path, calls, issuer):
    dba = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
    # A rotated key is fetched as soon as a token names it (the refetch cooldown, here a millisecond).
    server = http_server(policed(tmp_path, calls, dba), oidc=settings(issuer, jwks_cooldown_s=0.001))
    resources = {"troupe_resources": ["acme"]}
    with httpx.Client(base_url=server.url + "/api/agents/ops", timeout=30) as api:
        run_id = start(api, bearer(issuer.token("u-alice", kid="ec-1", **resources)))  # ES256
        decide = {"runId": run_id, "toolCallId": "call-1"}
        dba_claims = {**resources, "roles": ["dba"]}
        forged = {
            "expired": issuer.token("u-dana", exp=int(time.time()) - 600, **dba_claims),
            "not yet valid": issuer.token("u-dana", nbf=int(time.time()) + 600, **dba_claims),
            "wrong audience": issuer.token("u-dana", aud="someone-else", **dba_claims),
            "wrong issuer": issuer.token("u-dana", iss="https://evil.example", **dba_claims),
            "alg none": issuer.unsigned("u-dana", **dba_claims),
            "HS256 keyed with the public key": issuer.hmac_with_public_key("u-dana", **dba_claims),
            "unknown kid": issuer.token("u-dana", kid="rsa-1", **dba_claims).replace(
                issuer.token("u-dana", kid="rsa-1").split(".")[0], _header("nope")
            ),
            "tampered payload": issuer.tampered("u-dana", **dba_claims),
        }
        for why, token in forged.items():
            refused = api.post("/approve-tool-call-generate", json=decide, headers=bearer(token))
            assert refused.status_code == 401, (why, refused.text)
            assert refused.json()["code"] == "UNAUTHENTICATED" and token not in refused.text, why
        listed = api.get("/suspended-runs", headers=bearer(issuer.token("u-x", **resources))).json()
        assert [r["runId"] for r in listed["runs"]] == [run_id] and calls.count() == 0

        no_role = api.post(
            "/approve-tool-call", json=decide, headers=bearer(issuer.token("u-eve", **resources))
        )
        assert no_role.status_code == 403 and "needs one of the roles" in no_role.json()["error"]

        fresh = issuer.rotate()  # the issuer publishes a new key and signs with it from now on
        done = api.post(
            "/approve-tool-call-generate",
            json=decide,
            headers=bearer(issuer.token("u-dana", kid=fresh.kid, **dba_claims)),
        )
        assert done.status_code == 200 and done.json()["finishReason"] == "stop", done.text
    assert calls.count() == 1


def _header(kid: str) -> str:
    import base64

    raw = json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_tokens_resources_bound_what_it_sees(http_server, tmp_path, calls, issuer):
    server = http_server(runtime_factory(tmp_path, calls), oidc=settings(issuer))
    with httpx.Client(base_url=server.url + "/api/agents/ops", timeout=30) as api:
        theirs = start(api, bearer(issuer.token("u-a", troupe_resources=["a1"])), resource="a1")
        other = bearer(issuer.token("u-b", troupe_resources=["b1"]))
        assert api.get("/suspended-runs", headers=other).json()["runs"] == []
        refused = api.post(
            "/approve-tool-call", json={"runId": theirs, "toolCallId": "call-1"}, headers=other
        )
        assert refused.status_code == 404
        nothing = bearer(issuer.token("u-c"))  # no resources claim: sees nothing, starts nothing
        assert (
            api.post("/generate", json={"messages": "x", "resourceId": "a1"}, headers=nothing).status_code
            == 403
        )
    assert calls.count() == 0


def test_oidc_settings_refuse_none_and_hmac(issuer):
    for algorithms in (("none",), ("HS256",), ("RS256", "HS512"), ()):
        with pytest.raises(ValueError, match="not allowed"):
            settings(issuer, algorithms=algorithms)
    with pytest.raises(ValueError, match="leeway"):
        settings(issuer, leeway_s=3600)
    with pytest.raises(ValueError, match="exactly one"):
        OidcSettings(issuer=issuer.url, audience=AUDIENCE)


# ---- one subject on every surface ----------------------------------------------------------------------


@pytest.fixture
def one_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "http.db"
    monkeypatch.setenv("TROUPE_TEST_STORE", str(db))
    monkeypatch.setenv("TROUPE_TEST_CALLS", str(tmp_path / "calls.jsonl"))
    return db


def test_one_subject_by_key_token_link_and_cli_is_one_person(
    http_server, tmp_path, calls, issuer, one_store, capsys
):
    """Separation of duties and a quorum of two (identity_app.POLICY) over every surface: alice starts
    with a token; her key (same issuer and subject), her token, the link (with her token, and with
    nothing) and the CLI as her are all refused; bob approving on the CLI is counted once, and his
    token, key and link after that are 'already approved'; carol's link approval runs the tool."""
    from identity_app import runtime as identity_runtime

    iss = issuer.url
    keys = {
        "key-alice": {"subject": "u-alice", "issuer": iss, "resources": ["acme"]},
        "key-bob": {"subject": "u-bob", "issuer": iss, "resources": ["acme"]},
    }
    server = http_server(identity_runtime, keys=keys, oidc=settings(issuer))
    acme = {"troupe_resources": ["acme"]}
    alice, bob, carol = (bearer(issuer.token(f"u-{who}", **acme)) for who in ("alice", "bob", "carol"))
    with httpx.Client(base_url=server.url, timeout=30) as http:
        api = "/api/agents/ops"
        started = http.post(f"{api}/generate", json={"messages": "go", "resourceId": "acme"}, headers=alice)
        run_id = started.json()["runId"]
        decide = {"runId": run_id, "toolCallId": "call-1"}
        link = _link(one_store, run_id)

        def refused(response: httpx.Response, why: str) -> None:
            assert response.status_code == 403, response.text
            assert why in (
                response.json()["error"]
                if response.headers["content-type"].startswith("application/json")
                else response.text.replace("&#x27;", "'")
            )

        refused(
            http.post(f"{api}/approve-tool-call", json=decide, headers=bearer("key-alice")),
            "separation of duties",
        )
        refused(http.post(f"{api}/approve-tool-call", json=decide, headers=alice), "separation of duties")
        refused(http.post(link, data={"key": alice["Authorization"][7:]}), "separation of duties")
        refused(http.post(link, headers=alice), "separation of duties")
        refused(http.post(link), "says who they are")
        cli = ["approve", run_id, "call-1", "--app", "identity_app:runtime", "--issuer", iss]
        assert main([*cli, "--as", "u-alice"]) == 1
        assert "separation of duties" in capsys.readouterr().err
        assert calls.count() == 0

        assert main([*cli, "--as", "u-bob"]) == 0, "bob's CLI approval counts, once"
        capsys.readouterr()
        refused(http.post(f"{api}/approve-tool-call", json=decide, headers=bob), "already approved")
        refused(
            http.post(f"{api}/approve-tool-call", json=decide, headers=bearer("key-bob")), "already approved"
        )
        refused(http.post(link, data={"key": bob["Authorization"][7:]}), "already approved")
        inbox = http.get("/api/inbox", headers=carol).json()
        (call,) = inbox["runs"][0]["toolCalls"]
        assert inbox["runs"][0]["startedBy"] == "u-alice" and call["approvals"] == ["u-bob"]
        assert calls.count() == 0

        done = http.post(link, data={"key": carol["Authorization"][7:]})
        assert done.status_code == 200, done.text
    _until(lambda: calls.count() == 1)
    audit = _audit(one_store, run_id)
    assert [(e["kind"], e["subject"], e["issuer"], e["surface"]) for e in audit] == [
        ("approval-recorded", "u-bob", iss, "cli"),
        ("approved", "u-carol", iss, "link"),
    ]


def _link(db: Path, run_id: str) -> str:
    """An approve link for the paused call, issued into the server's store as a host app would."""
    import asyncio

    fp = fingerprint("call-1", "delete_record", {"id": "abc-123"})
    data = {"kind": "approval", "agentId": "ops", "runId": run_id, "toolCallId": "call-1", "fingerprint": fp}

    async def issue() -> str:
        store = SqliteStore(db)
        try:
            return urlsplit((await SIGNER.issue(store, data))["approve"]).path
        finally:
            await store.close()

    return asyncio.run(issue())


def _until(done, timeout: float = 20) -> None:
    import threading

    deadline = time.monotonic() + timeout
    event = threading.Event()
    while not done():
        assert time.monotonic() < deadline, "timed out"
        event.wait(0.02)


def _audit(db: Path, run_id: str) -> list[dict]:
    import asyncio

    async def read() -> list[dict]:
        store = SqliteStore(db)
        try:
            return [e.model_dump() for e in await store.list_audit(run_id)]
        finally:
            await store.close()

    return asyncio.run(read())


def test_streams_show_the_pause_to_a_token_holder(http_server, tmp_path, calls, issuer):
    server = http_server(runtime_factory(tmp_path, calls), oidc=settings(issuer))
    with httpx.Client(base_url=server.url + "/api/agents/ops", timeout=30) as api:
        body = {"messages": "go", "resourceId": "a1"}
        streamed = api.post(
            "/stream", json=body, headers=bearer(issuer.token("u-a", troupe_resources=["a1"]))
        )
        frames = [f for f in sse_frames(streamed.text) if f != "[DONE]"]
        assert frames[-1]["type"] == "tool-call-approval"


async def test_keys_from_a_jwks_file_are_read_again_when_it_changes(tmp_path: Path, issuer):
    from troupe.api.errors import AuthenticationError
    from troupe.api.tokens import TokenVerifier

    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [issuer.keys["ec-1"].jwk()]}))
    verifier = TokenVerifier(OidcSettings(issuer=issuer.url, audience=AUDIENCE, jwks_file=str(jwks)))
    assert (await verifier.principal(issuer.token("u-1", kid="ec-1"))).subject == "u-1"
    fresh = issuer.rotate()
    with pytest.raises(AuthenticationError, match="unknown kid"):
        await verifier.principal(issuer.token("u-1", kid=fresh.kid))
    jwks.write_text(json.dumps({"keys": [fresh.jwk()]}))
    os.utime(jwks, ns=(time.time_ns(), time.time_ns() + 1_000_000))  # a new mtime, however fast the disk
    assert (await verifier.principal(issuer.token("u-2", kid=fresh.kid))).subject == "u-2"
    with pytest.raises(AuthenticationError, match="unknown kid"):
        await verifier.principal(issuer.token("u-1", kid="ec-1"))


async def test_a_jwks_file_missing_at_start_is_refused_and_a_broken_one_never_fails_a_token(
    tmp_path: Path, issuer
):
    """Issue 40: a missing or half-written jwks_file answered every token with a 500, and a server
    started without complaint when its jwks_file was missing. Now it is refused at start, and a file
    that breaks later (being rewritten, or gone) keeps the keys read last; a token is never a 500."""
    from troupe.api.errors import AuthenticationError
    from troupe.api.tokens import TokenVerifier

    jwks = tmp_path / "jwks.json"
    with pytest.raises(ValueError, match=r"jwks_file .*jwks.json: cannot be read \(FileNotFoundError"):
        TokenVerifier(OidcSettings(issuer=issuer.url, audience=AUDIENCE, jwks_file=str(jwks)))
    jwks.write_text('{"keys": [')
    with pytest.raises(ValueError, match="is not a JWKS"):
        TokenVerifier(OidcSettings(issuer=issuer.url, audience=AUDIENCE, jwks_file=str(jwks)))

    jwks.write_text(json.dumps({"keys": [issuer.keys["ec-1"].jwk()]}))
    verifier = TokenVerifier(OidcSettings(issuer=issuer.url, audience=AUDIENCE, jwks_file=str(jwks)))
    jwks.write_text('{"keys": [{"kty": "EC", "crv"')  # half-written, with a new mtime
    os.utime(jwks, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert (await verifier.principal(issuer.token("u-1", kid="ec-1"))).subject == "u-1", "the last keys"
    jwks.unlink()
    assert (await verifier.principal(issuer.token("u-2", kid="ec-1"))).subject == "u-2"
    with pytest.raises(AuthenticationError, match="unknown kid"):
        await verifier.principal(issuer.token("u-3", kid="rsa-1"))


def test_a_jwks_url_is_https_or_loopback_and_the_refetch_cooldown_is_positive(issuer):
    base = {"issuer": issuer.url, "audience": AUDIENCE}
    for url in (
        "http://login.example.com/jwks",
        "http://10.0.0.7/jwks",
        "file:///etc/jwks.json",
        "ftp://login.example.com/jwks",
        "https:///jwks",
    ):
        with pytest.raises(ValueError, match="jwks_url must be https"):
            OidcSettings(**base, jwks_url=url)
    for url in ("https://login.example.com/jwks", "http://127.0.0.1:8080/jwks", "http://[::1]/jwks"):
        OidcSettings(**base, jwks_url=url)
    for cooldown in (0, -1, 0.0):
        with pytest.raises(ValueError, match="jwks_cooldown_s must be more than 0"):
            OidcSettings(**base, jwks_url=issuer.jwks_url, jwks_cooldown_s=cooldown)


async def test_unknown_key_ids_fetch_the_issuers_keys_once_per_cooldown(issuer):
    """Issue 40's untested guarantee: a token naming a key the issuer does not publish fetches the keys
    again at most once per ``jwks_cooldown_s``, so a flood of such tokens is not a flood of fetches."""
    from oidc_issuer import SigningKey
    from troupe.api.errors import AuthenticationError
    from troupe.api.tokens import TokenVerifier

    verifier = TokenVerifier(settings(issuer))  # the default cooldown: 30 s
    assert (await verifier.principal(issuer.token("u-1"))).subject == "u-1"
    issuer.keys["unpublished"] = SigningKey("unpublished", "RS256")
    for n in range(5):
        with pytest.raises(AuthenticationError, match="unknown kid"):
            await verifier.principal(issuer.token(f"u-{n}", kid="unpublished"))
    assert issuer.fetches <= 2, f"{issuer.fetches} fetches: the cooldown did not hold"


async def test_the_configured_leeway_is_the_one_used(issuer):
    """Issue 40's untested guarantee: ``leeway_s`` is what a token's expiry is given, not a fixed 300 s."""
    from troupe.api.errors import AuthenticationError
    from troupe.api.tokens import TokenVerifier

    expired = issuer.token("u-1", exp=int(time.time()) - 30)
    with pytest.raises(AuthenticationError, match="expired"):
        await TokenVerifier(settings(issuer, leeway_s=0)).principal(expired)
    assert (await TokenVerifier(settings(issuer, leeway_s=120)).principal(expired)).subject == "u-1"


async def test_only_a_token_with_the_admin_role_is_an_admin(issuer):
    """Issue 40's untested guarantee: ``admin_role`` makes an admin of a token that has that role, and of
    no other."""
    from troupe.api.tokens import TokenVerifier

    verifier = TokenVerifier(settings(issuer, admin_role="ops"))
    assert (await verifier.principal(issuer.token("u-ops", roles=["ops", "dba"]))).admin
    assert not (await verifier.principal(issuer.token("u-dba", roles=["dba"]))).admin
    assert not (await verifier.principal(issuer.token("u-none"))).admin
    assert not (await TokenVerifier(settings(issuer)).principal(issuer.token("u-ops", roles=["ops"]))).admin


def test_token_users_without_a_name_each_have_their_own_streams(http_server, tmp_path, calls, issuer):
    """Issue 40: the inbox's stream limit counted by display name, so two token users with no ``name``
    claim shared one limit. It counts by subject now."""
    server = http_server(runtime_factory(tmp_path, calls), oidc=settings(issuer))
    one, two = (bearer(issuer.token(sub, troupe_resources=["a1"])) for sub in ("u-1", "u-2"))
    with httpx.Client(base_url=server.url + "/api", timeout=30) as api, contextlib.ExitStack() as held:
        readers = []  # kept: a reader let go of closes its stream
        for who in (one, two):
            for _ in range(4):
                stream = held.enter_context(api.stream("GET", "/inbox/events", headers=who))
                assert stream.status_code == 200, stream.read()
                readers.append(stream.iter_lines())
                assert next(readers[-1]).startswith("data: ")
        with api.stream("GET", "/inbox/events", headers=one) as fifth:
            assert fifth.status_code == 429
            assert "u-1" in fifth.read().decode(), "the error names the subject when there is no name"


class HandClock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_an_issuer_that_stops_answering_holds_up_no_token_of_a_key_already_held(issuer):
    """Once the keys held are five minutes old they are fetched again in the background: while the
    issuer does not answer, tokens of a key held are checked at once (not each after the fetch's timeout,
    one after another) and with one fetch for all; a token of a key not held waits for that same fetch;
    when the issuer answers with its keys rotated, the removed key goes and the new one comes; and an
    issuer that is down keeps the keys it last published in use."""
    import asyncio

    import jwt
    from troupe.api.jwks import LIFESPAN_S, JwksKeys

    clock = HandClock()
    keys = JwksKeys(issuer.jwks_url, timeout_s=15, cooldown_s=30, clock=clock)
    assert (await keys.key("rsa-1")).key_id == "rsa-1" and issuer.fetches == 1
    issuer.answering.clear()
    clock.now += LIFESPAN_S
    held = await asyncio.wait_for(asyncio.gather(*(keys.key("rsa-1") for _ in range(5))), timeout=10)
    assert {k.key_id for k in held} == {"rsa-1"}
    fresh = issuer.rotate()  # the answer, once given, publishes only the new key
    waiting = asyncio.ensure_future(keys.key(fresh.kid))
    assert await asyncio.to_thread(issuer.holding.wait, 10)  # the background fetch, held there
    assert not waiting.done()
    issuer.answering.set()
    assert (await asyncio.wait_for(waiting, timeout=10)).key_id == fresh.kid
    assert issuer.fetches == 2, "one fetch for the tokens checked meanwhile"
    with pytest.raises(jwt.PyJWKClientError, match="no key with kid 'rsa-1'"):
        await keys.key("rsa-1")  # within the cooldown: the rotated-out key is not fetched for again

    issuer.stop()
    clock.now += LIFESPAN_S + 30
    with pytest.raises(jwt.PyJWKClientError, match="no key with kid 'unpublished'"):
        await keys.key("unpublished")  # waits for a fetch, which finds the issuer down
    assert (await keys.key(fresh.kid)).key_id == fresh.kid


@pytest.mark.parametrize("dripping", ["slow", "fast"])
async def test_a_jwks_answer_that_never_ends_is_cut_off_and_the_keys_held_stay(issuer, dripping):
    """An answer that comes a byte at a time (each within the read timeout) is cut off at the fetch's
    timeout, all of it; one that comes fast and never ends, once longer than any JWKS. Either way the
    token that waited for the fetch is answered, and the keys held stay in use."""
    import asyncio

    import jwt
    from troupe.api.jwks import LIFESPAN_S, JwksKeys

    clock = HandClock()
    keys = JwksKeys(issuer.jwks_url, timeout_s=1 if dripping == "slow" else 60, cooldown_s=30, clock=clock)
    assert (await keys.key("rsa-1")).key_id == "rsa-1"
    issuer.dripping = dripping
    clock.now += LIFESPAN_S
    with pytest.raises(jwt.PyJWKClientError, match="no key with kid 'unpublished'"):
        await asyncio.wait_for(keys.key("unpublished"), timeout=20)
    assert (await keys.key("rsa-1")).key_id == "rsa-1"
