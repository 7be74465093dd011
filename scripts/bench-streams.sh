#!/usr/bin/env bash
# Streams benchmark (issue 18): XADD (auto IDs, 3 small fields, 1000 streams) and XREADGROUP
# (one new entry per call from a pre-filled stream, consumers drawn at random) at -P 1 and
# -P 30, and memory per stream entry (1M entries of 3 small fields in one stream, used_memory
# growth), against redis-server in interleaved rounds on the same pinned CPUs (server on CPU 1
# with one shard thread, load on CPU 0). Prints a markdown table of medians: ops/s, server CPU
# ns per call, damselfly's ratios, and p50/p99 latency (ms, from redis-benchmark's --csv) per
# server.
#
#   scripts/bench-streams.sh [--requests N] [--rounds R]
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

# A stream with more entries than XREADGROUP will read, and its group.
fill_stream() {
  python3 - "$2" <<'PY' | redis-cli -p "$1" --pipe >/dev/null
import sys
n = int(sys.argv[1])
out = sys.stdout
for i in range(1, n + 1):
    p = ["XADD", "rg:{s}", f"{i}-0", "name", f"user{i % 5000}", "age", str(i % 90), "city", "paris"]
    out.write(f"*{len(p)}\r\n" + "".join(f"${len(x)}\r\n{x}\r\n" for x in p))
p = ["XGROUP", "CREATE", "rg:{s}", "g", "0"]
out.write(f"*{len(p)}\r\n" + "".join(f"${len(x)}\r\n{x}\r\n" for x in p))
PY
}

declare -A RPS CPU P50 P99
NAMES=(damselfly redis)
TESTS=("XADD -P 1" "XADD -P 30" "XREADGROUP -P 1" "XREADGROUP -P 30")
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
    fill_stream "$port" $((N + N / 4 + 1000))
    for t in "${TESTS[@]}"; do
      case "$t" in
        "XADD -P 1") P=1; n=$((N / 4)); cmd=(xadd "s:{s}:__rand_int__" "*" name user42 age 31 city paris) ;;
        "XADD -P 30") P=30; n=$N; cmd=(xadd "s:{s}:__rand_int__" "*" name user42 age 31 city paris) ;;
        "XREADGROUP -P 1") P=1; n=$((N / 4)); cmd=(xreadgroup group g "c__rand_int__" count 1 streams "rg:{s}" ">") ;;
        "XREADGROUP -P 30") P=30; n=$N; cmd=(xreadgroup group g "c__rand_int__" count 1 streams "rg:{s}" ">") ;;
      esac
      c0=$(cpu_ticks "$pid")
      stats=$(RANDOM_KEYS=1000 bench_stats "$port" "$n" "$P" "${cmd[@]}")
      c1=$(cpu_ticks "$pid")
      keep_stats "$name,$t" "$stats"
      CPU[$name,$t]+="$(ns_per_op "$c0" "$c1" "$n") "
    done
    stop_server "$port" "$pid"
  done
done

# Memory: bytes per entry (1M entries of 3 small fields in one stream), once per server. (A
# memory figure: no request latency to report.)
used_memory() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/{print $2+0}'; }
declare -A MEM
for name in "${NAMES[@]}"; do
  port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
  before=$(used_memory "$port")
  python3 - <<'PY' | redis-cli -p "$port" --pipe >/dev/null
import sys
out = sys.stdout
for i in range(1, 1_000_001):
    p = ["XADD", "mem", f"{1700000000000 + i // 3}-{i % 3}", "name", f"user{i % 5000}", "age", str(i % 90), "city", "paris"]
    out.write(f"*{len(p)}\r\n" + "".join(f"${len(x)}\r\n{x}\r\n" for x in p))
PY
  after=$(used_memory "$port")
  MEM[$name]=$(python3 -c "print(round(($after - $before) / 1e6, 1))")
  stop_server "$port" "$pid"
done

echo
echo "Bytes per stream entry (1M entries, 3 small fields, used_memory growth): damselfly ${MEM[damselfly]}, redis-server ${MEM[redis]}"
echo
table_header
for t in "${TESTS[@]}"; do
  median_row "$t" "$t"
done
