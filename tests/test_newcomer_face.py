"""What a newcomer meets first (issue 45): ``dir(troupe)`` is the public API, the version is there
(``troupe.__version__``, ``troupe --version``, naming the distribution ``troupe-runtime``), the package
is typed, and a slow start says what it is doing: one plain line on a pipe, a spinner on a terminal."""

from __future__ import annotations

import importlib.metadata
import io
import os
import select
import subprocess
import sys
import tomllib
from pathlib import Path

from troupe.actors.announce import FRAMES, starting

import troupe
from troupe.ops.version import DISTRIBUTION, checkout_version

ROOT = Path(__file__).resolve().parent.parent


def test_dir_of_troupe_is_the_public_api_and_nothing_private():
    # Everything loaded that a session may load: submodules become attributes of the package.
    import troupe.ops.demo
    import troupe.testing

    troupe.create_tool, troupe.client, troupe.__version__  # noqa: B018 - loaded as a user would
    listed = dir(troupe)
    dunders = {name for name in listed if name.startswith("__") and name.endswith("__")}
    assert set(listed) - dunders == set(troupe.__all__)
    assert "__version__" in dunders
    assert not {"Any", "os", "importlib", "TYPE_CHECKING", "ops", "core", "_EXPORTS"} & set(listed)


def test_the_version_is_the_installed_distributions_and_the_command_names_it():
    version = importlib.metadata.version(DISTRIBUTION)
    assert troupe.__version__ == version
    with (ROOT / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    assert (project["name"], project["version"]) == ("troupe-runtime", version)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("troupe")), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, f"troupe-runtime {version}\n"), done.stderr


def test_a_plain_checkout_reads_its_version_from_its_pyproject(tmp_path):
    assert checkout_version(ROOT) == troupe.__version__
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "troupe"\nversion = "0.5.2"\n')
    assert checkout_version(tmp_path) == "0+unknown", "another project's pyproject is not Troupe's"
    assert checkout_version(tmp_path / "missing") == "0+unknown"


def test_the_package_is_typed():
    assert (ROOT / "troupe" / "py.typed").is_file()


def test_a_slow_start_on_a_pipe_is_one_plain_line():
    out = io.StringIO()  # not a terminal: no spinner, whatever time it takes
    with starting("starting Ray (usually 5-15 s)", out):
        pass
    assert out.getvalue() == "troupe: starting Ray (usually 5-15 s)...\n"


def test_a_slow_start_on_a_terminal_spins_until_it_is_done():
    leader, follower = os.openpty()
    terminal = open(follower, "w", encoding="utf-8")  # noqa: SIM115 - closed below, after the reads
    seen = b""
    try:
        with starting("starting Ray (usually 5-15 s)", terminal):
            # The block lasts until the spinner has drawn two frames: no sleep, no guess of its pace.
            while sum(frame.encode() in seen for frame in FRAMES) < 2:
                seen += _read(leader)
        while not seen.endswith(b"\n"):  # the last line, written before the block returned
            seen += _read(leader)
    finally:
        terminal.close()
        os.close(leader)
    text = seen.decode()
    assert text.startswith("\rtroupe: starting Ray (usually 5-15 s)... ")
    assert "\rtroupe: starting Ray (usually 5-15 s)... done (" in text
    assert text.rstrip().endswith(" s)\x1b[K"), repr(text)


def _read(fd: int) -> bytes:
    ready, _, _ = select.select([fd], [], [], 30)
    assert ready, "the terminal got nothing for 30 s"
    return os.read(fd, 4096)
