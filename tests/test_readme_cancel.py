"""The README's "Cancelling runs" example runs as written (``tests/test_readme_blocks.py`` runs every
block in a fresh install; this runs this one in the test's own environment, so a change that breaks it
fails here too)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_cancel_example_prints_that_the_run_was_cancelled(tmp_path: Path):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Cancelling runs\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    script = tmp_path / "cancel_example.py"
    script.write_text(block)

    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cancelled - wrong month"
