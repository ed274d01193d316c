"""What the documentation promises about itself, checked without building it (``mkdocs build --strict``
in scripts/test.sh checks the site's links, anchors, nav and included files): the README stays a short
front page whose links lead somewhere, and the API reference names every public name of ``troupe``."""

from __future__ import annotations

import re
from pathlib import Path

from readme_driver import ROOT

import troupe

FRONT_PAGE_MAX_LINES = 200
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _relative_links(page: Path) -> list[str]:
    return [target for target in _LINK.findall(page.read_text()) if "://" not in target]


def test_the_readme_is_a_short_front_page_that_links_into_the_docs():
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= FRONT_PAGE_MAX_LINES
    links = _relative_links(readme)
    assert sum(target.startswith("docs/") for target in links) >= 10, links


def test_every_relative_link_of_the_readmes_leads_to_a_file():
    for page in (ROOT / "README.md", ROOT / "examples" / "README.md", ROOT / "bench" / "README.md"):
        broken = [t for t in _relative_links(page) if not (page.parent / t).exists()]
        assert not broken, f"{page.relative_to(ROOT)} links to nothing: {broken}"


def test_the_api_reference_shows_every_public_name_of_troupe():
    reference = ROOT / "docs" / "reference"
    shown = set(re.findall(r"^::: troupe\.(\w+)\s*$", (reference / "troupe.md").read_text(), re.M))
    modules = {"client", "errors", "testing"}
    assert shown == set(troupe.__all__) - modules, set(troupe.__all__) ^ shown ^ modules
    for module in modules:
        assert f"::: troupe.{module}\n" in (reference / f"{module}.md").read_text(), module


def test_no_page_points_outside_the_repository_for_the_design():
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    assert not [p for p in pages if "shared/DESIGN.md" in p.read_text()]


_IMPORT = re.compile(r"^\s*from (troupe(?:\.\w+)+) import ([\w, ]+)", re.M)


def test_what_a_page_imports_from_beyond_troupe_is_in_the_api_reference():
    """A name the docs have a reader import from a module other than ``troupe`` (``troupe.notebook``,
    ``troupe.api.app`` for ``create_app``) is shown in the reference, so that a reader can look it up,
    and the programs the docs show import only what the reference shows."""
    reference = "\n".join(page.read_text() for page in (ROOT / "docs" / "reference").glob("*.md"))
    shown = set(re.findall(r"^::: ([\w.]+)\s*$", reference, re.M))
    sources = [*(ROOT / "docs").rglob("*.md"), *(ROOT / "docs" / "examples").glob("*.py"), ROOT / "README.md"]
    missing = set()
    for source in sources:
        for module, names in _IMPORT.findall(source.read_text()):
            for name in (n.strip() for n in names.split(",")):
                if module not in shown and f"{module}.{name}" not in shown:
                    missing.add(f"{source.relative_to(ROOT)}: {module}.{name}")
    assert missing == set()


def test_the_reference_page_of_each_blocking_method_leads_to_its_async_twin():
    """The reference pages are read from the source: a blocking client method made by ``_blocking`` shows
    there as ``generate = _blocking(...)``, without the signature and docstring it has at run time. The
    string under each says what it returns and links to the async method that documents it."""
    import ast

    source = ast.parse((ROOT / "api" / "sync_client.py").read_text())
    client = next(n for n in source.body if isinstance(n, ast.ClassDef) and n.name == "AgentClient")
    body = client.body
    made = {}
    for i, node in enumerate(body):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            twin = ast.unparse(node.value.args[0]) if node.value.args else ""
            after = body[i + 1] if i + 1 < len(body) else None
            said = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            doc = after.value.value if said else ""  # type: ignore[union-attr]
            made[node.targets[0].id] = (twin, doc)  # type: ignore[attr-defined]
    assert len(made) >= 13, sorted(made)
    for name, (twin, doc) in made.items():
        assert twin == f"AsyncAgentClient.{name}"
        assert f"][troupe.client.AsyncAgentClient.{name}]" in doc, f"{name}: no entry on the reference page"
