"""Mastra's recorded HTTP exchanges (``shared/mastra/http-exchanges.json``) replayed, request by request,
against a real ``troupe serve`` process serving the same two agents: same statuses, same framing (JSON,
or ``data: {type, runId, from, payload}`` frames ending in ``data: [DONE]``), same chunk types and body
keys. Deliberate differences, with the reason:

- an unknown run is 404 (Mastra answers 500 for a caller's mistake);
- Troupe bodies carry more (e.g. ``code``/``details`` beside an error's message, ``agentPath`` and
  ``fingerprint`` on a pause); extra keys are allowed, missing ones are not, except those below.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from conftest import TESTS
from mastra_reference import ONLY_ON_FINISH, PROVIDER_KEYS, reference
from test_http_serve import Served

# Fields of an AI SDK result that have nothing behind them in Troupe (no reasoning models, sources, files,
# fallback models or processors) and Mastra-editor fields of an agent (drafts, legacy option sets).
NOT_IN_TROUPE = {
    "body": frozenset(
        {"warnings", "request", "reasoning", "sources", "files", "usedFallbackValue", "rememberedMessages"}
    ),
    "agent": frozenset(
        {"modelVersion", "defaultGenerateOptionsLegacy", "defaultStreamOptionsLegacy", "source", "hasDraft"}
    ),
}
UNKNOWN_RUN_STATUS = {500: 404}  # Mastra's 500 for an unknown run is Troupe's 404
PLACEHOLDER = re.compile(r"^<run-\d+>$")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("mastra-http")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MASTRA_HTTP_DB", str(tmp / "troupe.db"))
        env.setenv("MASTRA_HTTP_LOG", str(tmp / "calls.jsonl"))
        env.setenv("PYTHONPATH", str(TESTS))
        server = Served(tmp, "--app", "mastra_http_app:build", "--open")
    try:
        server.wait_ready({})
        yield server
    finally:
        code, _ = server.stop()
        assert code == 0, server.output()


class RunIds:
    """Mastra's ``<run-N>`` placeholders, bound to Troupe's run ids as the replay meets them."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}

    def learn(self, recorded: Any, ours: Any) -> None:
        if isinstance(recorded, str) and PLACEHOLDER.match(recorded) and isinstance(ours, str):
            assert self.bound.setdefault(recorded, ours) == ours
        elif isinstance(recorded, dict) and isinstance(ours, dict) and "runId" in recorded:
            self.learn(recorded["runId"], ours.get("runId"))

    def fill(self, body: Any) -> Any:
        if isinstance(body, dict):
            return {k: self.fill(v) for k, v in body.items()}
        return self.bound.get(body, body) if isinstance(body, str) else body


def _frames(raw: str) -> list[Any]:
    """SSE frames, checking the framing: each ``data: <json>`` then a blank line, ``[DONE]`` last."""
    assert raw.endswith("\n\n"), raw[-200:]
    blocks = raw[:-2].split("\n\n")
    assert all(b.startswith("data: ") and "\n" not in b for b in blocks), raw[:500]
    assert blocks[-1] == "data: [DONE]"
    return [json.loads(b.removeprefix("data: ")) for b in blocks[:-1]]


def _collapsed(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for frame in frames:
        if not (frame["type"] == "text-delta" and out and out[-1]["type"] == "text-delta"):
            out.append(frame)
    return out


def _missing(
    recorded: dict[str, Any], ours: dict[str, Any], unused: frozenset[str] = frozenset()
) -> set[str]:
    return set(recorded) - unused - set(ours)


def compare_stream(recorded: dict[str, Any], raw: str, run_ids: RunIds) -> None:
    theirs = _collapsed([f for f in recorded["sseFrames"] if "rawData" not in f])
    ours = _collapsed(_frames(raw))
    assert [f["type"] for f in ours] == [f["type"] for f in theirs]
    for mine, recorded_frame in zip(ours, theirs, strict=True):
        assert set(mine) == {"type", "runId", "from", "payload"}
        run_ids.learn(recorded_frame["runId"], mine["runId"])
        unused = PROVIDER_KEYS | ONLY_ON_FINISH.get(mine["type"], frozenset())
        assert _missing(recorded_frame["payload"], mine["payload"], unused) == set(), mine["type"]


def compare_json(flow: str, recorded: Any, ours: Any) -> None:
    if flow == "list agents":
        assert set(ours) == set(recorded)
        for agent_id, agent in recorded.items():
            assert _missing(agent, ours[agent_id], NOT_IN_TROUPE["agent"]) == set(), agent_id
            for tool_id, tool in agent["tools"].items():
                assert _missing(tool, ours[agent_id]["tools"][tool_id]) == set(), tool_id
                assert ours[agent_id]["tools"][tool_id]["requireApproval"] == tool["requireApproval"]
        return
    assert _missing(recorded, ours, NOT_IN_TROUPE["body"]) == set(), flow
    if isinstance(recorded.get("error"), str):
        assert isinstance(ours["error"], str) and ours["error"], "Mastra's clients read error as the message"
    for run, mine in zip(recorded.get("runs", []), ours.get("runs", []), strict=True):
        assert _missing(run, mine) == set()
        for call, our_call in zip(run["toolCalls"], mine["toolCalls"], strict=True):
            assert _missing(call, our_call) == set()
    for key in ("suspendPayload",):
        if isinstance(recorded.get(key), dict):
            assert _missing(recorded[key], ours[key]) == set()
            assert isinstance(ours[key]["resumeSchema"], str), "a JSON string, as Mastra's"
    for key in ("toolCalls", "toolResults"):
        for chunk, mine in zip(recorded.get(key, []), ours.get(key, []), strict=True):
            assert set(chunk) <= set(mine) and _missing(chunk["payload"], mine["payload"]) == set()


def test_mastras_http_exchanges_replay_against_troupe_serve(served):
    recorded = reference("http-exchanges.json")
    run_ids = RunIds()
    with httpx.Client(base_url=served.url.removesuffix("/api"), timeout=60) as client:
        for exchange in recorded["exchanges"]:
            flow = exchange["flow"]
            response = client.request(
                exchange["method"],
                exchange["path"],
                params=exchange["query"] or None,
                json=run_ids.fill(exchange.get("requestBody")),
            )
            status = UNKNOWN_RUN_STATUS.get(exchange["status"], exchange["status"])
            assert response.status_code == status, (flow, response.text)
            kind = exchange["responseHeaders"]["content-type"]
            assert response.headers["content-type"].startswith(kind), flow
            if kind == "text/event-stream":
                compare_stream(exchange, response.text, run_ids)
            else:
                body = response.json()
                run_ids.learn(exchange["responseBody"], body)
                compare_json(flow, exchange["responseBody"], body)
    assert len(run_ids.bound) == 5, "every recorded run had its Troupe counterpart"
