"""Decision links: the pause event carries signed approve/decline links; opening one only shows the call,
confirming it decides once; reuse, expiry, a changed call and a forged link are refused. Real uvicorn,
real webhook receiver, real SQLite."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from helpers import delete_tool, echo_model
from test_notifications import FAST, SECRET
from troupe.core.deciding.approvers import ApproverPolicy
from troupe.core.notifying.links import LinkSigner
from troupe.core.notifying.outbox import Notifications, NotificationTarget
from troupe.core.vocabulary.state import fingerprint
from webhook_receiver import Receiver

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, tool_call

LINK_SECRET = "whsec_" + base64.b64encode(b"links are signed with this key!!").decode()
PUBLIC = "https://troupe.test"  # where approvers would reach the server; the tests map it to the real one
SIGNER = LinkSigner(PUBLIC, LINK_SECRET)
KEYS = {
    "key-admin": {"name": "ops", "admin": True},
    "key-dba": {"name": "dana", "resources": ["acme"], "roles": ["dba"]},
    "key-alice": {"name": "alice", "resources": ["acme"]},
    "key-bob": {"name": "bob", "resources": ["acme"]},
    "key-other": {"name": "olga", "resources": ["other"]},
}
ADMIN = {"Authorization": "Bearer key-admin"}


@pytest.fixture
def receiver():
    hook = Receiver().start()
    yield hook
    hook.stop()


def serve(
    http_server,
    tmp_path: Path,
    calls: CallLog,
    receiver: Receiver,
    *policies: ApproverPolicy,
    record_id: str = "abc-123",
    keys: object = KEYS,
    store: type[SqliteStore] = SqliteStore,
):
    def build() -> Runtime:
        agent = Agent(
            "ops",
            model=echo_model(tool_call("delete_record", {"id": record_id}, id="call-1")),
            tools=[delete_tool(calls)],
        )
        target = NotificationTarget(receiver.url, SECRET, name="chat")
        return Runtime(
            [agent],
            storage=store(tmp_path / "l.db"),
            executor="local",
            notifications=Notifications((target,), retry=FAST, links=SIGNER),
            approver_policies=policies,
        )

    return http_server(build, keys=keys)


def local(link: str) -> str:
    """The path of a link, to open on the test's server."""
    assert link.startswith(PUBLIC + "/decide/")
    return urlsplit(link).path


async def paused_with_links(
    client: httpx.AsyncClient, receiver: Receiver, starter: dict[str, str] = ADMIN
) -> tuple[str, dict[str, str]]:
    body = {"messages": "delete abc-123", "resourceId": "acme"}
    started = await client.post("/api/agents/ops/generate", json=body, headers=starter)
    assert started.status_code == 200, started.text
    (event,) = await receiver.arrived(1)
    links = event.json["data"]["links"]
    return started.json()["runId"], {"approve": local(links["approve"]), "decline": local(links["decline"])}


async def until_calls(calls: CallLog, count: int) -> None:
    async with asyncio.timeout(20):
        while calls.count() < count:
            await asyncio.sleep(0.02)


async def test_a_link_shows_the_call_on_get_and_decides_once_on_post(http_server, tmp_path, calls, receiver):
    server = serve(http_server, tmp_path, calls, receiver)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver)

        for _ in range(2):  # a link scanner opening it, then the person
            page = await client.get(links["approve"])
            assert page.status_code == 200 and 'method="post"' in page.text
            assert "delete_record" in page.text and "abc-123" in page.text and run_id in page.text
            assert page.headers["referrer-policy"] == "same-origin", "the token never goes to another origin"
        listed = (await client.get("/api/agents/ops/suspended-runs", headers=ADMIN)).json()
        assert [r["runId"] for r in listed["runs"]] == [run_id] and calls.count() == 0, "GET decided nothing"

        done = await client.post(links["approve"])
        assert done.status_code == 200 and "Approved by decision-link" in done.text
        await until_calls(calls, 1)

        again = await client.post(links["approve"])
        assert again.status_code == 409 and "not used" in again.text
        other = await client.post(links["decline"])
        assert other.status_code == 409
        assert (await client.get(links["approve"])).status_code == 409
    assert calls.count() == 1, "the tool ran once"


