"""A newcomer's first steps from a clone (issue 45): ``git clone`` names the folder ``troupe``,
``bash scripts/demo.sh`` installs Troupe into the clone's ``.venv`` out loud (pip says what it does), and a
script run beside the clone imports the installed Troupe, not the clone's folder.

That folder has no ``__init__.py``, so Python's path finder takes it for a namespace package before
setuptools' editable finder is asked ("cannot import name 'Agent' from 'troupe' (unknown location)");
Troupe's build backend (scripts/backend/troupe_backend.py) has the install asked before a namespace
package, and only before one.

The clone is the working tree's files (what ``git clone`` of this commit would hold, uncommitted changes
included); its ``.venv`` is a virtualenv kept under ``.build/venvs`` with Troupe's dependencies, so a run
installs only Troupe itself (see tests/installs.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from installs import ROOT, checkout_venv, clean_env

pytestmark = pytest.mark.timeout(900)  # the first run on a new machine builds the virtualenv


def _clone(dest: Path) -> Path:
    """The working tree's files (tracked, and new ones git does not ignore) in ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted in the working tree is still listed by --cached
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def dependencies() -> Path:
    """A virtualenv holding Troupe's dependencies (and a Troupe that is not the clone's)."""
    return checkout_venv()


def test_a_script_beside_a_clone_named_troupe_imports_the_installed_troupe(tmp_path, dependencies):
    clone = _clone(tmp_path / "troupe")
    (clone / ".venv").symlink_to(dependencies, target_is_directory=True)
    env = clean_env()
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"

    # The README's first command, with nothing to answer: it installs, then the demo starts and ends.
    demo = subprocess.run(
        ["bash", "scripts/demo.sh", "--executor", "local", "--store", str(tmp_path / "demo.db")],
        cwd=clone,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    said = demo.stdout + demo.stderr
    assert "demo.sh: installing Troupe into .venv" in said, said[-3000:]
    assert "demo.sh: [2/2] pip install -e ." in said
    assert "Successfully installed troupe-runtime" in said, "pip's own report, not --quiet silence"
    assert "Troupe demo: agent records-assistant" in said, said[-3000:]

    script = tmp_path / "my_agents.py"
    script.write_text(
        "from troupe import Agent, create_tool\n"
        "import troupe\n"
        "print(troupe.__file__)\n"
        "print(Agent.__module__, create_tool.__module__)\n"
    )
    ran = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), script.name],
        cwd=tmp_path,  # the clone's parent: its folder troupe/ is what `import troupe` finds on sys.path
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines() == [
        str(clone / "troupe" / "__init__.py"),  # the editable install: the clone's own code
        "troupe.supervisor.agent troupe.core.vocabulary.tools",
    ]

    # A real package named troupe on sys.path (here the working directory's) still comes first, as it
    # always did: only a folder without __init__.py no longer does.
    shadow = tmp_path / "elsewhere" / "troupe"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    found = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-c", "import troupe; print(troupe.__file__)"],
        cwd=shadow.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert found.stdout.strip() == str(shadow / "__init__.py"), found.stderr[-3000:]
