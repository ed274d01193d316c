"""Lay out the package as it is installed (``troupe/``, ``troupe/core/``, ...) in a folder of symlinks.

The layers live at the repository's top level and are installed as ``troupe.<layer>`` through setuptools'
``package-dir`` mapping (pyproject.toml). Tools that read the source tree rather than import it (mypy,
import-linter) need that installed shape; this builds it from the same mapping: one symlink per file, so
mypy's reports lead to the real files, or copies (``--copy``) for import-linter, which resolves symlinks
back to the repository's layout.

    python scripts/package_tree.py [--copy] DEST   # prints DEST; put it first on MYPYPATH / PYTHONPATH
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(dest: Path, *, copy: bool = False) -> Path:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shutil.rmtree(dest, ignore_errors=True)
    for package, folder in setuptools["package-dir"].items():
        target = dest.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for source in (ROOT / folder).glob("*.py"):
            if copy:
                shutil.copyfile(source, target / source.name)
            else:
                (target / source.name).symlink_to(source)
    return dest


if __name__ == "__main__":
    args = sys.argv[1:]
    copy = "--copy" in args
    paths = [a for a in args if a != "--copy"]
    if len(paths) != 1:
        sys.exit("usage: package_tree.py [--copy] DEST")
    print(build(Path(paths[0]).resolve(), copy=copy))
