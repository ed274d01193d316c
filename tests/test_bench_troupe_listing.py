"""The benchmark's W4 on the Troupe rows lists every paused run: listings are paged (issue 42), so the
harness follows the cursor past the first page instead of approving what one page holds."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from troupe_systems import TroupeSystem


async def test_w4_lists_every_paused_run_past_the_first_page(tmp_path: Path) -> None:
    system = TroupeSystem(tmp_path, {"store_tag": "w4", "nonce": "t"}, "local", "sqlite")
    await system.open()
    try:
        paused = [await system.pause(i) for i in range(1_050)]  # past one page of the largest size
        listed = await system.list_paused()
    finally:
        await system.close()
    assert len(listed) == len(paused)
    assert set(listed) == set(paused)
