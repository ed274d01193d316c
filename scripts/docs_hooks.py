"""MkDocs hooks for the documentation site (mkdocs.yml names this file).

- Before anything is read, the package is laid out as it is installed (``scripts/package_tree.py``), so
  mkdocstrings finds ``troupe.core``, ``troupe.api``, ... where an installed Troupe has them.
- The front door's OpenAPI document is written into the site as ``reference/openapi.json``, from the app
  itself (``create_app``), so the HTTP reference links to what the code serves, never to a copy.
- The HTTP reference page must name every path of that document: a route added without a line there
  fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OPENAPI_URI = "reference/openapi.json"
HTTP_PAGE = "reference/http.md"

log = logging.getLogger("mkdocs.plugins.troupe")
_openapi: dict[str, Any] = {}


def on_startup(command: str, dirty: bool) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from package_tree import build

    build(ROOT / ".build" / "package-tree")


def _openapi_document() -> dict[str, Any]:
    if not _openapi:
        from troupe.api.app import create_app

        from troupe import Runtime

        runtime = Runtime([], executor="local")  # nothing starts: only the routes are read
        _openapi.update(create_app(runtime, open_mode=True).openapi())
    return _openapi


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    content = json.dumps(_openapi_document(), indent=1)
    files.append(File.generated(config, OPENAPI_URI, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == HTTP_PAGE:
        missing = [path for path in _openapi_document()["paths"] if f"`{path}`" not in markdown]
        for path in missing:
            log.warning("%s does not name the route %s of the OpenAPI document", HTTP_PAGE, path)
    return markdown
