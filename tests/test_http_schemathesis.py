"""Schemathesis against the app's own OpenAPI document: generated requests (valid ones and invalid ones) to
every operation never get a 5xx, in open mode and with a tenant's key. Bounded to stay quick."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from http_server import KEYS, A, runtime_factory
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

EXAMPLES = 20

# The server runs in this process, in a thread of its own, and an agent's handle picks its first
# replica with the random module (actors/handle.py). Hypothesis takes a change of that module's state
# while it draws a case for a strategy using it, and says so with a deprecation warning, which this
# suite's "filterwarnings = error" turns into a failure of a request that was never sent.
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")


def fuzz(url: str, headers: dict[str, str]) -> dict[str, int]:
    """Every operation, positive and negative cases; returns how many requests each got."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    sent: dict[str, int] = {}
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) == 20, [op.label for op in operations]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            # Valid requests go to a real agent (so runs start and pause); invalid ones name any agent.
            known = (
                {"agentId": "ops"}
                if mode is GenerationMode.POSITIVE and "{agentId}" in operation.path
                else None
            )
            check(
                operation,
                operation.as_strategy(generation_mode=mode, path_parameters=known),
                url,
                headers,
                sent,
            )
    return sent


def check(operation: Any, strategy: Any, url: str, headers: dict[str, str], sent: dict[str, int]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def no_server_error(case: schemathesis.Case) -> None:
        # The caller's credentials are the test's: a generated Authorization header only tests the 401.
        case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        response = case.call(base_url=url, headers=headers, timeout=30)
        sent[operation.label] = sent.get(operation.label, 0) + 1
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} body={case.body!r} query={case.query!r} "
            f"-> {response.status_code} {response.text[:500]}"
        )

    no_server_error()


@pytest.mark.parametrize("mode", ["open", "tenant-key"])
def test_generated_requests_never_get_a_server_error(http_server, tmp_path, calls, mode):
    if mode == "open":
        server = http_server(runtime_factory(tmp_path, calls), open_mode=True)
        headers: dict[str, str] = {}
    else:
        # A small body limit, so that generated bodies also cross it.
        server = http_server(runtime_factory(tmp_path, calls), keys=KEYS, max_body_bytes=LIMIT)
        headers = A
    sent = fuzz(server.url, headers)
    assert all(count > 0 for count in sent.values()), sent


LIMIT = 2048


def sized(size: int) -> bytes:
    """A JSON object of exactly ``size`` bytes."""
    body = b'{"messages": "' + b"x" * (size - 16) + b'"}'
    assert len(body) == size
    return body


def test_bodies_at_and_past_the_limit_never_get_a_server_error(http_server, tmp_path, calls):
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS, max_body_bytes=LIMIT)
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    posts = [op.ok() for op in schema.get_all_operations() if op.ok().method.upper() == "POST"]
    assert len(posts) == 13, [op.label for op in posts]
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for operation in posts:
            path = operation.path.replace("{agentId}", "ops")
            for headers in ({}, A):  # refused before the key is looked at: anonymous gets 413 too
                sent = {"content-type": "application/json", **headers}
                at = client.post(path, content=sized(LIMIT), headers=sent)
                past = client.post(path, content=sized(LIMIT + 1), headers=sent)
                assert at.status_code < 500 and at.status_code != 413, (path, at.status_code, at.text)
                assert past.status_code == 413, (path, past.status_code, past.text)
                assert past.json()["code"] == "BODY_TOO_LARGE"
            if not operation.body:
                continue  # a route that reads no body never holds one: nothing to count while streamed
            # Streamed without a length, the count of bytes received decides.
            chunks = iter([sized(LIMIT + 1)[:1000], sized(LIMIT + 1)[1000:]])
            streamed = client.post(path, content=chunks, headers={"content-type": "application/json", **A})
            assert streamed.status_code == 413, (path, streamed.status_code)
