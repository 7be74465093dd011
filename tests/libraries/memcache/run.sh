#!/usr/bin/env bash
# pymemcache (pinned) against damselfly's --memcached_port and against real memcached: every Client
# method with asserted results (workload.py); both runs must pass and print the same summary.
#
#   tests/libraries/memcache/run.sh     (uses target/release/damselfly; DAMSELFLY_BIN overrides)
#   MC_TARGET=memcached tests/libraries/memcache/run.sh   (a second memcached instead of
#                                                          damselfly: checks the workload itself)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../../.. && pwd)
PYMEMCACHE_VERSION=4.0.0
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${DAMSELFLY_BIN:-$TARGET_DIR/release/damselfly}
MC_TARGET=${MC_TARGET:-damselfly}
command -v python3 >/dev/null || { echo "memcache: python3 is needed" >&2; exit 2; }
command -v memcached >/dev/null || { echo "memcache: memcached is needed" >&2; exit 2; }
if [[ $MC_TARGET == damselfly ]]; then
    [[ -x $BIN ]] || { echo "memcache: $BIN not built (cargo build --release)" >&2; exit 2; }
fi

# pymemcache into a gitignored directory (target/), installed once per version.
PYDIR=$TARGET_DIR/pymemcache-$PYMEMCACHE_VERSION
if [[ ! -f $PYDIR/.installed ]]; then
    pip_args=(install --quiet --disable-pip-version-check --target "$PYDIR"
        "pymemcache==$PYMEMCACHE_VERSION")
    # A distribution's own python (PEP 668 "externally managed") may refuse even a --target
    # install; the package goes to our own directory either way, so say so and retry.
    python3 -m pip "${pip_args[@]}" ||
        python3 -m pip "${pip_args[@]}" --break-system-packages
    touch "$PYDIR/.installed"
fi
export PYTHONPATH=$PYDIR${PYTHONPATH:+:$PYTHONPATH}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_mc() {
    for _ in $(seq 1 100); do
        python3 - "$1" <<'PY' 2>/dev/null && return 0
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5)
s.sendall(b"version\r\n")
sys.exit(0 if s.recv(64).startswith(b"VERSION ") else 1)
PY
        sleep 0.1
    done
    echo "memcache: nothing answers on port $1" >&2
    return 1
}
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT

start_memcached() { # port
    memcached -U 0 -t 1 -p "$1" -l 127.0.0.1 -u root >/dev/null 2>&1 &
    PIDS+=($!)
}

rport=$(free_port)
start_memcached "$rport"
tport=$(free_port)
if [[ $MC_TARGET == memcached ]]; then
    start_memcached "$tport"
    tname="memcached#2"
else
    "$BIN" --port "$(free_port)" --bind 127.0.0.1 --dbfilename '' --proactor_threads 2 \
        --memcached_port "$tport" >/dev/null 2>&1 &
    PIDS+=($!)
    tname=damselfly
fi
wait_mc "$rport"; wait_mc "$tport"

echo "memcached:"
want=$(python3 workload.py "$rport")
echo "  $want"
echo "$tname:"
got=$(python3 workload.py "$tport")
echo "  $got"
if [[ $got != "$want" ]]; then
    echo "memcache: $tname's results differ from memcached's" >&2
    exit 1
fi
echo "memcache: pymemcache $PYMEMCACHE_VERSION behaves on $tname as on memcached"
