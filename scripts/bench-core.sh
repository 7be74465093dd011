#!/usr/bin/env bash
# Core-engine benchmark. Runs damselfly and redis-server (and, with --baseline, an earlier
# damselfly build) one after the other in each of ROUNDS interleaved rounds on the same pinned
# CPU, drives them with the same redis-benchmark load pinned to another CPU, and prints a
# markdown report of per-test medians with ratios measured in the same run: ops/s, server CPU
# ns/op, and p50/p99 latency (ms, from redis-benchmark's --csv) per server.
#
#   scripts/bench-core.sh [--requests N] [--rounds R] [--baseline BIN] [--out FILE]
#
# Defaults: -t set,get -n 2000000 -r 100000 -d 32 -c 50, at -P 1 and -P 30; server on CPU 1
# (--proactor_threads=1), load on CPU 0; memory = RSS growth per key after DEBUG POPULATE
# 1000000 key 32 (measured once per server; a memory figure, so no latency beside it).
# --baseline compares two builds of damselfly, e.g.
# `git worktree add /tmp/base <commit> && cargo build --release --manifest-path
# /tmp/base/Cargo.toml` then `--baseline /tmp/base/target/release/damselfly`.
# Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
N=2000000
ROUNDS=3
OUT=""
POP=1000000
BASE=""
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) N=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --populate) POP=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cargo build --release -q -p damselfly
BIN=target/release/damselfly
NAMES=(damselfly redis)
[ -n "$BASE" ] && NAMES=(damselfly baseline redis)

rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }

start_server() { # name port -> pid (lib.sh's, plus DEBUG and the baseline build)
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dir "$BENCH_DIR" --save '' --enable-debug-command yes >/dev/null 2>&1 & ;;
    baseline) taskset -c "$SERVER_CPU" "$BASE" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dir "$BENCH_DIR" --save '' --enable-debug-command yes >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --dir "$BENCH_DIR" --save '' --appendonly no --enable-debug-command yes >/dev/null 2>&1 & ;;
  esac
  echo $!
}

declare -A RPS CPUNS MEM P50 P99
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
    for P in 1 30; do
      for t in set get; do
        c0=$(cpu_ticks "$pid")
        stats=$(RANDOM_KEYS=100000 bench_stats "$port" "$N" "$P" -t $t -d 32)
        c1=$(cpu_ticks "$pid")
        keep_stats "$name,$t,$P" "$stats"
        CPUNS[$name,$t,$P]+="$(ns_per_op "$c0" "$c1" "$N") "
      done
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
# Memory: one fresh server each, RSS growth after DEBUG POPULATE.
for name in "${NAMES[@]}"; do
  port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
  r0=$(rss_kb "$pid"); redis-cli -p "$port" debug populate "$POP" key 32 >/dev/null; sleep 0.5; r1=$(rss_kb "$pid")
  MEM[$name]=$(python3 -c "print(round(($r1-$r0)*1024/$POP,1))")
  kill "$pid"; wait "$pid" 2>/dev/null || true
done

{
  echo "### Core engine: redis-benchmark, one server thread (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Medians of $ROUNDS interleaved rounds. Server pinned to CPU $SERVER_CPU (damselfly \`--proactor_threads=1\`), load pinned to CPU $LOAD_CPU:"
  echo "\`redis-benchmark -t set,get -n $N -r 100000 -d 32 -c 50 -P {1,30}\`. Machine: $(nproc) cores, $(uname -r)."
  [ -n "$BASE" ] && echo "\"baseline\" is an earlier damselfly build ($BASE) measured in the same rounds."
  echo
  if [ -n "$BASE" ]; then
    echo "| test | pipeline | damselfly ops/s | baseline ops/s | redis-server ops/s | damselfly/redis | baseline/redis | damselfly CPU ns/op | baseline CPU ns/op | redis CPU ns/op |$(lat_head damselfly baseline redis)"
    echo "|---|---|---|---|---|---|---|---|---|---|$(lat_sep "${NAMES[@]}")"
  else
    echo "| test | pipeline | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/op | redis CPU ns/op |$(lat_head damselfly redis)"
    echo "|---|---|---|---|---|---|---|$(lat_sep "${NAMES[@]}")"
  fi
  for P in 1 30; do for t in set get; do
    d=$(median "${RPS[damselfly,$t,$P]}"); r=$(median "${RPS[redis,$t,$P]}")
    dc=$(median "${CPUNS[damselfly,$t,$P]}"); rc=$(median "${CPUNS[redis,$t,$P]}")
    if [ -n "$BASE" ]; then
      b=$(median "${RPS[baseline,$t,$P]}"); bc=$(median "${CPUNS[baseline,$t,$P]}")
      echo "| ${t^^} | $P | $d | $b | $r | $(ratio "$d" "$r") | $(ratio "$b" "$r") | $dc | $bc | $rc |$(lat_cells "$t,$P" "${NAMES[@]}")"
    else
      echo "| ${t^^} | $P | $d | $r | $(ratio "$d" "$r") | $dc | $rc |$(lat_cells "$t,$P" "${NAMES[@]}")"
    fi
  done; done
  echo
  echo "Per-round ops/s (${NAMES[*]}):"
  echo
  for P in 1 30; do for t in set get; do
    line="- ${t^^} -P $P:"
    for name in "${NAMES[@]}"; do line+=" ${RPS[$name,$t,$P]% } /"; done
    echo "${line% /}"
  done; done
  echo
  mem="Memory after \`DEBUG POPULATE $POP key 32\` (RSS growth per key): damselfly ${MEM[damselfly]} B"
  [ -n "$BASE" ] && mem+=", baseline ${MEM[baseline]} B"
  echo "$mem, redis-server ${MEM[redis]} B, damselfly/redis $(ratio "${MEM[damselfly]}" "${MEM[redis]}")."
} | tee ${OUT:+"$OUT"}
