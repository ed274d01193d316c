"""On Ray each agent host owns its MCP sessions: a stdio server runs as a child of the agent's actor and
ends with it, on shutdown, on a crash and on a replica's loss; every replica has its own. A crash in
the middle of an MCP call follows the interrupted-call rules. With the real server-filesystem."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from blocking import wait_for
from helpers import chunks_of, echo_model
from mcp_servers import filesystem

from troupe import Agent, Hooks, MCPStdio, Runtime, SqliteStore
from troupe.testing import tool_call

pytestmark = pytest.mark.ray
HOSTILE = Path(__file__).resolve().parent / "hostile_mcp_server.py"


def server_processes(actor_pid: int) -> list[psutil.Process]:
    """The actor's descendants: the leash and the node server it started."""
    return psutil.Process(actor_pid).children(recursive=True)


def describe(processes: list[psutil.Process]) -> list[str]:
    described = []
    for process in processes:
        try:
            described.append(f"{process.pid} {' '.join(process.cmdline())[:160]}")
        except psutil.Error:
            described.append(f"{process.pid} (gone)")
    return described


async def actor_pid(runtime: Runtime, agent_id: str, replica: int = 0) -> int:
    handle: Any = runtime.handle(agent_id)
    return int((await handle.replicas[replica].call("stats"))["pid"])


def gone(processes: list[psutil.Process]) -> bool:
    """Every one has exited (a zombie waiting to be reaped has exited too)."""
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def reader(root: Path) -> Agent:
    (root / "a.txt").write_text("alpha")
    return Agent(
        "files",
        model=echo_model(tool_call("read_text_file", {"path": str(root / "a.txt")}, id="r1")),
        mcp_servers=[filesystem(root)],
    )


async def test_the_server_runs_under_the_agents_actor_and_ends_with_its_shutdown(tmp_path, ray_session):
    runtime = Runtime([reader(tmp_path)], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        assert (await runtime.get_agent("files").generate("read")).finish_reason == "stop"
        pid = await actor_pid(runtime, "files")
        tree = server_processes(pid)
        listing = describe(tree)
        # The whole command line: a description is cut short, and a clone's path can be long.
        assert any("server-filesystem" in " ".join(p.cmdline()) for p in tree), listing
    finally:
        await runtime.shutdown()
    await wait_for(lambda: gone(tree), what=f"the MCP server processes {listing} to end")


async def test_every_replica_has_its_own_server_and_a_lost_replica_takes_its_server_along(
    tmp_path, ray_session
):
    import ray

    runtime = Runtime(
        [reader(tmp_path)], storage=SqliteStore(tmp_path / "t.db"), executor="ray", replicas={"files": 2}
    )
    try:
        handle: Any = runtime.handle("files")
        for actor in handle.replicas:
            await actor.call("ping")  # each host opens its own session
        trees = [server_processes(await actor_pid(runtime, "files", i)) for i in range(2)]
        servers = [{p.pid for p in tree if p.cmdline()[0].endswith("/node")} for tree in trees]
        assert all(len(found) == 1 for found in servers) and servers[0] != servers[1], servers
        ray.kill(handle.replicas[1].handle, no_restart=True)  # a replica lost for good
        await wait_for(lambda: gone(trees[1]), what="the lost replica's server to end")
        assert not gone(trees[0])  # the other replica's session is its own
    finally:
        await runtime.shutdown()


async def test_a_server_that_outlives_its_stdin_still_ends_with_its_actor(tmp_path, ray_session):
    """A server that would keep running after its session's pipes close (a thread of its own) is still
    ended when its actor is killed without any chance to close it (ray.kill, as a node's loss does):
    the leash takes its process group down."""
    import ray

    server = MCPStdio("stubborn", sys.executable, [str(HOSTILE), "--stubborn"])
    agent = Agent("h", model=echo_model(tool_call("good", {}, id="g1")), mcp_servers=[server])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        assert (await runtime.get_agent("h").generate("go")).text == "g1=fine"
        handle: Any = runtime.handle("h")
        tree = server_processes(await actor_pid(runtime, "h"))
        assert any("hostile_mcp_server.py" in " ".join(p.cmdline()) for p in tree), describe(tree)
        ray.kill(handle.replicas[0].handle, no_restart=True)
        await wait_for(lambda: gone(tree), what=f"the stubborn server {describe(tree)} to end")
    finally:
        await runtime.shutdown()


async def test_a_server_that_outlives_its_stdin_ends_with_a_crashed_local_driver(tmp_path):
    """executor="local": the server is a child of the driver, which crashes (SIGKILL) with nobody to end
    its children; the leash does (the driver's death reaches it, and it ends the server's group)."""
    import json
    import subprocess

    from conftest import ROOT, TESTS

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)])}
    driver = subprocess.Popen(  # noqa: ASYNC220 - started once; it is only read and killed
        [sys.executable, str(TESTS / "mcp_crash_driver.py"), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert driver.stdout is not None
        report = json.loads(driver.stdout.readline())
        assert report["text"] == "g1=fine"
        tree = [psutil.Process(pid) for pid in report["pids"]]
        assert len(tree) == 2, report  # the leash and the server
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    await wait_for(lambda: gone(tree), what=f"the crashed driver's server {describe(tree)} to end")


async def test_a_crash_during_an_mcp_call_brings_the_gated_call_back_interrupted(tmp_path, ray_session):
    """move_file is gated and not idempotent: the actor dies after the server moved the file and before
    the result was checkpointed, so the call is not run again; it goes back to its human, marked
    interrupted, and the server process of the dead actor is gone."""
    (tmp_path / "from.txt").write_text("payload")
    marker = str(tmp_path / "crashed-once")

    def crash_once(tool_name: str, args: Any, output: Any, ctx: Any) -> None:
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)

    move = {"source": str(tmp_path / "from.txt"), "destination": str(tmp_path / "to.txt")}
    agent = Agent(
        "files",
        model=echo_model(tool_call("move_file", move, id="m1")),
        mcp_servers=[filesystem(tmp_path)],
        hooks=Hooks(after_tool_call=crash_once),
    )
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        files = runtime.get_agent("files")
        stream = await files.stream("move it")
        await chunks_of(stream)
        first_tree = server_processes(await actor_pid(runtime, "files"))
        approved = await files.approve_tool_call(run_id=stream.run_id, tool_call_id="m1")
        chunks = await chunks_of(approved)
        pause = chunks[-1]
        assert pause.type == "tool-call-approval" and pause.payload["interrupted"] is True
        assert (tmp_path / "to.txt").read_text() == "payload"  # it did run once
        await wait_for(lambda: gone(first_tree), what="the dead actor's MCP server to end")
        declined = await files.decline_tool_call(
            run_id=stream.run_id, tool_call_id="m1", reason="ran already"
        )
        assert (await declined.result()).finish_reason == "stop"
        assert (tmp_path / "to.txt").exists() and not (tmp_path / "from.txt").exists()
    finally:
        await runtime.shutdown()