async def test_expired_changed_and_forged_links_are_refused(http_server, tmp_path, calls, receiver):
    server = serve(http_server, tmp_path, calls, receiver)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver)

        expired = await issued(tmp_path, run_id, now=time.time() - SIGNER.ttl_s - 1)
        for method in ("GET", "POST"):
            refused = await client.request(method, local(expired["approve"]))
            assert refused.status_code == 403 and "expired" in refused.text

        token = links["approve"].rsplit("/", 1)[1]
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        assert (await client.post(f"/decide/{forged}")).status_code == 403
        link_id = token.partition(".")[0]
        other_key = LinkSigner(PUBLIC, SECRET).token(link_id)  # the record exists; the key is not the links'
        assert (await client.post(f"/decide/{other_key}")).status_code == 403
        unissued = await client.post(f"/decide/{SIGNER.token('no-such-record')}")  # signed, never issued
        assert unissued.status_code == 403 and "not valid" in unissued.text

        # The call changes under the link (what it would delete is no longer what was shown).
        store = SqliteStore(tmp_path / "l.db")
        stored = await store.load_run(run_id)
        assert stored is not None
        (call,) = stored.state.calls
        call.args = call.pauses[0].args = {"id": "everything"}
        call.pauses[0].fingerprint = fingerprint("call-1", "delete_record", call.args)
        await store.save_run(stored.state, expected_version=stored.version)
        await store.close()

        changed = await client.post(links["approve"])
        assert changed.status_code == 409 and "no longer matches fingerprint" in changed.text
        assert (await client.get(links["approve"])).status_code == 409
        listed = (await client.get("/api/agents/ops/suspended-runs", headers=ADMIN)).json()
        assert [r["runId"] for r in listed["runs"]] == [run_id]
    assert calls.count() == 0


async def test_a_policy_needs_the_approvers_key_with_the_link(http_server, tmp_path, calls, receiver):
    policy = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
    server = serve(http_server, tmp_path, calls, receiver, policy)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        _, links = await paused_with_links(client, receiver)

        anonymous = await client.post(links["approve"])
        assert anonymous.status_code == 403 and "says who they are" in anonymous.text
        wrong = await client.post(links["approve"], data={"key": "key-alice"})
        assert wrong.status_code == 403 and "needs one of the roles" in wrong.text
        assert calls.count() == 0
        with_key = await client.post(links["approve"], data={"key": "key-dba"})
        assert with_key.status_code == 200 and "Approved by dana" in with_key.text
        await until_calls(calls, 1)


async def test_an_anonymous_link_never_decides_a_governed_call(http_server, tmp_path, calls, receiver):
    """Separation of duties with no roles: the starter POSTing the link with no credential was accepted
    (it decided as a shared ``decision-link``); now a governed call needs someone who says who they are,
    and the starter saying so is refused like anywhere else."""
    policy = ApproverPolicy(agent="ops", tool="delete_record", separation_of_duties=True)
    server = serve(http_server, tmp_path, calls, receiver, policy)
    alice = {"Authorization": "Bearer key-alice"}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver, starter=alice)

        anonymous = await client.post(links["approve"])
        assert anonymous.status_code == 403 and "says who they are" in anonymous.text
        declined = await client.post(links["decline"])
        assert declined.status_code == 403, "an anonymous decline of a governed call is refused too"
        by_header = await client.post(links["approve"], headers=alice)
        assert by_header.status_code == 403 and "separation of duties" in by_header.text
        by_form = await client.post(links["approve"], data={"key": "key-alice"})
        assert by_form.status_code == 403 and "separation of duties" in by_form.text
        elsewhere = await client.post(links["approve"], data={"key": "key-other"})
        assert elsewhere.status_code == 409 and "snapshot not found" in elsewhere.text, "another tenant"
        assert calls.count() == 0
        assert (await store_audit(tmp_path, run_id)) == []

        bob = await client.post(links["approve"], data={"key": "key-bob"})
        assert bob.status_code == 200 and "Approved by bob" in bob.text
        await until_calls(calls, 1)
    (entry,) = await store_audit(tmp_path, run_id)
    assert (entry.decided_by, entry.subject, entry.issuer, entry.surface) == ("bob", "bob", "troupe", "link")


