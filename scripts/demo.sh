#!/usr/bin/env bash
# Run Troupe's main job on the embedded defaults (SQLite file, local Ray, scripted model unless
# OPENAI_API_KEY is set): an agent asks you to approve a destructive tool call and answer a question.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/troupe demo "$@"
