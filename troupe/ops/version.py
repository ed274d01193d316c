"""Which Troupe this is: its distribution's name on PyPI and the version installed (``troupe.__version__``,
``troupe --version``).

The distribution is ``troupe-runtime``: the name ``troupe`` on PyPI belongs to an unrelated project,
which installs a top-level ``troupe`` package and a ``troupe`` command of its own too (see
docs/getting-started/install.md, "The names").
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "troupe-runtime"
UNKNOWN = "0+unknown"


def installed_version() -> str:
    """The version of the installed ``troupe-runtime`` distribution.

    Returns:
        The version in its metadata (an editable install's too); from a plain checkout that was never
        installed, the version in the checkout's ``pyproject.toml``; ``"0+unknown"`` if neither says.
    """
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return checkout_version(Path(__file__).resolve().parents[2])


def checkout_version(root: Path) -> str:
    """The version a checkout's ``pyproject.toml`` gives Troupe, or ``"0+unknown"`` if it gives none."""
    try:
        with (root / "pyproject.toml").open("rb") as file:
            project = tomllib.load(file).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return UNKNOWN
    if project.get("name") != DISTRIBUTION:
        return UNKNOWN
    return str(project.get("version", UNKNOWN))


__all__ = ["DISTRIBUTION", "UNKNOWN", "checkout_version", "installed_version"]