async def test_the_requester_via_link_and_http_is_one_approver_of_a_quorum(
    http_server, tmp_path, calls, receiver
):
    """A quorum of two: the person who clicked the link and then approved over HTTP is one approver."""
    server = serve(http_server, tmp_path, calls, receiver, ApproverPolicy(tool="delete_record", quorum=2))
    alice = {"Authorization": "Bearer key-alice"}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver, starter=alice)

        assert (await client.post(links["approve"])).status_code == 403, "anonymous: not an approver"
        first = await client.post(links["approve"], data={"key": "key-alice"})
        assert first.status_code == 200, first.text
        decide = {"runId": run_id, "toolCallId": "call-1"}
        again = await client.post("/api/agents/ops/approve-tool-call", json=decide, headers=alice)
        assert again.status_code == 403 and "already approved" in again.json()["error"]
        shown = await client.get(links["approve"])  # the link's own page says who approved so far
        assert "<th>Approved so far</th><td><pre>alice</pre>" in shown.text
        assert calls.count() == 0, "one person met a quorum of two"

        second = await client.post("/api/agents/ops/approve-tool-call", json=decide, headers=bob_key())
        assert second.status_code == 200
        await until_calls(calls, 1)
    audit = await store_audit(tmp_path, run_id)
    assert [(e.kind, e.decided_by, e.surface) for e in audit] == [
        ("approval-recorded", "alice", "link"),
        ("approved", "bob", "http"),
    ]


def bob_key() -> dict[str, str]:
    return {"Authorization": "Bearer key-bob"}


async def store_audit(tmp_path: Path, run_id: str) -> list:
    store = SqliteStore(tmp_path / "l.db")
    try:
        return await store.list_audit(run_id)
    finally:
        await store.close()


async def test_a_link_issued_to_one_approver_decides_only_as_them(http_server, tmp_path, calls, receiver):
    from troupe.core.vocabulary.identity import Principal

    policy = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}), separation_of_duties=True)
    server = serve(http_server, tmp_path, calls, receiver, policy)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, _ = await paused_with_links(client, receiver, starter={"Authorization": "Bearer key-alice"})
        alice = Principal("alice", roles=frozenset({"dba"}))
        to_alice = local((await issued(tmp_path, run_id, approver=alice))["approve"])
        dana = Principal("dana", name="dana", roles={"dba"})
        to_dana = local((await issued(tmp_path, run_id, approver=dana))["approve"])

        page = await client.get(to_dana)
        assert "issued to dana" in page.text and 'name="key"' not in page.text
        assert (await client.post(to_alice)).status_code == 403, "issued to the starter: separation of duties"
        other = await client.post(to_dana, data={"key": "key-bob"})
        assert other.status_code == 403 and "issued to &#x27;dana&#x27;" in other.text
        assert calls.count() == 0
        done = await client.post(to_dana)
        assert done.status_code == 200 and "Approved by dana" in done.text
        await until_calls(calls, 1)
    (entry,) = await store_audit(tmp_path, run_id)
    assert (entry.subject, entry.surface) == ("dana", "link")


def old_style_token(secret: str, claim: dict) -> str:
    """A token as links were made before issue 40: the claim itself, approver and roles included, signed
    with a ``whsec_`` key (the server believed what it said)."""
    import hashlib
    import hmac
    import json

    payload = base64.urlsafe_b64encode(json.dumps(claim).encode()).rstrip(b"=").decode()
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, b"troupe-link.v1." + payload.encode(), hashlib.sha256).digest()
    return f"{payload}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


