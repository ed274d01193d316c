"""A simulated three-node Ray cluster (``ray.cluster_utils.Cluster``: head + 2 workers) running Troupe trees
on a real Redis: ``python cluster_driver.py REDIS_URL WORKDIR``. It has a Ray of its own (one per process),
so it runs apart from the test session's; it prints one ``RESULT <json>`` line per scenario with what it
observed, and the test asserts on those.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import ray
from blocking import blocking_tool, wait_for
from helpers import echo_model
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from trees import delegating, three_levels, two_levels
from troupe.actors import ray_auth
from troupe.core.run.delegation import child_run_id

from troupe import Agent, RedisStore, Runtime
from troupe.errors import TroupeError
from troupe.testing import CallLog, tool_call


def report(name: str, **observed: Any) -> None:
    print("RESULT " + json.dumps({"scenario": name, **observed}), flush=True)


def pinned(node_id: str) -> dict[str, Any]:
    # Soft: a node that is lost takes the pin with it, and Ray may restart the actor elsewhere.
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=True)}


async def node_of(runtime: Runtime, agent_id: str) -> str:
    handle: Any = runtime.handle(agent_id)
    return str((await handle.actor.call_while_restarting("stats"))["node_id"])


async def three_level_tree(url: str, work: Path, nodes: list[str]) -> None:
    """top on the head, mid on worker 1, the leaf on worker 2: approve one run, decline another."""
    calls = CallLog(work / "tree.jsonl")
    top = three_levels(calls)
    placement = {"top": pinned(nodes[0]), "mid": pinned(nodes[1]), "data": pinned(nodes[2])}
    store = RedisStore.from_url(url, prefix=f"tree-{uuid.uuid4().hex[:8]}:")
    runtime = Runtime([top], storage=store, executor="ray", actor_options=placement)
    try:
        first = await top.generate("tidy up")
        placed = {a: await node_of(runtime, a) for a in placement}
        approved = await top.approve_tool_call_generate(run_id=first.run_id, tool_call_id="t1")
        second = await top.generate("tidy up again")
        declined = await top.decline_tool_call_generate(
            run_id=second.run_id, tool_call_id="t1", reason="keep it"
        )
        report(
            "three-level",
            expected_nodes={a: n for a, n in zip(placement, nodes, strict=True)},
            placed=placed,
            paused=[first.finish_reason, second.finish_reason],
            agent_path=first.suspend_payload["agent_path"] if first.suspend_payload else None,
            approved_text=approved.text,
            declined_text=declined.text,
            deletes=calls.count("delete_record"),
        )
    finally:
        await runtime.shutdown()


async def paused_subagent_node_removed(url: str, work: Path, cluster: Cluster, nodes: list[str]) -> None:
    """The subagent's node is removed while its run is paused; then one approval at the top."""
    calls = CallLog(work / "removed.jsonl")
    sup = two_levels(calls)
    placement = {"sup": pinned(nodes[0]), "data": pinned(nodes[2])}
    store = RedisStore.from_url(url, prefix=f"removed-{uuid.uuid4().hex[:8]}:")
    runtime = Runtime([sup], storage=store, executor="ray", actor_options=placement)
    try:
        paused = await sup.generate("please delete u1")
        before = await node_of(runtime, "data")
        victim = next(n for n in cluster.worker_nodes if n.node_id == nodes[2])
        cluster.remove_node(victim)
        done = await sup.approve_tool_call_generate(
            run_id=paused.run_id,
            tool_call_id="d1",
            fingerprint=paused.suspend_payload["fingerprint"] if paused.suspend_payload else None,
        )
        after = await node_of(runtime, "data")
        child = child_run_id(paused.run_id, "d1")
        report(
            "node-removed",
            removed=nodes[2],
            node_before=before,
            node_after=after,
            finish_reason=done.finish_reason,
            text=done.text,
            deletes=calls.count("delete_record"),
            top_audit=[e.kind for e in await store.list_audit(paused.run_id)],
            child_audit=[e.kind for e in await store.list_audit(child)],
            left_running=await store.list_running_runs("sup") + await store.list_running_runs("data"),
        )
    finally:
        await runtime.shutdown()


async def replicas_survive_a_lost_node(url: str, work: Path, cluster: Cluster) -> None:
    """The subagent runs as two replicas spread over the two workers; one worker's node is removed while
    two runs are paused; both are then approved once and finish."""
    cluster.add_node(num_cpus=1, resources={"worker": 4})  # two workers again after the last removal
    cluster.wait_for_nodes()
    calls = CallLog(work / "replicas.jsonl")
    sup = two_levels(calls)
    placement = {
        "sup": pinned(cluster.head_node.node_id),  # only the subagent's replicas are at risk here
        "data": {"resources": {"worker": 1}, "scheduling_strategy": "SPREAD"},
    }
    store = RedisStore.from_url(url, prefix=f"replicas-{uuid.uuid4().hex[:8]}:")
    runtime = Runtime([sup], storage=store, executor="ray", actor_options=placement, replicas={"data": 2})
    try:
        handle: Any = runtime.handle("data")
        replica_nodes = [str((await a.call_while_restarting("stats"))["node_id"]) for a in handle.replicas]
        paused = [await sup.generate(f"please delete u{i}") for i in range(2)]
        victim = next(n for n in cluster.worker_nodes if n.node_id == replica_nodes[0])
        cluster.remove_node(victim)
        done = [await sup.approve_tool_call_generate(run_id=p.run_id, tool_call_id="d1") for p in paused]
        report(
            "replicas",
            replica_nodes=replica_nodes,
            removed=replica_nodes[0],
            paused=[p.finish_reason for p in paused],
            finish_reasons=[d.finish_reason for d in done],
            texts=[d.text for d in done],
            deletes=calls.count("delete_record"),
            audits=[[e.kind for e in await store.list_audit(p.run_id)] for p in paused],
            later=(await sup.generate("please delete u9")).finish_reason,
        )
    finally:
        await runtime.shutdown()


