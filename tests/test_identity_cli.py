"""Identity on the command line: ``troupe keys new|convert`` (a keys file holds digests, never keys; a
file of plain keys is refused with the command that converts it), ``troupe approve --app ... --as``
(who decides in-process, audited as the CLI's) and ``--token`` with ``--server``."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest
from helpers import sqlite_audit
from http_server import runtime_factory
from oidc_issuer import AUDIENCE, Issuer
from troupe.api.keys import KeyRing, PlainKeysError
from troupe.api.tokens import OidcSettings

from troupe.cli import main
from troupe.testing import CallLog


def test_keys_new_prints_the_key_once_and_stores_only_its_digest(tmp_path: Path, capsys):
    file = tmp_path / "keys.json"
    new = ["keys", "new", "--file", str(file), "--subject", "u-1", "--issuer", "https://login.example.com"]
    assert main([*new, "--name", "Ann", "--resource", "acme", "--role", "dba"]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("tk_") and len(key) > 40
    assert stat.S_IMODE(os.stat(file).st_mode) == 0o600
    assert key not in file.read_text(), "the file holds a digest, not the key"
    found = KeyRing.load(file).find(key)
    assert found is not None and (found.subject, found.issuer, found.display) == (
        "u-1",
        "https://login.example.com",
        "Ann",
    )
    assert found.resources == {"acme"} and found.roles == {"dba"} and not found.admin

    assert main(["keys", "new", "--file", str(file), "--subject", "ops", "--admin"]) == 0
    second = capsys.readouterr().out.strip()
    ring = KeyRing.load(file)
    assert len(ring) == 2 and ring.find(second).admin and ring.find(key) is not None
    assert main(["keys", "new", "--file", str(file), "--subject", "x", "--issuer", "a#b"]) == 1
    assert "cannot contain '#'" in capsys.readouterr().err and len(KeyRing.load(file)) == 2


def test_a_file_of_plain_keys_is_refused_until_converted(tmp_path: Path, capsys):
    file = tmp_path / "keys.json"
    file.write_text(json.dumps({"k-plain-acme": {"name": "acme", "resources": ["acme"], "roles": ["dba"]}}))
    with pytest.raises(PlainKeysError, match=f"troupe keys convert {file}"):
        KeyRing.load(file)
    with pytest.raises(SystemExit):
        main(["serve", "--demo", "--store", str(tmp_path / "d.db"), "--keys", str(file)])
    assert f"troupe keys convert {file}" in capsys.readouterr().err, "serve names the command"

    assert main(["keys", "convert", str(file)]) == 0
    assert "k-plain-acme" not in file.read_text() and stat.S_IMODE(os.stat(file).st_mode) == 0o600
    found = KeyRing.load(file).find("k-plain-acme")
    assert found is not None and (found.subject, found.roles) == ("acme", frozenset({"dba"}))
    assert main(["keys", "convert", str(file)]) == 0 and "nothing to do" in capsys.readouterr().out


def test_serve_reads_an_identity_provider_and_refuses_an_unsafe_one(tmp_path: Path, capsys):
    config = tmp_path / "oidc.json"
    unsafe = {"issuer": "https://login.example.com", "audience": "troupe", "jwks_file": "k.json"}
    config.write_text(json.dumps({"oidc": {**unsafe, "algorithms": ["HS256"]}}))
    demo = ["serve", "--demo", "--store", str(tmp_path / "d.db")]
    with pytest.raises(SystemExit):
        main([*demo, "--oidc-config", str(config)])
    assert "not allowed" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*demo, "--oidc-issuer", "https://login.example.com", "--oidc-audience", "troupe"])
    assert "exactly one of jwks_url and jwks_file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(demo)
    assert "an identity provider (--oidc-issuer" in capsys.readouterr().err
    config.write_text(json.dumps({"oidc": unsafe}))
    assert OidcSettings.load(config).algorithms == ("RS256", "ES256")
    missing = str(tmp_path / "no-such-jwks.json")  # issue 40: once, a server started without it
    for flags in (
        ["--oidc-config", str(config)],
        ["--oidc-issuer", "https://login.example.com", "--oidc-audience", "a", "--oidc-jwks-file", missing],
    ):
        with pytest.raises(SystemExit):
            main([*demo, *flags])
        assert "jwks_file" in (said := capsys.readouterr().err) and "cannot be read" in said, said


@pytest.fixture
def governed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A run paused under identity_app.POLICY (separation of duties, quorum 2), started by alice."""
    db, calls = tmp_path / "http.db", tmp_path / "calls.jsonl"
    monkeypatch.setenv("TROUPE_TEST_STORE", str(db))
    monkeypatch.setenv("TROUPE_TEST_CALLS", str(calls))
    from identity_app import runtime

    async def pause() -> str:
        rt = runtime()
        run = await rt.get_agent("ops").generate("delete", resource_id="acme", started_by="alice")
        await rt.shutdown()
        return run.run_id

    return {"run": asyncio.run(pause()), "db": str(db), "calls": str(calls)}


def test_approve_with_the_app_says_who_decides(governed, capsys):
    cli = ["approve", governed["run"], "call-1", "--app", "identity_app:runtime"]
    assert main(cli) == 1
    assert "say who decides: --as SUBJECT" in capsys.readouterr().err
    assert main([*cli, "--as", "alice"]) == 1
    assert "separation of duties" in capsys.readouterr().err
    assert main([*cli, "--as", "bob", "--role", "ops"]) == 0
    assert "needs approval" in capsys.readouterr().out, "counted: the call still waits"
    assert main([*cli, "--as", "bob"]) == 1 and "already approved" in capsys.readouterr().err
    assert main([*cli, "--as", "carol"]) == 0
    assert CallLog(governed["calls"]).count("delete_record") == 1
    entries = sqlite_audit(governed["db"], governed["run"])
    assert [(e.kind, e.subject, e.issuer, e.surface) for e in entries] == [
        ("approval-recorded", "bob", "troupe", "cli"),
        ("approved", "carol", "troupe", "cli"),
    ]
    with pytest.raises(SystemExit, match="--as is for --app"):
        main(["approve", governed["run"], "--server", "http://127.0.0.1:9", "--as", "bob"])


def test_a_token_decides_over_the_server(http_server, tmp_path: Path, calls: CallLog, capsys):
    issuer = Issuer()
    try:
        oidc = OidcSettings(issuer=issuer.url, audience=AUDIENCE, jwks_url=issuer.jwks_url)
        server = http_server(runtime_factory(tmp_path, calls), oidc=oidc)

        async def pause() -> str:
            rt = runtime_factory(tmp_path, calls)()
            run = await rt.get_agent("ops").generate("delete", resource_id="a1")
            await rt.shutdown()
            return run.run_id

        run_id = asyncio.run(pause())
        where = ["--server", server.url]
        assert main(["approve", run_id, "call-1", *where, "--token", "not.a.token"]) == 1
        assert "refused the credential" in capsys.readouterr().err
        token = issuer.token("u-ops", troupe_resources=["a1"])
        assert main(["approve", run_id, "call-1", *where, "--token", token]) == 0
        assert calls.count("delete_record") == 1
        (entry,) = sqlite_audit(str(tmp_path / "http.db"), run_id)
        assert (entry.subject, entry.issuer, entry.surface) == ("u-ops", issuer.url, "http")
    finally:
        issuer.stop()