async def test_a_link_made_by_anyone_but_the_server_decides_nothing(http_server, tmp_path, calls, receiver):
    """Issue 40's HIGH: whoever held the webhook secret (the README gave the receiver the same one) could
    sign links naming any approver, roles included, and the server believed them: two made-up people
    with role dba met a quorum of two under separation of duties. Now a token only names a record the
    server issued, so such tokens (signed with the webhook secret, or even with the links' own key) are
    refused, the call still waits and the audit is empty."""
    dba = frozenset({"dba"})
    policy = ApproverPolicy(tool="delete_record", roles=dba, separation_of_duties=True, quorum=2)
    server = serve(http_server, tmp_path, calls, receiver, policy)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver)
        fp = fingerprint("call-1", "delete_record", {"id": "abc-123"})
        for secret in (SECRET, LINK_SECRET):
            for mallory in ("mallory-1", "mallory-2"):
                who = {"issuer": "https://anyone", "subject": mallory, "roles": ["dba"]}
                claim = {
                    "action": "approve",
                    "agent_id": "ops",
                    "run_id": run_id,
                    "tool_call_id": "call-1",
                    "fingerprint": fp,
                    "expires_at": time.time() + 600,
                    "approver": who,
                }
                token = old_style_token(secret, claim)
                for method in ("GET", "POST"):
                    refused = await client.request(method, f"/decide/{token}")
                    assert refused.status_code == 403 and "not valid" in refused.text, (secret, method)
        # The genuine link from the webhook names nobody: used with no credential, it is refused too.
        anonymous = await client.post(links["approve"])
        assert anonymous.status_code == 403 and "says who they are" in anonymous.text
        listed = (await client.get("/api/agents/ops/suspended-runs", headers=ADMIN)).json()
        assert [r["runId"] for r in listed["runs"]] == [run_id]
    assert calls.count() == 0
    assert await store_audit(tmp_path, run_id) == []


def test_a_link_key_that_is_a_webhook_secret_is_refused_at_start(receiver):
    target = NotificationTarget(receiver.url, SECRET, name="ops-chat")
    same = "whsec_" + base64.b64encode(base64.b64decode(SECRET.removeprefix("whsec_"))).decode()
    with pytest.raises(ValueError, match=r"key of their own.*'ops-chat'") as refused:
        Notifications((target,), links=LinkSigner(PUBLIC, same))
    assert SECRET not in str(refused.value)
    Notifications((target,), links=SIGNER)  # a key of its own is fine


async def test_one_person_uses_a_link_once(http_server, tmp_path, calls, receiver):
    """A person's use of a link is claimed before deciding: dana's second use of her link is refused by
    the link itself, and a refused decision (alice lacks the role) does not use it up."""
    from troupe.core.vocabulary.identity import Principal

    server = serve(http_server, tmp_path, calls, receiver, ApproverPolicy(tool="delete_record", quorum=2))
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver)
        dana = local((await issued(tmp_path, run_id, approver=Principal("dana", name="dana")))["approve"])
        assert (await client.post(dana)).status_code == 200
        again = await client.post(dana)
        assert again.status_code == 409 and "dana&#x27; has used this link already" in again.text
        assert calls.count() == 0
        first = await client.post(links["approve"], data={"key": "key-alice"})
        assert first.status_code == 200, "the channel's link: each person uses it once"
        await until_calls(calls, 1)


async def test_a_refused_use_of_a_link_does_not_use_it_up(http_server, tmp_path, calls, receiver):
    """Alice lacks the role when she first uses the link (403, "not used"); once the keys file gives it
    to her, the same link decides as her: the refused use was given back, not spent."""
    from troupe.api.keys import KeyRing, digest, write_file

    def keys(*alice_roles: str) -> dict:
        alice = {"sha256": digest("key-alice"), "subject": "alice", "resources": ["acme"]}
        alice["roles"] = list(alice_roles)
        return {"keys": [alice, {"sha256": digest("key-admin"), "subject": "ops", "admin": True}]}

    file = tmp_path / "keys.json"
    write_file(file, keys())
    policy = ApproverPolicy(tool="delete_record", roles=frozenset({"dba"}))
    server = serve(http_server, tmp_path, calls, receiver, policy, keys=KeyRing.load(file))
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        _, links = await paused_with_links(client, receiver)
        refused = await client.post(links["approve"], data={"key": "key-alice"})
        assert refused.status_code == 403 and "not used" in refused.text
        write_file(file, keys("dba"))
        done = await client.post(links["approve"], data={"key": "key-alice"})
        assert done.status_code == 200 and "Approved by alice" in done.text
        await until_calls(calls, 1)


async def issued(tmp_path: Path, run_id: str, **options) -> dict[str, str]:
    """Links for the test's paused call, issued by Python into the server's store (as a host app would)."""
    data = {
        "kind": "approval",
        "agentId": "ops",
        "runId": run_id,
        "toolCallId": "call-1",
        "fingerprint": fingerprint("call-1", "delete_record", {"id": "abc-123"}),
    }
    store = SqliteStore(tmp_path / "l.db")
    try:
        return await SIGNER.issue(store, data, **options)
    finally:
        await store.close()


