"""Troupe's build backend: setuptools' own, with one change to editable installs.

setuptools installs an editable Troupe (``pip install -e .``) as an import finder that it appends to
``sys.meta_path``, after Python's path finder. A folder named ``troupe`` beside the script being run (the
clone itself, which is what ``git clone`` names it) is then taken for a namespace package before that
finder is asked, and ``from troupe import Agent`` fails with "cannot import name 'Agent' from 'troupe'
(unknown location)" (setuptools calls these accidental namespace packages: pypa/setuptools#3557).

So the editable wheel is built by setuptools, and then the line of its ``.pth`` file that installs the
finder also moves it to the front of ``sys.meta_path``: the install is asked before any folder on
``sys.path``. Wheels and sdists are setuptools' own, untouched; so is an editable wheel of another shape
(``--config-settings editable_mode=strict``, or a setuptools whose finder this does not recognise).
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every other hook as setuptools has it

# The .pth line setuptools writes for its finder, and what its finder module must hold for the move.
_INSTALL_LINE = re.compile(r"import (__editable___\w+_finder); \1\.install\(\)\s*")
_FINDER_APPENDED = "sys.meta_path.append(_EditableFinder)"


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 660's hook: setuptools' editable wheel, its finder asked first (see the module docstring)."""
    name: str = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    finder_first(Path(wheel_directory) / name)
    return name


def finder_first(wheel: Path) -> bool:
    """Rewrite the editable ``wheel`` so that its finder goes first in ``sys.meta_path``; False (and the
    wheel untouched) when it is not the shape this knows."""
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    contents = {info.filename: data for info, data in entries}
    pths = [name for name in contents if "/" not in name and name.endswith(".pth")]
    matched = _INSTALL_LINE.fullmatch(contents[pths[0]].decode()) if len(pths) == 1 else None
    if matched is None or _FINDER_APPENDED not in contents.get(f"{matched[1]}.py", b"").decode():
        return False
    finder = matched[1]
    line = (
        f"import sys, {finder}; {finder}.install(); "
        f"sys.meta_path.remove({finder}._EditableFinder); sys.meta_path.insert(0, {finder}._EditableFinder)\n"
    )
    contents[pths[0]] = line.encode()
    record = next(name for name in contents if name.endswith(".dist-info/RECORD"))
    contents[record] = _record(contents[record].decode(), pths[0], contents[pths[0]]).encode()
    with zipfile.ZipFile(wheel, "w") as rewritten:
        for info, _ in entries:
            rewritten.writestr(info, contents[info.filename])
    return True


def _record(record: str, name: str, data: bytes) -> str:
    """RECORD with the line for ``name`` telling its new hash and size."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    lines = [
        f"{name},sha256={digest},{len(data)}" if line.split(",")[0] == name else line
        for line in record.splitlines()
    ]
    return "\n".join(lines) + "\n"
