#!/usr/bin/env bash
# libmemcached's memccapable in ASCII mode (-a) against damselfly's --memcached_port; fails on any
# failed test (skipped ones, e.g. binary-protocol-only checks, are fine).
#
#   tests/libraries/memcache/memccapable.sh         (target/release/damselfly; DAMSELFLY_BIN overrides)
#   MC_TARGET=memcached tests/libraries/memcache/memccapable.sh   (real memcached instead)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../../.. && pwd)
BIN=${DAMSELFLY_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/damselfly}
MC_TARGET=${MC_TARGET:-damselfly}
command -v memccapable >/dev/null || { echo "memccapable: not installed (apt-get install -y libmemcached-tools)" >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
port=$(free_port)
if [[ $MC_TARGET == memcached ]]; then
    memcached -U 0 -t 1 -p "$port" -l 127.0.0.1 -u root >/dev/null 2>&1 &
else
    [[ -x $BIN ]] || { echo "memccapable: $BIN not built (cargo build --release)" >&2; exit 2; }
    "$BIN" --port "$(free_port)" --bind 127.0.0.1 --dbfilename '' --proactor_threads 2 \
        --memcached_port "$port" >/dev/null 2>&1 &
fi
PIDS+=($!)
for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

out=$(timeout 120 memccapable -a -h 127.0.0.1 -p "$port" 2>&1) || rc=$?
echo "$out"
rc=${rc:-0}
failed=$(grep -c '\[FAIL\]' <<<"$out" || true)
passed=$(grep -c '\[pass\]' <<<"$out" || true)
if [[ $rc -ne 0 || $failed -ne 0 || $passed -eq 0 ]]; then
    echo "memccapable: $MC_TARGET failed ($failed failed, $passed passed, exit $rc)" >&2
    exit 1
fi
echo "memccapable: $MC_TARGET passed $passed ASCII tests"
