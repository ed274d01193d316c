"""Troupe as a user installs it: the built wheel, a new virtualenv with only that wheel (and what it
depends on), and a "plain" virtualenv with Ray and without Troupe (a cluster head started from any Python
that has Ray).

The virtualenvs are kept under ``.build/venvs`` (ignored by git), named after what went into them, so a
second run reuses them; a new machine (CI) builds them once. The wheel is always built anew.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENVS = ROOT / ".build" / "venvs"


def clean_env() -> dict[str, str]:
    """This process's environment less what points Python at this repository's packages: a Ray started
    in this process sets PYTHONPATH to its own import path, which would make pip in a new virtualenv
    find everything "already satisfied" there and install nothing."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


def build_wheel(dest: Path) -> Path:
    """Build Troupe's wheel from the working tree into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    with _locked("build"):  # setuptools builds in the tree (build/, *.egg-info): one build at a time
        _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", dest, ROOT)
    [wheel] = dest.glob("troupe_runtime-*.whl")
    return wheel


def _venv(name: str, key: str, *requirements: str) -> Path:
    """A virtualenv with ``requirements`` installed, made once per ``key``."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    path = VENVS / f"{name}-{digest}"
    python = path / "bin" / "python"
    # Another test process (an xdist worker, a second session) may be making the same one: one makes
    # it, the others wait and reuse it.
    with _locked(path.name):
        if not (path / ".complete").exists():
            shutil.rmtree(path, ignore_errors=True)
            _run(sys.executable, "-m", "venv", path)
            _run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
            if requirements:
                _run(python, "-m", "pip", "install", "--quiet", *requirements)
            (path / ".complete").touch()
    return path


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Held by one test process at a time (a lock file under ``.build/venvs``)."""
    VENVS.mkdir(parents=True, exist_ok=True)
    with (VENVS / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def plain_ray_venv() -> Path:
    """Ray (with its job server and dashboard), the same version as ours, and nothing of Troupe."""
    return _venv("plain-ray", version("ray"), f"ray[default]=={version('ray')}")


def wheel_venv(wheel: Path) -> Path:
    """A new virtualenv with Troupe installed from ``wheel``, as `pip install troupe-runtime` would."""
    dependencies = (ROOT / "pyproject.toml").read_text()
    path = _venv("wheel", dependencies, str(wheel))
    # Reused across runs: put this run's wheel in, without touching what it depends on.
    _run(path / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheel)
    return path


def checkout_venv() -> Path:
    """Troupe's dependencies, and a Troupe installed from this checkout (not editable) that a test
    replaces with the one it installs."""
    return _venv("checkout", (ROOT / "pyproject.toml").read_text(), str(ROOT))


def site_packages(venv: Path) -> Path:
    [found] = (venv / "lib").glob("python3*/site-packages")
    return found
