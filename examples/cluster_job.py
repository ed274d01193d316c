"""A Ray job: start runs that pause for approval, print their run ids, and exit.

    ray job submit --address http://127.0.0.1:8265 --working-dir examples --runtime-env-json '{
        "pip": ["${RAY_RUNTIME_ENV_CREATE_WORKING_DIR}/wheels/troupe_runtime-0.1.0-py3-none-any.whl"],
        "env_vars": {"TROUPE_REDIS_URL": "redis://127.0.0.1:6399/0"}}' -- python cluster_job.py rec-001

with Troupe's wheel built into examples/wheels/ first: the runtime env installs it on the nodes, so
neither the cluster nor the submitting shell needs Troupe. examples/README.md has the whole sequence.

Each record id becomes one run of the ``ops`` supervisor (examples/cluster_agents.py); the agents run as
Ray actors on the cluster. Every run pauses when the ``records`` subagent asks to delete its record. The
pauses are checkpointed in Redis before they are announced, so the job can end: any process with the
same agents and the same Redis decides them later (examples/cluster_decide.py), with or without Ray.

Prints one ``PAUSED <run id> <tool> <args>`` line per run, then the table of what waits.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

# The agents' module is imported by the cluster's workers under the name they find it by: the job's
# working directory (this folder) is on their path, so it is ``cluster_agents`` here too.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_agents import build_ops, redis_store

from troupe import Runtime


async def main(record_ids: list[str]) -> int:
    # "auto": the cluster this job was submitted to (Ray sets RAY_ADDRESS for a job's driver), or the
    # one `ray start` left on this machine.
    runtime = Runtime([build_ops()], storage=redis_store(), ray_address=os.environ.get("RAY_ADDRESS", "auto"))
    ops = runtime.get_agent("ops")
    try:
        results = await asyncio.gather(
            *(
                ops.generate(f"Please delete {record}", thread_id="cluster-job", resource_id=record)
                for record in record_ids
            )
        )
        for result in results:
            if result.finish_reason != "suspended" or result.suspend_payload is None:
                print(f"run {result.run_id} did not pause: {result.finish_reason} {result.text!r}")
                return 1
            payload = result.suspend_payload
            print("PAUSED", result.run_id, payload["tool_name"], json.dumps(payload["args"]), flush=True)
        print(await ops.list_suspended_runs(thread_id="cluster-job"), flush=True)
    finally:
        await runtime.shutdown()  # the actors go; the paused runs stay in Redis
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:] or ["rec-001", "rec-002", "rec-003"])))
