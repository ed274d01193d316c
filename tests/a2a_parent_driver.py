"""A supervisor's process for the A2A crash tests: delegates to a remote A2A agent until the remote
task asks for input, reports the paused run, and waits to be killed (SIGKILL).

    python a2a_parent_driver.py DB CARD_URL KEY EXECUTOR [RAY_ADDRESS]

KEY may be ``-`` (no credential).
"""

from __future__ import annotations

import asyncio
import sys

from a2a_trees import desk

from troupe import A2AAgent, Runtime, SqliteStore


async def main(db: str, card_url: str, key: str, executor: str, address: str | None) -> None:
    remote = A2AAgent("vendor", card_url=card_url, bearer_token=None if key == "-" else key)
    top = desk(remote)
    Runtime([top], storage=SqliteStore(db), executor=executor, ray_address=address)  # type: ignore[arg-type]
    result = await top.generate("please", resource_id="r1")
    print(f"PAUSED {result.run_id} {result.finish_reason}", flush=True)
    await asyncio.Event().wait()  # hold the process (and its hosts) until killed


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(*args[:4], args[4] if len(args) > 4 else None))