async def test_delivery_state_is_shown_and_redelivered_over_http(http_server, tmp_path, calls, receiver):
    server = serve(http_server, tmp_path, calls, receiver)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, _ = await paused_with_links(client, receiver)
        path = f"/api/agents/ops/runs/{run_id}/deliveries"

        async with asyncio.timeout(20):
            while (await client.get(path, headers=ADMIN)).json()["deliveries"][0]["status"] != "delivered":
                await asyncio.sleep(0.02)
        (shown,) = (await client.get(path, headers=ADMIN)).json()["deliveries"]
        assert (shown["type"], shown["target"], shown["attempts"]) == ("tool-call.paused", "chat", 1)
        assert receiver.url not in str(shown) and SECRET not in str(shown)

        dba = {"Authorization": "Bearer key-dba"}
        refused = await client.post(f"/api/deliveries/{shown['id']}/redeliver", headers=dba)
        assert refused.status_code == 403
        missing = await client.post("/api/deliveries/nope/redeliver", headers=ADMIN)
        assert missing.status_code == 404
        again = await client.post(f"/api/deliveries/{shown['id']}/redeliver", headers=ADMIN)
        assert again.status_code == 200 and again.json()["status"] == "pending"
        first, second = await receiver.arrived(2)
        assert first.headers["webhook-id"] == second.headers["webhook-id"] == shown["eventId"]


def test_access_logs_never_carry_a_links_token():
    from troupe.api.decision_links import RedactLinks

    token = SIGNER.token("a-record-id")
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "POST", f"/decide/{token}", "1.1", 200),
        None,
    )
    assert RedactLinks().filter(record)
    assert token not in record.getMessage() and "/decide/<token>" in record.getMessage()


async def test_the_page_marks_hidden_characters_and_bounds_a_reason(http_server, tmp_path, calls, receiver):
    """The call a link shows is what a person approves: a direction override or a zero-width space in its
    arguments shows as a mark naming it, as in the inbox; a decline's reason is held to the API's bound."""
    server = serve(
        http_server, tmp_path, calls, receiver, record_id="report\u202efdp.exe\u200b\U000e0068\u00ad"
    )
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        _, links = await paused_with_links(client, receiver)

        page = await client.get(links["decline"])
        assert page.status_code == 200
        marks = re.findall(r'<span class="invisible"[^>]*>(\u27e6U\+[0-9A-F]+\u27e7)</span>', page.text)
        assert marks == [f"\u27e6U+{code}\u27e7" for code in ("202E", "200B", "E0068", "00AD")]
        assert not {"\u202e", "\u200b", "\U000e0068", "\u00ad"} & set(page.text)

        too_long = await client.post(links["decline"], data={"reason": "x" * 100_001})
        assert too_long.status_code == 422 and "longer than 100,000 characters" in too_long.text
        assert "the call still waits" in too_long.text
        fine = await client.post(links["decline"], data={"reason": "not this one"})
        assert fine.status_code == 200
    assert calls.count() == 0


class FailsOnce(SqliteStore):
    """A real SQLite store whose next run write fails once, when ``fail`` is set: what a disk or a driver
    that breaks with an error of its own (not Troupe's) does in the middle of a decision."""

    fail = threading.Event()
    fail_link_read = threading.Event()

    async def save_run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if FailsOnce.fail.is_set():
            FailsOnce.fail.clear()
            raise RuntimeError("the disk went away")
        return await super().save_run(*args, **kwargs)

    async def load_link(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if FailsOnce.fail_link_read.is_set():
            FailsOnce.fail_link_read.clear()
            raise RuntimeError("the disk went away")
        return await super().load_link(*args, **kwargs)


async def test_a_failure_while_deciding_gives_the_link_back_and_keeps_its_token_out_of_logs(
    http_server, tmp_path, calls, receiver, caplog: pytest.LogCaptureFixture
):
    server = serve(http_server, tmp_path, calls, receiver, store=FailsOnce)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver)
        token = links["approve"].rsplit("/", 1)[1]
        FailsOnce.fail.set()
        with caplog.at_level(logging.ERROR):
            failed = await client.post(links["approve"])
        assert failed.status_code == 500 and "The link still works" in failed.text
        assert failed.headers["content-type"].startswith("text/html"), "the link's own page, not JSON"
        assert "unexpected error on POST /decide/<token>" in caplog.text
        assert token not in caplog.text, "a token in a log line is a credential in the log"
        listed = (await client.get("/api/agents/ops/suspended-runs", headers=ADMIN)).json()
        assert [r["runId"] for r in listed["runs"]] == [run_id] and calls.count() == 0

        done = await client.post(links["approve"])
        assert done.status_code == 200 and "Approved by decision-link" in done.text, "not used up"
        await until_calls(calls, 1)

        FailsOnce.fail_link_read.set()  # showing a link's page fails: the app's own handler logs it
        with caplog.at_level(logging.ERROR):
            shown = await client.get(links["approve"])
        assert shown.status_code == 500 and "unexpected error on GET /decide/<token>" in caplog.text
        assert token not in caplog.text


