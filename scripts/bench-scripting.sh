#!/usr/bin/env bash
# Scripting benchmark (issue 16): EVALSHA of a one-key INCR script at -P 1 and -P 30, and of a
# 10-key script (an INCR on each of 10 keys with different hash tags, so on different shards
# when there are several) at -P 30, against redis-server in interleaved rounds on the same
# pinned CPUs (server on CPU 1 with one shard thread, load on CPU 0). Prints a markdown table of
# medians: ops/s, server CPU ns per script call, damselfly's ratios, and p50/p99 latency (ms, from
# redis-benchmark's --csv) per server.
#
#   scripts/bench-scripting.sh [--requests N] [--rounds R]
#
# Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
N=200000
ROUNDS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) N=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cargo build --release -q -p damselfly
. scripts/bench/lib.sh

ONE='return redis.call("incr", KEYS[1])'
TEN='local n = 0 for i = 1, #KEYS do n = n + redis.call("incr", KEYS[i]) end return n'
TENKEYS=""
for i in $(seq 0 9); do TENKEYS+=" {k$i}:__rand_int__"; done

declare -A RPS CPU P50 P99
NAMES=(damselfly redis)
TESTS=("one-key -P 1" "one-key -P 30" "ten-keys -P 30")
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
    sha1=$(redis-cli -p "$port" script load "$ONE")
    sha10=$(redis-cli -p "$port" script load "$TEN")
    for t in "${TESTS[@]}"; do
      case "$t" in
        "one-key -P 1") P=1; n=$((N / 4)); cmd=(evalsha "$sha1" 1 "key:__rand_int__") ;;
        "one-key -P 30") P=30; n=$N; cmd=(evalsha "$sha1" 1 "key:__rand_int__") ;;
        "ten-keys -P 30") P=30; n=$((N / 4)); read -ra ks <<<"$TENKEYS"; cmd=(evalsha "$sha10" 10 "${ks[@]}") ;;
      esac
      c0=$(cpu_ticks "$pid")
      stats=$(RANDOM_KEYS=100000 bench_stats "$port" "$n" "$P" "${cmd[@]}")
      c1=$(cpu_ticks "$pid")
      keep_stats "$name,$t" "$stats"
      CPU[$name,$t]+="$(ns_per_op "$c0" "$c1" "$n") "
    done
    stop_server "$port" "$pid"
  done
done

echo
table_header
for t in "${TESTS[@]}"; do
  median_row "EVALSHA $t" "$t"
done
