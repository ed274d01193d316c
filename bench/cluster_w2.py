"""W2 (supervisor -> subagent -> approval) on a simulated two-node Ray cluster (``ray.cluster_utils``),
over a private Redis: the supervisor and its subagent on the same node (calls over the channel) against
the subagent pinned to the other node (plain Ray calls, as across machines).

    python bench/cluster_w2.py [--cycles 200]

Both nodes share one machine, so "another node" measures Ray's cross-node call path and scheduling, not a
network. Prints one JSON line per placement with median and p95 milliseconds per cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from typing import Any

import ray
from approval_cycle import generate_cycle
from bench_agents import build_supervisor, make_store
from bench_common import percentile, private_redis
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from troupe.actors import ray_auth

from troupe import Runtime


def pinned(node_id: str) -> dict[str, Any]:
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


async def node_of(runtime: Runtime, agent_id: str) -> str:
    handle: Any = runtime.handle(agent_id)
    return str((await handle.actor.call_while_restarting("stats"))["node_id"])


async def measure(url: str, label: str, placement: dict[str, Any], cycles: int) -> dict[str, Any]:
    store = make_store("redis", None, url, prefix=f"cluster-w2-{label}:")  # type: ignore[arg-type]
    runtime = Runtime([build_supervisor()], storage=store, executor="ray", actor_options=placement)
    try:
        supervisor = runtime.get_agent("bench-supervisor")
        for _ in range(10):  # warm up: actors started, channels open
            await generate_cycle(supervisor)
        times = [await generate_cycle(supervisor) for _ in range(cycles)]
        nodes = {agent_id: await node_of(runtime, agent_id) for agent_id in placement}
    finally:
        await runtime.shutdown()
    return {
        "workload": "w2",
        "placement": label,
        "cycles": cycles,
        "median_ms": round(statistics.median(times), 3),
        "p95_ms": round(percentile(times, 0.95), 3),  # percentile takes a fraction
        # Where the actors really ran (asked of them), so "other-node" is checked, not assumed.
        "nodes": {agent_id: node[:8] for agent_id, node in nodes.items()},
        "same_node": len(set(nodes.values())) == 1,
    }


async def main(cycles: int) -> None:
    ray_auth.prepare_embedded()  # token auth on, as in an embedded Troupe; the nodes inherit it
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    head = cluster.head_node.node_id
    try:
        with private_redis() as url:
            same = {"bench-supervisor": pinned(head), "bench": pinned(head)}
            other = {"bench-supervisor": pinned(head), "bench": pinned(worker.node_id)}
            for label, placement in (("same-node", same), ("other-node", other)):
                print(json.dumps(await measure(url, label, placement, cycles)), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    asyncio.run(main(parser.parse_args().cycles))
