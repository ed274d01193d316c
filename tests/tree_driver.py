"""A process that pauses a three-level tree on Redis and exits: ``python tree_driver.py URL PREFIX LOG``."""

from __future__ import annotations

import asyncio
import sys

from trees import three_levels

from troupe import RedisStore, Runtime
from troupe.testing import CallLog


async def main(url: str, prefix: str, log: str) -> None:
    top = three_levels(CallLog(log))
    runtime = Runtime([top], storage=RedisStore.from_url(url, prefix=prefix), executor="ray")
    paused = await top.generate("tidy up")
    print(f"PAUSED {paused.run_id} {paused.suspend_payload['tool_call_id']}", flush=True)
    await runtime.shutdown()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
