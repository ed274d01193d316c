"""Every fenced shell and Python block of README.md, examples/README.md and the docs (docs/**/*.md) runs as
written, the way a new user runs it: a fresh copy of the repository, the system's PATH, a home of its
own, each block in a fresh shell after the docs' "Install" steps (tests/readme_driver.py says how each
block is run and checked; the Python programs the docs include run in tests/test_docs_examples.py).

The blocks use the docs' fixed ports and the production tutorial ends with ``ray stop``, which stops every
Ray process it can see: so the driver runs in a PID namespace of its own (``unshare``), where it sees
only what the blocks started, and everything it started ends with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from readme_driver import NOT_RUN, blocks

TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.timeout(3600)  # installs (from the pip cache), Ray, Serve and a cluster job


def _in_own_namespace() -> list[str]:
    user = [] if os.getuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--pid", "--fork", "--mount-proc"]


def test_every_block_of_the_readmes_and_docs_runs_as_written(tmp_path: Path):
    command = [*_in_own_namespace(), sys.executable, str(TESTS / "readme_driver.py"), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3500, check=False)
    report_file = tmp_path / "report.json"
    assert report_file.exists(), f"the driver ended with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    report = json.loads(report_file.read_text())
    assert "ports_taken" not in report, f"the docs' ports are in use on this machine: {report}"
    results = report["results"]
    failed = [r for r in results if r["status"] == "failed"]
    assert not failed, "\n\n".join(f"{r['file']}:{r['line']} {r['first']}\n{r['detail']}" for r in failed)
    seen = {(r["file"], r["line"]) for r in results}
    missing = [(b.file, b.line, b.first) for b in blocks() if (b.file, b.line) not in seen]
    assert not missing, f"blocks no scenario runs (add them to tests/readme_driver.py): {missing}"


def test_the_blocks_not_run_are_few_and_each_says_why():
    assert len(NOT_RUN) <= 3 and all(len(reason) > 20 for reason in NOT_RUN.values())
    firsts = [b.text for b in blocks()]
    for line in NOT_RUN:
        assert sum(line in text for text in firsts) == 1, line
