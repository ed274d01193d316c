#!/usr/bin/env bash
# Submit examples/cluster_job.py as a Ray job, with Troupe's wheel in its runtime env:
#     bash examples/submit_job.sh rec-001 rec-002 rec-003
# RAY_JOB_ADDRESS (default http://127.0.0.1:8265): the head's dashboard; TROUPE_REDIS_URL (default
# redis://127.0.0.1:6399/0): where the job's runs pause. Run it from a shell whose python has Troupe's
# build tools (the README's .venv); `ray` is the cluster's own CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
address=${RAY_JOB_ADDRESS:-http://127.0.0.1:8265}
redis=${TROUPE_REDIS_URL:-redis://127.0.0.1:6399/0}
python -m pip wheel --quiet --no-deps -w examples/wheels .   # Troupe's wheel, into the job's folder
wheel='${RAY_RUNTIME_ENV_CREATE_WORKING_DIR}/wheels/troupe_runtime-0.1.0-py3-none-any.whl'  # Ray expands it
env="{\"pip\": [\"$wheel\"], \"env_vars\": {\"TROUPE_REDIS_URL\": \"$redis\"}}"
# A head that has just started answers before its job agent is up, and says so: then the job (not yet
# created) is sent again, for up to a minute. Any other failure is the job's own.
for _ in $(seq 30); do
    if said=$(ray job submit --address "$address" --working-dir examples --runtime-env-json "$env" \
        -- python cluster_job.py "$@" 2>&1); then
        echo "$said"
        exit 0
    fi
    if ! grep -q "No available agent to submit job" <<<"$said"; then
        echo "$said" >&2
        exit 1
    fi
    sleep 2
done
echo "$said" >&2
exit 1
