#!/usr/bin/env bash
# Run Troupe's main job on the embedded defaults (SQLite file, local Ray, scripted model unless
# OPENAI_API_KEY is set): an agent asks you to approve a destructive tool call and answer a question.
# Sets up .venv with Troupe itself (no test tooling) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
make_venv
# Install only when .venv does not already hold this checkout, editable: a re-run starts at once and
# needs no network. (Asked from outside the checkout, whose own troupe/ folder would answer instead; and
# by the file itself, since a copy installed into .venv lies inside the checkout too.)
here=$PWD
if ! (cd / && "$here/.venv/bin/python" -c \
    'import sys, troupe.core as c; sys.exit(c.__file__ != sys.argv[1])' "$here/core/__init__.py") 2>/dev/null ||
    [ ! -x .venv/bin/troupe ]; then
    # Out loud: the first install fetches Ray and the rest (a minute or more), and pip shows its progress.
    echo "demo.sh: installing Troupe into .venv (the first time takes a minute or more; pip says what it does)"
    echo "demo.sh: [1/2] upgrading pip"
    .venv/bin/python -m pip install --quiet --upgrade pip
    echo "demo.sh: [2/2] pip install -e . (Troupe and what it needs: Ray, FastAPI, pydantic, ...)"
    .venv/bin/python -m pip install -e .
    echo "demo.sh: installed; starting the demo"
fi
exec .venv/bin/troupe demo "$@"