async def test_a_links_form_is_read_only_for_a_genuine_token_and_bounded(
    http_server, tmp_path, calls, receiver, monkeypatch: pytest.MonkeyPatch
):
    """Parsing a form costs the event loop CPU (seconds for a 4 MiB one of many fields): a forged token
    is refused before its body is parsed, and a genuine link's form is held to a few fields."""
    from troupe.api import decision_links

    parsed: list[int] = []

    def counted(text: str, **options):  # type: ignore[no-untyped-def]
        parsed.append(len(text))
        return parse_qs(text, **options)

    monkeypatch.setattr(decision_links, "parse_qs", counted)
    server = serve(http_server, tmp_path, calls, receiver)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        _, links = await paused_with_links(client, receiver)
        token = links["decline"].rsplit("/", 1)[1]
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        flood = "&".join(f"a{i}=%41" for i in range(50_000))
        form = {"content-type": "application/x-www-form-urlencoded"}
        refused = await client.post(f"/decide/{forged}", content=flood, headers=form)
        assert refused.status_code == 403 and parsed == [], "a forged token's body is never parsed"

        many = await client.post(links["decline"], content=flood, headers=form)
        assert many.status_code == 422 and "more than 8 fields" in many.text
        fine = await client.post(links["decline"], data={"reason": "not this one"})
        assert fine.status_code == 200 and "Declined" in fine.text, "the link still works"
    assert calls.count() == 0


async def test_a_call_in_doubt_is_not_decided_through_its_link_yet_and_says_so(
    http_server, tmp_path, calls, receiver
):
    """A call whose host lost it while it may still run (in doubt) cannot be decided before its
    deadline: the link's page answers what the API does (409, not "your decision is wrong"), and the
    link still works."""
    from datetime import UTC, datetime, timedelta

    from troupe.core.vocabulary.state import InDoubt

    server = serve(http_server, tmp_path, calls, receiver)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        run_id, links = await paused_with_links(client, receiver)
        store = SqliteStore(tmp_path / "l.db")
        stored = await store.load_run(run_id)
        assert stored is not None
        deadline = datetime.now(UTC) + timedelta(minutes=10)
        stored.state.calls[0].pauses[0].in_doubt = InDoubt(owner="host-1", deadline=deadline)
        await store.save_run(stored.state, expected_version=stored.version)
        await store.close()

        refused = await client.post(links["approve"])
        assert refused.status_code == 409 and "is in doubt" in refused.text and "still waits" in refused.text
        api = await client.post(
            "/api/agents/ops/approve-tool-call", json={"runId": run_id, "toolCallId": "call-1"}, headers=ADMIN
        )
        assert api.status_code == refused.status_code, "the same answer as the API's"
    assert calls.count() == 0


def test_a_token_with_anything_added_to_its_mac_is_not_genuine():
    """The base64 decoder skips characters outside its alphabet, so a token with junk in or after its
    MAC named the same record; only the one spelling the server wrote is genuine."""
    from troupe.core.vocabulary.errors import DecisionLinkError

    token = SIGNER.token("rec-1")
    assert SIGNER.link_id(token) == "rec-1"
    link_id, mac = token.split(".")
    for changed in (token + "!", token + "=", token + "==", f"{link_id}.{mac[:4]}*{mac[4:]}", token + "\n"):
        with pytest.raises(DecisionLinkError, match="not valid"):
            SIGNER.link_id(changed)
