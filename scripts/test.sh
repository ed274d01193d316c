#!/usr/bin/env bash
# Set up everything the test suite needs and run it all: lint, types, then pytest (real Ray, real
# SQLite, a real redis-server the tests start themselves, real HTTP).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --system
.venv/bin/ruff check .
.venv/bin/python scripts/package_tree.py .build/package-tree >/dev/null
.venv/bin/mypy
# Every mutant of scripts/mutation.py still fits the code it breaks (the full run goes by command).
.venv/bin/python scripts/mutation.py --list >/dev/null
# The documentation site builds with no warning: every page in the nav, every link and anchor, every
# included example file, the API reference rendered from the code (mkdocs.yml, docs/).
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir .build/site  # not --quiet: it hides the warnings --strict counts
# Two workers (pytest-xdist): most tests wait on processes, sockets and Ray rather than the CPU, so the
# suite takes about half as long. Each worker starts its own Ray and takes whole files (a module's
# fixtures are made once); only tests/test_readme_blocks.py binds fixed ports, and the virtualenvs and
# wheel builds of tests/installs.py are locked.
.venv/bin/python -m pytest -n 2 --dist loadfile "$@"
# The Ray tests of approval, supervision and recovery once more with every actor call a plain Ray call
# (the way calls between nodes go), so both transports are held to the same behaviour.
TROUPE_ACTOR_CHANNEL=0 .venv/bin/python -m pytest -n 2 --dist loadfile "$@" -k "not local" tests/test_approval.py \
    tests/test_supervisor.py tests/test_recovery.py tests/test_delegated_durability.py
