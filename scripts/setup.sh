#!/usr/bin/env bash
# Set up a fresh machine for Troupe: a virtualenv in .venv with Troupe and its dev tools, and the
# system packages the test suite needs (redis-server). Safe to run again; it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'

if [ "${1:-}" = "--system" ]; then
    missing=()
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    if [ ${#missing[@]} -gt 0 ]; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
fi
