"""The documentation's example programs run as a reader runs them, and print what their page says.

A docs page shows a program by including its file (``--8<-- "docs/examples/NAME.py"``, MkDocs' snippets),
then says what it prints in a plain fenced block after it (the prose between says "prints"). Each such
program runs here in a fresh process, from a folder of its own (its SQLite files land there), with the
repository's root on ``PYTHONPATH`` as the page tells for ``examples.records_app``, and its output must be
exactly the page's. The programs that talk to the demo server on its fixed port (``RUN_HERE``) are run by
``tests/readme_driver.py`` instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, call, reply, serving
from readme_driver import ROOT, RUN_HERE, Block, blocks

EXAMPLES = ROOT / "docs" / "examples"


def _included() -> list[Block]:
    return [b for b in blocks() if b.source is not None]


def _shown_output(block: Block) -> str | None:
    """The plain block right after ``block`` on its page, when the prose between says it prints it."""
    found = blocks()
    after = found[found.index(block) + 1 :]
    following = next((b for b in after if b.file == block.file), None)
    if following is None or following.lang != "":
        return None
    lines = (ROOT / block.file).read_text().splitlines()
    between = "\n".join(lines[block.end - 1 : following.line - 1])
    return following.text if re.search(r"\bprints\b", between) else None


def _run(program: Path, cwd: Path, **more_env: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "RAY_ADDRESS", "TROUPE_EXECUTOR")
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(more_env)
    return subprocess.run(
        [sys.executable, str(program)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


PROGRAMS = [b for b in _included() if b.source not in RUN_HERE]


def test_every_example_program_is_shown_on_a_page_and_every_include_is_a_program():
    included = {b.source for b in _included()}
    on_disk = {str(path.relative_to(ROOT)) for path in EXAMPLES.glob("*.py")}
    assert included == on_disk, f"shown but missing: {included - on_disk}; never shown: {on_disk - included}"
    assert included >= RUN_HERE, RUN_HERE - included


@pytest.mark.parametrize("include", PROGRAMS, ids=lambda b: f"{b.source}@{b.file}:{b.line}")
def test_an_example_prints_what_its_page_says(include: Block, tmp_path: Path):
    expected = _shown_output(include)
    assert expected is not None, (
        f"{include.file}:{include.line} shows {include.source} without what it prints"
    )
    done = _run(ROOT / str(include.source), tmp_path)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed = "\n".join(line.rstrip() for line in done.stdout.splitlines())
    assert printed == expected.rstrip("\n"), (
        f"{include.source} printed:\n{printed}\nthe page says:\n{expected}"
    )


def test_the_readmes_quick_start_is_the_docs_quick_start():
    """The front page's example and the tutorial's first program are one program: the README cannot
    include a file, so its copy must stay the same text."""
    [readme_quick_start] = [b for b in blocks() if b.file == "README.md" and b.lang == "python"]
    assert readme_quick_start.text == (EXAMPLES / "quickstart.py").read_text()
    shown = _shown_output(readme_quick_start)
    page = next(b for b in _included() if b.source == "docs/examples/quickstart.py")
    assert shown is not None and shown == _shown_output(page), "the README and the tutorial print the same"


def test_the_quick_start_runs_with_the_real_model_its_comment_offers(tmp_path: Path):
    """The quick start says ``or model="openai/gpt-4o-mini"``: so changed, it runs against an OpenAI
    server (the local fake here), whose model names its tool call as it likes, and prints the same."""
    scripted = (
        'model=ScriptedModel([tool_call("delete_record", {"id": "abc-123"}, id="call-1"), text("Deleted.")]),'
    )
    program = (EXAMPLES / "quickstart.py").read_text()
    assert program.count(scripted) == 1 and 'or model="openai/gpt-4o-mini"' in program
    (tmp_path / "quickstart.py").write_text(program.replace(scripted, 'model="openai/gpt-4o-mini",'))
    server = FakeOpenAI(
        [reply(calls=[call("delete_record", {"id": "abc-123"}, id="call_9fKq2Lw0")]), reply("Deleted.")]
    )
    with serving(server) as url:
        done = _run(tmp_path / "quickstart.py", tmp_path, OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-test")
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout == "needs approval: delete_record {'id': 'abc-123'}\nDeleted.\n"
    assert server.played == 2
