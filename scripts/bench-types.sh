#!/usr/bin/env bash
# HyperLogLog and geo benchmark (issue 18): PFADD (random elements into 1000 HLLs), PFCOUNT of
# one key (the cached path) and of three keys (a merge per call), GEOADD, and GEOSEARCH
# returning 100 members, against redis-server in interleaved rounds on the same pinned CPUs
# (server on CPU 1 with one shard thread, load on CPU 0). Prints a markdown table of medians:
# ops/s, server CPU ns per call, and damselfly's ratios.
#
#   scripts/bench-types.sh [--requests N] [--rounds R]
#
# Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
N=200000
ROUNDS=3
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) N=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
cargo build --release -q -p damselfly
BIN=target/release/damselfly

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

start_server() { # name port -> pid
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dbfilename '' >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & ;;
  esac
  echo $!
}

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

declare -A RPS CPU
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
      # -r 1000: 1000 HLLs / geo keys, each growing to a dense HLL over the run.
      rps=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -n "$n" -r 1000 -c 50 -P "$P" --csv "${cmd[@]}" 2>/dev/null \
            | awk -F'","' 'NR>1{gsub(/"/,"",$2); print $2}' | head -1)
      c1=$(cpu_ticks "$pid")
      RPS[$name,$t]+="${rps:-0} "
      CPU[$name,$t]+="$(python3 -c "print(round(($c1-$c0)/$TCK*1e9/$n))") "
    done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
  done
done

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f'{statistics.median(v):.0f}')" $1; }
echo
echo "| test | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/call | redis CPU ns/call | CPU ratio (redis/damselfly) |"
echo "|---|---|---|---|---|---|---|"
for t in "${TESTS[@]}"; do
  d=$(median "${RPS[damselfly,$t]}"); r=$(median "${RPS[redis,$t]}")
  dc=$(median "${CPU[damselfly,$t]}"); rc=$(median "${CPU[redis,$t]}")
  python3 -c "print(f'| {\"$t\"} | $d | $r | {$d/$r:.2f} | $dc | $rc | {$rc/max($dc,1):.2f} |')"
done
