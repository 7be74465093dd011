#!/usr/bin/env bash
# Is damselfly-bench the bottleneck? Drive the same pinned redis-server with ONE
# damselfly-bench thread and with redis-benchmark (single-threaded C client, the
# closest thing to memtier_benchmark that Debian ships), same CPU, same clients,
# same pipeline depth, and compare ops/s and client CPU per request.
#
#   scripts/bench/vs-redis-benchmark.sh            # defaults below
#   REPEAT=5 REQS=1000000 scripts/bench/vs-redis-benchmark.sh
#
# Env: BENCH (damselfly-bench binary), SERVER_CPU (default 1), LOAD_CPU (default 0),
#      REQS (requests per run at pipeline 1; x10 at pipeline 30), REPEAT, CLIENTS, PORT.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=${BENCH:-${CARGO_TARGET_DIR:-$ROOT/target}/release/damselfly-bench}
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
REQS=${REQS:-300000}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-50}
PORT=${PORT:-$((20000 + RANDOM % 20000))}

for t in redis-server redis-benchmark redis-cli taskset; do
  command -v "$t" >/dev/null || { echo "missing $t (apt-get install redis-server redis-tools util-linux)" >&2; exit 1; }
done
[ -x "$BENCH" ] || { echo "build first: cargo build --release -p damselfly-bench (BENCH=$BENCH)" >&2; exit 1; }

taskset -c "$SERVER_CPU" redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --protected-mode no >/dev/null 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done

TIMEFORMAT='%U %S'
tmp=$(mktemp -d)

# run_tool TOOL CMD(set|get) PIPELINE N -> prints "ops_per_sec cpu_seconds"
run_tool() {
  local tool=$1 cmd=$2 p=$3 n=$4 ops cpu
  if [ "$tool" = redis-benchmark ]; then
    { time taskset -c "$LOAD_CPU" redis-benchmark -p "$PORT" -c "$CLIENTS" -n "$n" -P "$p" \
        -t "$cmd" -d 32 -r 1000000 -q >"$tmp/out" ; } 2>"$tmp/time"
    ops=$(tr '\r' '\n' <"$tmp/out" | grep -Eo '[0-9.]+ requests per second' | tail -1 | cut -d' ' -f1)
  else
    local ratio=1:0; [ "$cmd" = get ] && ratio=0:1
    { time "$BENCH" -p "$PORT" -t 1 -c "$CLIENTS" -n $((n / CLIENTS)) --pipeline "$p" --ratio "$ratio" \
        -d 32 --key-maximum 1000000 --key-prefix key: --cpus "$LOAD_CPU" --hide-histogram --hide-progress \
        >"$tmp/out" ; } 2>"$tmp/time"
    ops=$(awk '/^Totals/{print $2}' "$tmp/out")
  fi
  cpu=$(awk '{print $1 + $2}' "$tmp/time")
  echo "$ops $cpu"
}

echo "redis-server $(redis-server --version | grep -Eo 'v=[0-9.]+') pinned to CPU $SERVER_CPU; clients pinned to CPU $LOAD_CPU; $CLIENTS connections; 32 B values; $REPEAT runs each (median)"
printf '%-18s %-4s %-9s %14s %16s\n' tool cmd pipeline "ops/sec" "client ns/req"
# Prefill so GETs hit.
"$BENCH" -p "$PORT" -t 1 -c 8 -n allkeys --ratio 1:0 --pipeline 64 -d 32 --key-minimum 0 \
  --key-maximum 999999 --key-prefix key: --hide-histogram --hide-progress >/dev/null
for p in 1 30; do
  n=$REQS; [ "$p" -gt 1 ] && n=$((REQS * 10))
  for cmd in set get; do
    for tool in redis-benchmark damselfly-bench; do
      : >"$tmp/res"
      for _ in $(seq "$REPEAT"); do run_tool "$tool" "$cmd" "$p" "$n" >>"$tmp/res"; done
      med=$(sort -n "$tmp/res" | awk -v n="$REPEAT" 'NR==int((n+1)/2)')
      ops=${med% *}; cpu=${med#* }
      nsreq=$(awk -v c="$cpu" -v n="$n" 'BEGIN{printf "%.0f", c * 1e9 / n}')
      printf '%-18s %-4s %-9s %14.0f %16s\n' "$tool" "$cmd" "$p" "$ops" "$nsreq"
    done
  done
done
rm -rf "$tmp"
