#!/usr/bin/env bash
# Run Troupe's main job on the embedded defaults (SQLite file, local Ray, scripted model unless
# OPENAI_API_KEY is set): an agent asks you to approve a destructive tool call and answer a question.
# Sets up .venv with Troupe itself (no test tooling) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
make_venv
# Install only when .venv does not already hold Troupe from this checkout: a re-run starts at once and
# needs no network. (Asked from outside the checkout, whose own troupe/ folder would answer instead.)
here=$PWD
if ! (cd / && "$here/.venv/bin/python" -c \
    'import sys, troupe.core as c; sys.exit(not c.__file__.startswith(sys.argv[1]))' "$here/") 2>/dev/null ||
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
