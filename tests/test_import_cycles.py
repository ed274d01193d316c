"""No import circles anywhere in the installed ``troupe`` package.

The graph is read from the installed files with ``ast`` rather than from ``sys.modules`` after importing:
importing records only what ran, and a circle often hides in an import inside a function (run late,
so Python tolerates it) that a test process may never reach. So every ``import`` statement counts,
at module level, inside a function, or under ``if TYPE_CHECKING:``: such an import never runs, but two
modules that name each other's types still cannot be read, checked or moved one without the other
(``supervisor/agent.py`` and ``supervisor/runtime.py`` were such a circle, an Agent typed with the
Runtime that imports it). Modules are found the way Python finds them: ``troupe``'s own
folder, then every ``troupe.*`` package any module imports, located with ``importlib`` (the layers
are installed from folders elsewhere through setuptools' ``package-dir``), each package's files all read.
An import of a package (``from troupe.core.deciding import decision_log``) is an edge to the module it names;
the implicit import of a module's parent packages is not an edge (Python runs a package's
``__init__`` before its modules whatever they import, so that edge can never close a circle).
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

ROOT_PACKAGE = "troupe"


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, wherever it stands (under ``if TYPE_CHECKING:`` too)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


class ImportGraph:
    """Modules of one root package (name -> file) and the imports between them."""

    def __init__(self, root: str, locate=None) -> None:
        self.root = root
        self._locate = locate or _installed_locations
        self.files: dict[str, Path] = {}
        self.packages: set[str] = set()
        self.edges: dict[str, set[str]] = {}
        self._add_package(root)
        pending = list(self.files)
        while pending:
            module = pending.pop()
            for target in self._targets(module):
                package = self._package_of(target)
                if package is not None and package not in self.packages:
                    before = set(self.files)
                    self._add_package(package)
                    pending.extend(set(self.files) - before)

    def _package_of(self, name: str) -> str | None:
        """The package of ``root`` not read yet that ``name`` is or lives in. Looked up from the outside
        in, so finding it imports nothing but packages already known (``find_spec`` imports parents)."""
        parts = name.split(".")
        for size in range(1, len(parts) + 1):
            candidate = ".".join(parts[:size])
            if candidate in self.packages:
                continue
            if candidate in self.files:
                return None
            return candidate if self._locate(candidate) is not None else None
        return None

    def _add_package(self, package: str) -> None:
        folder = self._locate(package)
        assert folder is not None, f"package {package} cannot be found"
        self.packages.add(package)
        for path in sorted(folder.glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            self.files[name] = path

    def _targets(self, module: str) -> set[str]:
        if module in self.edges:
            return self.edges[module]
        path = self.files[module]
        tree = ast.parse(path.read_text(), filename=str(path))
        names: set[str] = set()
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
                continue
            source = _absolute(module, path.stem == "__init__", node)
            # ``from package import module`` imports that module; ``from module import name`` the module.
            names.update(f"{source}.{alias.name}" for alias in node.names)
            names.add(source)
        inside = {n for n in names if n == self.root or n.startswith(self.root + ".")}
        self.edges[module] = inside
        return inside

    def graph(self) -> dict[str, set[str]]:
        """module -> the modules of the package it imports (names resolved to known modules)."""
        known = set(self.files)
        out: dict[str, set[str]] = {}
        for module in known:
            targets = set()
            for name in self._targets(module):
                if name in known:
                    targets.add(name)
            # ``from a.b import c``: an edge to ``a.b.c`` if it is a module, else to ``a.b``.
            out[module] = {t for t in targets if t != module and not _is_parent_of_sibling(t, targets)}
        return out


def _is_parent_of_sibling(name: str, targets: set[str]) -> bool:
    """``name`` is only the ``from`` part of an import whose names are modules (``from pkg import mod``)."""
    return any(other.startswith(name + ".") for other in targets)


def _installed_locations(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle for each strongly connected group of modules (Tarjan), each closed on its start."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle(graph, group) for group in groups]


def _circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, through the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{group} is not a circle")


def test_the_installed_package_has_no_import_circles():
    graph = ImportGraph(ROOT_PACKAGE).graph()
    # Every layer is installed from its own folder: all of them must have been found and read.
    layers = {m.split(".")[1] for m in graph if m.count(".") >= 1}
    assert {"core", "storage", "actors", "supervisor", "api"} <= layers, sorted(layers)
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root.joinpath(*name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_check_sees_circles_through_function_level_relative_and_type_checking_imports(
    tmp_path: Path,
):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "def later():\n    from .a import x\n",
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.d import y\n",
            "pkg/d.py": "import pkg.c\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/e.py": "from .. import f\n",
            "pkg/f.py": "from pkg.sub.e import z\n",
        },
    )

    def locate(package: str) -> Path | None:
        folder = tmp_path.joinpath(*package.split("."))
        return folder if (folder / "__init__.py").exists() else None

    graph = ImportGraph("pkg", locate).graph()
    assert graph["pkg.c"] == {"pkg.d"} and graph["pkg.d"] == {"pkg.c"}
    assert cycles(graph) == [
        ["pkg.a", "pkg.b", "pkg.a"],
        ["pkg.c", "pkg.d", "pkg.c"],
        ["pkg.f", "pkg.sub.e", "pkg.f"],
    ]
