"""Troupe's build backend: setuptools' own, with one change to editable installs.

setuptools installs an editable Troupe (``pip install -e .``) as an import finder that it appends to
``sys.meta_path``, after Python's path finder. A folder named ``troupe`` beside the script being run (the
clone itself, which is what ``git clone`` names it) has no ``__init__.py``, so the path finder takes it
for a namespace package, and the install is never asked: ``from troupe import Agent`` fails with "cannot
import name 'Agent' from 'troupe' (unknown location)" (setuptools calls these accidental namespace
packages: pypa/setuptools#3557).

So the editable wheel is built by setuptools, and then gets one more module, which its ``.pth`` file
installs in front of ``sys.meta_path``: for the names the install maps, a real module or package found on
``sys.path`` still comes first, as it always did (a checkout's own ``troupe/`` as the working directory,
a tree on ``PYTHONPATH``), but a namespace package no longer does: the install answers instead. Wheels and
sdists are setuptools' own, untouched; so is an editable wheel of another shape
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

# The .pth line setuptools writes for its finder, and what its finder module must hold for this to work.
_INSTALL_LINE = re.compile(r"import (__editable___\w+_finder); \1\.install\(\)\s*")
_FINDER_HOLDS = ("MAPPING: dict[str, str] = ", "class _EditableFinder:", "\ndef install():")

_BEFORE_NAMESPACES = '''\
"""Troupe's editable install, asked before a namespace package of the same name (written into the
editable wheel by Troupe's build backend, scripts/backend/troupe_backend.py, which says why)."""

import sys
from importlib.machinery import PathFinder

import {finder} as _editable


class BeforeNamespaces:
    """A real module or package on sys.path comes first; a folder without __init__.py does not."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname not in _editable.MAPPING:
            return None
        found = PathFinder.find_spec(fullname, path, target)
        if found is not None and found.origin is not None:
            return found
        return _editable._EditableFinder.find_spec(fullname, path, target)


def install():
    _editable.install()
    if BeforeNamespaces not in sys.meta_path:
        sys.meta_path.insert(0, BeforeNamespaces)
'''


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 660's hook: setuptools' editable wheel, asked before namespace packages (see above)."""
    name: str = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    before_namespaces(Path(wheel_directory) / name)
    return name


def before_namespaces(wheel: Path) -> bool:
    """Add the module above to the editable ``wheel`` and have its ``.pth`` install it; False (and the
    wheel untouched) when the wheel is not the shape this knows."""
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    contents = {info.filename: data for info, data in entries}
    pths = [name for name in contents if "/" not in name and name.endswith(".pth")]
    matched = _INSTALL_LINE.fullmatch(contents[pths[0]].decode()) if len(pths) == 1 else None
    finder_source = contents.get(f"{matched[1]}.py", b"").decode() if matched else ""
    if matched is None or not all(part in finder_source for part in _FINDER_HOLDS):
        return False
    module = f"{matched[1]}_first"
    added = {
        pths[0]: f"import {module}; {module}.install()\n".encode(),
        f"{module}.py": _BEFORE_NAMESPACES.format(finder=matched[1]).encode(),
    }
    record = next(name for name in contents if name.endswith(".dist-info/RECORD"))
    contents[record] = _record(contents[record].decode(), added).encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as rewritten:
        for info, _ in entries:
            if info.filename != record:
                rewritten.writestr(info, added.get(info.filename, contents[info.filename]))
        for name in added.keys() - contents.keys():
            rewritten.writestr(name, added[name])
        rewritten.writestr(record, contents[record])  # RECORD last, as wheels have it
    return True


def _record(record: str, files: dict[str, bytes]) -> str:
    """RECORD with a line of hash and size for each of ``files`` (replaced, or added before RECORD's own)."""
    lines = [line for line in record.splitlines() if line and line.split(",")[0] not in files]
    own = next(i for i, line in enumerate(lines) if line.split(",")[0].endswith(".dist-info/RECORD"))
    for name, data in sorted(files.items()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.insert(own, f"{name},sha256={digest},{len(data)}")
    return "\n".join(lines) + "\n"
