#!/usr/bin/env bash
# Real-library check (issue 16): bee-queue's and redlock's Lua scripts run unchanged against
# damselfly (several shards, so the scripts' keys and their undeclared keys cross threads) and
# against redis-server; each run must meet the libraries' own expectations (workload.js) and
# both must print the same summary.
#
#   tests/libraries/run.sh            (uses target/release/damselfly; DAMSELFLY_BIN overrides)
set -euo pipefail
cd "$(dirname "$0")"
BIN=${DAMSELFLY_BIN:-${CARGO_TARGET_DIR:-$PWD/../../target}/release/damselfly}
[[ -x $BIN ]] || { echo "libraries: $BIN not built (cargo build --release)" >&2; exit 2; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "libraries: node and npm are needed" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "libraries: redis-server is needed" >&2; exit 2; }
npm ci --no-audit --no-fund --loglevel=error >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "libraries: server on $1 did not start" >&2; return 1; }
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT

dport=$(free_port)
"$BIN" --port "$dport" --bind 127.0.0.1 --dbfilename '' --proactor_threads 4 >/dev/null 2>&1 &
PIDS+=($!)
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
PIDS+=($!)
wait_up "$dport"; wait_up "$rport"

echo "redis-server:"
want=$(node workload.js "$rport")
echo "  $want"
echo "damselfly:"
got=$(node workload.js "$dport")
echo "  $got"
if [[ $got != "$want" ]]; then
    echo "libraries: damselfly's results differ from redis-server's" >&2
    exit 1
fi
echo "libraries: bee-queue and redlock behave as on redis-server"
