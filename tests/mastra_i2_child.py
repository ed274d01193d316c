"""Scenario i2's first process: stream until the approval pause, print what it saw as one JSON line, exit.

python tests/mastra_i2_child.py <sqlite file> <call log>
"""

from __future__ import annotations

import asyncio
import json
import sys

from mastra_reference import approver

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog


async def main(db: str, log: str) -> None:
    agent = approver(CallLog(log), model="model-instance-1")
    runtime = Runtime([agent], storage=SqliteStore(db), executor="local")
    try:
        stream = await agent.stream("Find the user Ada", thread_id="t-1", resource_id="u-1")
        types = [c.type async for c in stream.full_stream]
        result = await stream.result()
    finally:
        await runtime.shutdown()
    print(json.dumps({"run_id": stream.run_id, "types": types, "finish_reason": result.finish_reason}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
