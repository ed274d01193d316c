"""Running a scenario driver (``cluster_driver.py``, ``serve_driver.py``): a Python process with a Ray of
its own, which prints one ``RESULT <json>`` line per scenario it observed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent


def scenario_results(driver: str, *args: str, timeout: float, **env: str) -> dict[str, dict[str, Any]]:
    """Run ``tests/<driver>`` with ``args`` (and ``env`` added to this process's environment); its
    results by scenario name. A driver that fails fails the caller, with the end of its output."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]), **env}
    done = subprocess.run(
        [sys.executable, str(TESTS / driver), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    results = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return {r["scenario"]: r for r in results}
