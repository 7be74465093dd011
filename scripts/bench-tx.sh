#!/usr/bin/env bash
# Cross-shard cost benchmark (issue: atomic multi-key operations). Runs damselfly with 1 and with
# 2 shard threads — both pinned to the same CPU, so the second thread adds cross-shard hops, not
# CPU — and redis-server for reference, under the same redis-benchmark load pinned to another CPU:
#   - MSET of 10 keys (keys spread over shards: every MSET is a multi-shard transaction)
#   - GET/SET at -P 30 (pipelines squashed per shard)
# Reports ops/s and server CPU nanoseconds per op (utime+stime from /proc/PID/stat), the
# per-busy-core throughput of 2 threads relative to 1 (= cpu_ns(1) / cpu_ns(2)), and p50/p99
# latency (ms, from redis-benchmark's --csv) per server.
# The three servers run one after another in each of ROUNDS rounds (interleaved, so a noisy
# neighbour hurts all of them alike); the table shows per-test medians over the rounds.
#   scripts/bench-tx.sh [--requests N] [--rounds R] [--baseline BIN] [--out FILE]
# --baseline BIN also runs an earlier damselfly build (1 and 2 threads) in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
N=1000000
ROUNDS=3
OUT=""
BASE=""
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) N=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cargo build --release -q -p damselfly
BIN=target/release/damselfly

declare -A RPS CPUNS P50 P99
run() { # label port pid test args...
  local label=$1 port=$2 pid=$3 t=$4; shift 4
  local c0 c1 stats
  c0=$(cpu_ticks "$pid")
  stats=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -t "$t" -n "$N" -r 100000 -d 32 -c 50 "$@" --csv 2>/dev/null | csv_stats)
  c1=$(cpu_ticks "$pid")
  keep_stats "$label,$t,$*" "$stats"
  CPUNS[$label,$t,$*]+="$(ns_per_op "$c0" "$c1" "$N") "
}
for round in $(seq 1 "$ROUNDS"); do
LABELS=(dfly1 dfly2 redis)
[ -n "$BASE" ] && LABELS=(dfly1 dfly2 base1 base2 redis)
for label in "${LABELS[@]}"; do
  echo "round $round/$ROUNDS: $label" >&2
  port=$(free_port)
  case $label in
    dfly1) taskset -c "$SERVER_CPU" "$BIN" --port "$port" --bind 127.0.0.1 --proactor_threads=1 --dir "$BENCH_DIR" --save '' >/dev/null 2>&1 & ;;
    dfly2) taskset -c "$SERVER_CPU" "$BIN" --port "$port" --bind 127.0.0.1 --proactor_threads=2 --dir "$BENCH_DIR" --save '' >/dev/null 2>&1 & ;;
    base1) taskset -c "$SERVER_CPU" "$BASE" --port "$port" --bind 127.0.0.1 --proactor_threads=1 --dir "$BENCH_DIR" --save '' >/dev/null 2>&1 & ;;
    base2) taskset -c "$SERVER_CPU" "$BASE" --port "$port" --bind 127.0.0.1 --proactor_threads=2 --dir "$BENCH_DIR" --save '' >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$port" --bind 127.0.0.1 --dir "$BENCH_DIR" --save '' --appendonly no >/dev/null 2>&1 & ;;
  esac
  pid=$!; wait_up "$port"
  run $label "$port" "$pid" mset
  run $label "$port" "$pid" set -P 30
  run $label "$port" "$pid" get -P 30
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
done
{
  echo "### Cross-shard cost: 1 vs 2 shard threads on one CPU (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Medians of $ROUNDS interleaved rounds. Server pinned to CPU $SERVER_CPU, load (\`redis-benchmark -n $N -r 100000 -d 32 -c 50\`) pinned to CPU $LOAD_CPU."
  echo "\"per-core 2t/1t\" is the throughput per busy server core with 2 threads relative to 1 thread (CPU ns/op ratio)."
  echo
  echo "| test | damselfly 1t ops/s | CPU ns/op | damselfly 2t ops/s | CPU ns/op | per-core 2t/1t | redis-server ops/s | CPU ns/op |$(lat_head "damselfly 1t" "damselfly 2t" redis)"
  echo "|---|---|---|---|---|---|---|---|$(lat_sep 1 2 3)"
  for k in "mset," "set,-P 30" "get,-P 30"; do
    name=$(echo "$k" | tr ',' ' ')
    r1=$(median "${RPS[dfly1,$k]}"); c1=$(median "${CPUNS[dfly1,$k]}")
    r2=$(median "${RPS[dfly2,$k]}"); c2=$(median "${CPUNS[dfly2,$k]}")
    rr=$(median "${RPS[redis,$k]}"); cr=$(median "${CPUNS[redis,$k]}")
    echo "| ${name^^} | $r1 | $c1 | $r2 | $c2 | $(ratio "$c1" "$c2") | $rr | $cr |$(lat_cells "$k" dfly1 dfly2 redis)"
  done
  if [ -n "$BASE" ]; then
    echo
    echo "Baseline build ($BASE), same rounds:"
    echo
    echo "| test | baseline 1t ops/s | CPU ns/op | baseline 2t ops/s | CPU ns/op | per-core 2t/1t | damselfly/baseline 1t ops | damselfly/baseline 2t ops |$(lat_head "baseline 1t" "baseline 2t")"
    echo "|---|---|---|---|---|---|---|---|$(lat_sep 1 2)"
    for k in "mset," "set,-P 30" "get,-P 30"; do
      name=$(echo "$k" | tr ',' ' ')
      b1=$(median "${RPS[base1,$k]}"); bc1=$(median "${CPUNS[base1,$k]}")
      b2=$(median "${RPS[base2,$k]}"); bc2=$(median "${CPUNS[base2,$k]}")
      r1=$(median "${RPS[dfly1,$k]}"); r2=$(median "${RPS[dfly2,$k]}")
      echo "| ${name^^} | $b1 | $bc1 | $b2 | $bc2 | $(ratio "$bc1" "$bc2") | $(ratio "$r1" "$b1") | $(ratio "$r2" "$b2") |$(lat_cells "$k" base1 base2)"
    done
  fi
  echo
  echo "Per-round CPU ns/op (1t / 2t / redis):"
  echo
  for k in "mset," "set,-P 30" "get,-P 30"; do
    name=$(echo "$k" | tr ',' ' ')
    echo "- ${name^^}: ${CPUNS[dfly1,$k]% } / ${CPUNS[dfly2,$k]% } / ${CPUNS[redis,$k]% }"
  done
} | tee ${OUT:+"$OUT"}
