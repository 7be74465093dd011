#!/usr/bin/env bash
# HyperLogLog and geo benchmark (issue 18): PFADD (random elements into 1000 HLLs), PFCOUNT of
# one key (the cached path) and of three keys (a merge per call), GEOADD, and GEOSEARCH
# returning 100 members; and memory per geo member (1M members in one key), against redis-server in interleaved rounds on the same pinned CPUs
# (server on CPU 1 with one shard thread, load on CPU 0). Prints a markdown table of medians:
# ops/s, server CPU ns per call, damselfly's ratios, and p50/p99 latency (ms, from
# redis-benchmark's --csv) per server.
#
#   scripts/bench-types.sh [--requests N] [--rounds R]
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

# 100 members within 50 km of (13.361389, 38.115556), for GEOSEARCH ... COUNT 100.
populate_geo() {
  python3 - "$1" <<'PY' | redis-cli -p "$1" >/dev/null
import random, sys
random.seed(7)
args = []
for i in range(100):
    args += [f"{13.361389 + random.uniform(-0.3, 0.3):.6f}", f"{38.115556 + random.uniform(-0.3, 0.3):.6f}", f"m{i}"]
print("GEOADD geo:sicily " + " ".join(args))
PY
}

declare -A RPS CPU P50 P99
NAMES=(damselfly redis)
TESTS=("PFADD -P 1" "PFADD -P 30" "PFCOUNT one key -P 30" "PFCOUNT three keys -P 30" "GEOADD -P 30" "GEOSEARCH 100 -P 1")
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
    populate_geo "$port"
    for t in "${TESTS[@]}"; do
      case "$t" in
        "PFADD -P 1") P=1; n=$((N / 4)); cmd=(pfadd "hll:{h}:__rand_int__" "e__rand_int__") ;;
        "PFADD -P 30") P=30; n=$N; cmd=(pfadd "hll:{h}:__rand_int__" "e__rand_int__") ;;
        "PFCOUNT one key -P 30") P=30; n=$N; cmd=(pfcount "hll:{h}:__rand_int__") ;;
        "PFCOUNT three keys -P 30") P=30; n=$((N / 10)); cmd=(pfcount "hll:{h}:000000000001" "hll:{h}:000000000002" "hll:{h}:000000000003") ;;
        "GEOADD -P 30") P=30; n=$N; cmd=(geoadd "geo:{g}:__rand_int__" 13.361389 38.115556 "m__rand_int__") ;;
        "GEOSEARCH 100 -P 1") P=1; n=$((N / 10)); cmd=(geosearch geo:sicily fromlonlat 13.361389 38.115556 byradius 100 km asc count 100) ;;
      esac
      c0=$(cpu_ticks "$pid")
      # -r 1000: 1000 HLLs (sparse, a few hundred elements each) and geo keys.
      stats=$(RANDOM_KEYS=1000 bench_stats "$port" "$n" "$P" "${cmd[@]}")
      c1=$(cpu_ticks "$pid")
      keep_stats "$name,$t" "$stats"
      CPU[$name,$t]+="$(ns_per_op "$c0" "$c1" "$n") "
    done
    stop_server "$port" "$pid"
  done
done

# Memory: bytes per geo member (1M members in one key, used_memory growth), once per server. (A
# memory figure: no request latency to report.)
used_memory() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/{print $2+0}'; }
declare -A MEM
for name in "${NAMES[@]}"; do
  port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
  before=$(used_memory "$port")
  python3 - <<'PY' | redis-cli -p "$port" --pipe >/dev/null
import random, sys
random.seed(11)
out = sys.stdout
for b in range(1000):
    parts = ["GEOADD", "geo:mem"]
    for i in range(b * 1000, (b + 1) * 1000):
        parts += [f"{random.uniform(-180, 180):.6f}", f"{random.uniform(-85, 85):.6f}", f"member:{i}"]
    out.write(f"*{len(parts)}\r\n" + "".join(f"${len(p)}\r\n{p}\r\n" for p in parts))
PY
  after=$(used_memory "$port")
  MEM[$name]=$(python3 -c "print(round(($after - $before) / 1e6, 1))")
  stop_server "$port" "$pid"
done

echo
echo "Bytes per geo member (1M members, used_memory growth): damselfly ${MEM[damselfly]}, redis-server ${MEM[redis]}"
echo
table_header
for t in "${TESTS[@]}"; do
  median_row "$t" "$t"
done
