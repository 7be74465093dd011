#!/usr/bin/env bash
# Scripting benchmark (issue 16): EVALSHA of a one-key INCR script at -P 1 and -P 30, and of a
# 10-key script (an INCR on each of 10 keys with different hash tags, so on different shards
# when there are several) at -P 30, against redis-server in interleaved rounds on the same
# pinned CPUs (server on CPU 1 with one shard thread, load on CPU 0). Prints a markdown table of
# medians: ops/s, server CPU ns per script call, and damselfly's ratios.
#
#   scripts/bench-scripting.sh [--requests N] [--rounds R]
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

ONE='return redis.call("incr", KEYS[1])'
TEN='local n = 0 for i = 1, #KEYS do n = n + redis.call("incr", KEYS[i]) end return n'
TENKEYS=""
for i in $(seq 0 9); do TENKEYS+=" {k$i}:__rand_int__"; done

declare -A RPS CPU
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
      rps=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -n "$n" -r 100000 -c 50 -P "$P" --csv "${cmd[@]}" 2>/dev/null \
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
  python3 -c "print(f'| EVALSHA {\"$t\"} | $d | $r | {$d/$r:.2f} | $dc | $rc | {$rc/$dc:.2f} |')"
done
