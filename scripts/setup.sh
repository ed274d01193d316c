#!/usr/bin/env bash
# Set up a fresh machine for Troupe: a virtualenv in .venv with Troupe and its dev tools, and (with
# --system) the system packages the test suite needs (redis-server, npm, chromium for the inbox page's
# browser tests, driven by Playwright without `playwright install`) plus the Node packages of the
# Mastra-client test (tests/js: Node 22 and @mastra/client-js from the lock file) and of the MCP tests
# (tests/mcp_js: Node 22, two MCP servers and the MCP TypeScript SDK) and of the AG-UI tests (tests/agui_js:
# Node 22, the official @ag-ui/client, esbuild to bundle it for the browser test); --js does only those.
# Safe to run again; it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

system=false
js=false
for arg in "$@"; do
    case "$arg" in
        --system) system=true; js=true ;;
        --js) js=true ;;
        *) echo "usage: $0 [--system] [--js]" >&2; exit 2 ;;
    esac
done

if $system; then
    missing=()
    # Debian and Ubuntu ship Python's venv module (ensurepip) in a package of its own.
    python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)  # joins the test Redis Cluster
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    if [ ${#missing[@]} -gt 0 ]; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        # dpkg needs the sbin folders on PATH (ldconfig, start-stop-daemon); CI's PATH has none.
        apt_path="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
        $sudo env PATH="$apt_path" apt-get update -qq
        $sudo env PATH="$apt_path" DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
fi

. scripts/venv.sh
make_venv
.venv/bin/python -m pip install --quiet --upgrade pip
# The distribution was named troupe before it became troupe-runtime (troupe on PyPI is another project's):
# a .venv made before then holds this checkout under the old name, which would linger beside the new one.
if .venv/bin/python -m pip show troupe 2>/dev/null | grep -qxF "Editable project location: $PWD"; then
    .venv/bin/python -m pip uninstall --quiet -y troupe
fi
.venv/bin/python -m pip install --quiet -e '.[dev]'

if $js; then
    # npm ci installs exactly each lock file; a stamp skips it when nothing changed since. tests/js holds
    # Mastra's client, tests/mcp_js the MCP servers and the MCP TypeScript SDK the MCP tests run,
    # tests/a2a_js the A2A JavaScript SDK's client, tests/agui_js AG-UI's client and its browser page.
    for folder in tests/js tests/mcp_js tests/a2a_js tests/agui_js; do
        stamp=$folder/node_modules/.troupe-installed-lock
        if ! cmp -s $folder/package-lock.json "$stamp" 2>/dev/null; then
            (cd $folder && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
            cp $folder/package-lock.json "$stamp"
        fi
    done
fi
