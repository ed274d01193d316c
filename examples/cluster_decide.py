"""Decide the cluster job's paused runs from any process: no Ray needed, only the same Redis.

    python examples/cluster_decide.py                          # list what waits
    python examples/cluster_decide.py ids                      # just their run ids, oldest first
    python examples/cluster_decide.py approve RUN_ID
    python examples/cluster_decide.py decline RUN_ID "why not"

The runs go on in this process (``executor="local"``): the approved tool runs here, the models answer
here, and the run's end is written back to Redis.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_agents import build_ops, redis_store

from troupe import Runtime
from troupe.errors import TroupeError


async def main(args: list[str]) -> int:
    runtime = Runtime([build_ops()], storage=redis_store(), executor="local")
    ops = runtime.get_agent("ops")
    try:
        if not args:
            print(await ops.list_suspended_runs())
            return 0
        if args == ["ids"]:  # oldest first, one a line: for a shell to pick from
            waiting = (await ops.list_suspended_runs()).runs
            print("\n".join(r.run_id for r in sorted(waiting, key=lambda r: r.suspended_at or 0)))
            return 0
        if len(args) < 2:
            print(__doc__)
            return 2
        action, run_id, *rest = args
        if action == "approve":
            result = await ops.approve_tool_call_generate(run_id=run_id)
        elif action == "decline":
            result = await ops.decline_tool_call_generate(run_id=run_id, reason=rest[0] if rest else None)
        else:
            print(__doc__)
            return 2
        print(result.finish_reason, result.text)
        return 0
    except TroupeError as exc:  # say, the run was decided already
        print(f"{exc.code}: {exc}", file=sys.stderr)
        return 1
    finally:
        await runtime.shutdown()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
