#!/usr/bin/env bash
# Run Troupe's main job on the embedded defaults (SQLite file, local Ray, scripted model unless
# OPENAI_API_KEY is set): an agent asks you to approve a destructive tool call and answer a question.
# Sets up .venv with Troupe itself (no test tooling) on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/troupe demo "$@"
