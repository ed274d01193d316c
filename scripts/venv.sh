# Sourced by scripts/demo.sh and scripts/setup.sh: make .venv if it is not there yet.
make_venv() {
    if [ -x .venv/bin/python ]; then
        return 0
    fi
    # Debian and Ubuntu ship Python's venv module (with ensurepip) in a package of its own.
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        echo "$0: this Python cannot make a virtualenv; install python3-venv first" \
             "(sudo apt-get install python3-venv), or run: bash scripts/setup.sh --system" >&2
        exit 1
    fi
    python3 -m venv .venv
}