async def subagent_out_of_reach(url: str, work: Path, cluster: Cluster) -> None:
    """The subagent is pinned hard to a worker whose node is removed while its run is paused: nothing can
    run it, so the approval is accepted, recorded and reported as pending, not as the same pause."""
    spare = cluster.add_node(num_cpus=1, resources={"worker": 4})
    cluster.wait_for_nodes()
    calls = CallLog(work / "pending.jsonl")
    sup = two_levels(calls)
    hard = {"scheduling_strategy": NodeAffinitySchedulingStrategy(spare.node_id, soft=False)}
    store = RedisStore.from_url(url, prefix=f"pending-{uuid.uuid4().hex[:8]}:")
    placement = {"sup": pinned(cluster.head_node.node_id), "data": hard}
    runtime = Runtime([sup], storage=store, executor="ray", actor_options=placement)
    try:
        paused = await sup.generate("please delete u1")
        cluster.remove_node(spare)
        try:
            await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1")
            raised, message = None, ""
        except TroupeError as exc:
            raised, message = exc.code, f"{type(exc).__name__}: {exc}"
        top = await store.load_run(paused.run_id)
        child = await store.load_run(child_run_id(paused.run_id, "d1"))
        decided = top.state.call("d1") if top is not None else None
        report(
            "out-of-reach",
            raised=raised,
            message=message,
            top_status=top.state.status if top is not None else None,
            top_decision=decided.decision.kind if decided and decided.decision else None,
            child_status=child.state.status if child is not None else None,
            top_audit=[e.kind for e in await store.list_audit(paused.run_id)],
            deletes=calls.count("delete_record"),
        )
    finally:
        await runtime.shutdown()


async def node_removed_mid_tool(url: str, work: Path, cluster: Cluster) -> None:
    """The subagent's node is removed while its approved tool is executing (the tool says it started,
    then blocks on a gate nobody opens): the tool must not run again unasked, and each decision is
    audited once. The interrupted call comes back for a decision; it is declined."""
    worker = cluster.add_node(num_cpus=1, resources={"worker": 4})
    cluster.wait_for_nodes()
    calls = CallLog(work / "mid-tool.jsonl")
    gate = str(work / "mid-tool.gate")  # never made: only the node's removal ends the first execution
    data = Agent(
        "data",
        model=echo_model(tool_call("work", {"name": "job-1"}, id="leaf-1")),
        tools=[blocking_tool(calls, gate, require_approval=True)],
    )
    sup = Agent("sup", model=delegating("sup", ("data", "do job-1", "d1")), agents={"data": data})
    store = RedisStore.from_url(url, prefix=f"mid-tool-{uuid.uuid4().hex[:8]}:")
    placement = {"sup": pinned(cluster.head_node.node_id), "data": pinned(worker.node_id)}
    runtime = Runtime([sup], storage=store, executor="ray", actor_options=placement)
    try:
        paused = await sup.generate("run job-1")
        approving = asyncio.ensure_future(
            sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1")
        )
        await wait_for(lambda: calls.count("work") == 1, what="the approved tool to start")
        started = calls.entries("work")[0]
        tool_node = await node_of(runtime, "data")
        cluster.remove_node(worker)
        await wait_for(lambda: not os.path.exists(f"/proc/{started['pid']}"), what="the tool's process to go")
        again = await asyncio.wait_for(approving, 120)  # a tool run again would block here for good
        payload = again.suspend_payload or {}
        declined = await sup.decline_tool_call_generate(
            run_id=paused.run_id, tool_call_id="d1", reason="not after a crash"
        )
        child = child_run_id(paused.run_id, "d1")
        report(
            "mid-tool",
            tool_node=tool_node,
            removed=worker.node_id,
            after_approval=again.finish_reason,
            interrupted=payload.get("interrupted"),
            paused_tool=payload.get("tool_name"),
            finish_reason=declined.finish_reason,
            text=declined.text,
            phases=[e["phase"] for e in calls.entries("work")],
            top_audit=[e.kind for e in await store.list_audit(paused.run_id)],
            child_audit=[e.kind for e in await store.list_audit(child)],
            left_running=await store.list_running_runs("sup") + await store.list_running_runs("data"),
        )
    finally:
        await runtime.shutdown()


async def main(url: str, work: Path) -> None:
    # As private as the Ray Troupe embeds: token auth on (the nodes inherit the token from here).
    ray_auth.prepare_embedded()
    # Callers give up on an unreachable actor after 3 s instead of 30 (the nodes inherit this).
    os.environ["TROUPE_RESTART_WAIT_S"] = "3"
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            # Notice a lost node in about a second instead of Ray's default tens of seconds.
            "_system_config": {"health_check_period_ms": 300, "health_check_failure_threshold": 3},
        },
    )
    workers = [cluster.add_node(num_cpus=1, resources={"worker": 4}) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    nodes = [cluster.head_node.node_id, *(w.node_id for w in workers)]
    try:
        await three_level_tree(url, work, nodes)
        await paused_subagent_node_removed(url, work, cluster, nodes)
        await replicas_survive_a_lost_node(url, work, cluster)
        await subagent_out_of_reach(url, work, cluster)
        await node_removed_mid_tool(url, work, cluster)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
