"""Troupe's front door on Ray Serve with two replicas, over a real Redis and real HTTP through Serve's
proxy: ``python serve_driver.py REDIS_URL WORKDIR``. It starts a Ray of its own (its own RAY_TMPDIR, set
by the test), deploys ``troupe.front_door`` the way ``troupe serve --replicas 2`` does, and prints one
``RESULT <json>`` line per scenario with what it observed; the test asserts on those.

Which replica serves a request is Serve's choice; every response names its replica (``x-troupe-replica``),
so "stream through one, decide through the other" is a run streamed, then decided, until the decision
lands on the other replica. A replica is killed through the Serve controller's own listing of replicas.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import ray
from listeners import listeners_of, process_tree, tcp_listeners
from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE
from troupe.api.auth import keyring

from troupe import RedisStore
from troupe.front_door import REPLICA_HEADER, DoorSettings, start, stop
from troupe.testing import CallLog

ADMIN = {"Authorization": "Bearer key-admin"}
DEADLINE_S = 30.0


def report(name: str, **observed: Any) -> None:
    print("RESULT " + json.dumps({"scenario": name, **observed}), flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def until(check: Any, what: str) -> Any:
    """Poll ``check`` (async, returns a value or None) until it gives a value or the deadline passes."""
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while True:
        found = await check()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def frames_of(body: str) -> list[Any]:
    frames = [block[len("data: ") :] for block in body.split("\n\n") if block.startswith("data: ")]
    return [f if f == "[DONE]" else json.loads(f) for f in frames]


async def post_stream(client: httpx.AsyncClient, path: str, body: Any) -> tuple[str, list[Any]]:
    """POST a streaming route; retried only while Serve says no replica could take it (503)."""

    async def once() -> httpx.Response | None:
        response = await client.post(path, json=body, headers=ADMIN)
        return None if response.status_code == 503 else response

    response = await until(once, f"a replica to take {path}")
    assert response.status_code == 200, response.text
    return response.headers[REPLICA_HEADER], frames_of(response.text)


def approval(frames: list[Any]) -> dict[str, Any]:
    return next(f["payload"] for f in frames if f != "[DONE]" and f["type"] == "tool-call-approval")


def replica_actor(unique_id: str) -> Any:
    controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
    running = ray.get(controller._all_running_replicas.remote())
    infos = [info for infos in running.values() for info in infos]
    name = next(i.actor_name for i in infos if i.replica_id.unique_id == unique_id)
    return ray.get_actor(name, namespace=SERVE_NAMESPACE)


async def gone(pid: int) -> bool | None:
    return True if not os.path.exists(f"/proc/{pid}") else None


class Scenario:
    def __init__(self, client: httpx.AsyncClient, store: RedisStore, calls: CallLog, gates: Path) -> None:
        self.client, self.store, self.calls, self.gates = client, store, calls, gates

    def deletes(self, prompt: str) -> int:
        return sum(1 for e in self.calls.entries("delete_record") if e["id"] == prompt)

    async def held(self, prompt: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            return next((e for e in self.calls.entries("held") if e["prompt"] == prompt), None)

        return dict(await until(check, f"the model to hold {prompt}"))

    async def kill_mid_stream(self, path: str, body: Any, prompt: str) -> dict[str, Any]:
        """Open a stream, wait until the model holds it, kill the replica serving it (and wait until the
        agent process holding the turn is gone with it), then release the model. What the reader saw."""
        seen: list[str] = []
        async with self.client.stream("POST", path, json=body, headers=ADMIN) as response:
            replica = response.headers[REPLICA_HEADER]
            run_id = response.headers["x-troupe-run-id"]
            held = await self.held(prompt)
            ray.kill(replica_actor(replica), no_restart=True)
            await until(lambda: gone(int(held["pid"])), "the held agent process to exit")
            try:
                async for line in response.aiter_lines():
                    seen.append(line)
            except httpx.HTTPError as exc:
                seen.append(f"broken: {type(exc).__name__}")
        (self.gates / prompt).touch()
        return {"replica": replica, "run_id": run_id, "done": "data: [DONE]" in seen, "tail": seen[-1:]}

    async def audit(self, run_id: str) -> list[str]:
        return [e.kind for e in await self.store.list_audit(run_id)]


async def stream_through_one_decide_through_other(s: Scenario) -> None:
    tries: list[tuple[str, str]] = []
    for n in range(20):
        prompt = f"split-{n}"
        streamed_on, frames = await post_stream(s.client, "/api/agents/ops/stream", {"messages": prompt})
        paused = approval(frames)
        body = {"runId": frames[0]["runId"], "toolCallId": paused["toolCallId"]}
        decided_on, done = await post_stream(s.client, "/api/agents/ops/approve-tool-call", body)
        tries.append((streamed_on, decided_on))
        if decided_on != streamed_on:
            report(
                "split",
                tries=tries,
                paused_types=[f["type"] for f in frames if f != "[DONE]"],
                decided_types=[f["type"] if f != "[DONE]" else f for f in done],
                text="".join(f["payload"]["text"] for f in done[:-1] if f["type"] == "text-delta"),
                deletes=s.deletes(prompt),
                audit=await s.audit(body["runId"]),
            )
            return
    report("split", tries=tries)


async def killed_while_starting(s: Scenario) -> None:
    """The replica streaming a run dies mid-turn; the run is taken over, pauses, and is decided once."""
    prompt = "hold-before-1"
    killed = await s.kill_mid_stream("/api/agents/ops/stream", {"messages": prompt}, prompt)

    async def paused() -> dict[str, Any] | None:
        response = await s.client.get("/api/agents/ops/suspended-runs", headers=ADMIN)
        if response.status_code != 200:
            return None
        runs = response.json()["runs"]
        return next((r for r in runs if r["runId"] == killed["run_id"]), None)

    found = await until(paused, "the run to pause again on a live replica")
    body = {"runId": killed["run_id"], "toolCallId": "c1"}
    decided_on, done = await post_stream(s.client, "/api/agents/ops/approve-tool-call", body)
    report(
        "killed-starting",
        killed=killed,
        paused_tool=found["toolCalls"][0]["toolName"] if found.get("toolCalls") else found,
        decided_on=decided_on,
        decided_types=[f["type"] if f != "[DONE]" else f for f in done],
        deletes=s.deletes(prompt),
        audit=await s.audit(killed["run_id"]),
    )


async def killed_while_deciding(s: Scenario) -> None:
    """The replica streaming an approved run dies after the tool ran, mid-turn: the decision is not lost,
    the run is taken over and finishes, the tool ran once."""
    prompt = "hold-after-1"
    _, frames = await post_stream(s.client, "/api/agents/ops/stream", {"messages": prompt})
    run_id = frames[0]["runId"]
    body = {"runId": run_id, "toolCallId": approval(frames)["toolCallId"]}
    killed = await s.kill_mid_stream("/api/agents/ops/approve-tool-call", body, prompt)

    async def finished() -> bool | None:
        return True if await s.store.load_run(run_id) is None else None

    await until(finished, "the decided run to finish on a live replica")
    again = await s.client.post("/api/agents/ops/approve-tool-call", json=body, headers=ADMIN)
    report(
        "killed-deciding",
        killed=killed,
        deletes=s.deletes(prompt),
        audit=await s.audit(run_id),
        again_status=again.status_code,
        again_code=again.json().get("code"),
    )


def listening_on(port: int) -> list[str]:
    """The local addresses with a TCP socket listening on ``port``."""
    return [listener.address for listener in tcp_listeners() if listener.port == port]


async def auth_stays_on(client: httpx.AsyncClient, port: int) -> None:
    anonymous = await client.get("/api/agents")
    wrong = await client.get("/api/agents", headers={"Authorization": "Bearer nope"})
    admin = await client.get("/api/agents", headers=ADMIN)
    report(
        "auth",
        anonymous=anonymous.status_code,
        wrong=wrong.status_code,
        admin=admin.status_code,
        replica_named=REPLICA_HEADER in admin.headers,
        listening=listening_on(port),
        # Every TCP listener of this driver's processes (Ray's, Serve's proxy and replicas'): where each is.
        listeners=listeners_of(process_tree(os.getpid())),
    )


async def main(url: str, work: Path) -> None:
    prefix = f"serve-{uuid.uuid4().hex[:8]}:"
    gates = work / "gates"
    gates.mkdir()
    # The replicas' runtimes read these (Ray's workers inherit this process's environment).
    os.environ.update(
        SERVE_TEST_CALLS=str(work / "calls.jsonl"),
        SERVE_TEST_GATES=str(gates),
        SERVE_TEST_REDIS=url,
        SERVE_TEST_PREFIX=prefix,
        # A lost replica's runs are taken over within a couple of seconds instead of six.
        TROUPE_HEARTBEAT_S="0.5",
    )
    port = free_port()
    settings = DoorSettings(keys=keyring({"key-admin": {"name": "ops", "admin": True}}))
    start("serve_app:runtime", settings, replicas=2, port=port)
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            await auth_stays_on(client, port)
            s = Scenario(client, store, CallLog(work / "calls.jsonl"), gates)
            await stream_through_one_decide_through_other(s)
            await killed_while_starting(s)
            await killed_while_deciding(s)
    finally:
        await store.close()
        stop(embedded=True)
        ray.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
