#!/usr/bin/env bash
# Set up everything the test suite needs and run it all: lint, types, then pytest (real Ray, real
# SQLite, a real redis-server the tests start themselves, real HTTP).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --system
.venv/bin/ruff check .
.venv/bin/python scripts/package_tree.py .build/package-tree >/dev/null
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
