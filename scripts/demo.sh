#!/usr/bin/env bash
# `make demo': LispM in this terminal, with real Claude Code and Codex on
# the scripted model gateway, in a network namespace where only loopback
# exists, so nothing can leave the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${LISPM_DEMO_DIR:-$PWD/.deps/demo}
mkdir -p "$work"
export PYTHONPATH="$PWD/python"
py=${LISPM_SIDECAR_PYTHON:-$PWD/.venv/bin/python}
if [ "$(id -u)" = 0 ]; then
    isolate=(unshare --net --)
else
    isolate=(unshare --map-root-user --net --)
fi
exec "${isolate[@]}" sh -c 'ip link set lo up && exec "$@"' sh \
    "$py" -m lispm_sidecar.testing.demo --work "$work"
