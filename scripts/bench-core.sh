#!/usr/bin/env bash
# Core-engine benchmark. Runs damselfly and redis-server (and, with --baseline, an earlier
# damselfly build) one after the other in each of ROUNDS interleaved rounds on the same pinned
# CPU, drives them with the same redis-benchmark load pinned to another CPU, and prints a
# markdown report of per-test medians with ratios measured in the same run.
#
#   scripts/bench-core.sh [--requests N] [--rounds R] [--baseline BIN] [--out FILE]
#
# Defaults: -t set,get -n 2000000 -r 100000 -d 32 -c 50, at -P 1 and -P 30; server on CPU 1
# (--proactor_threads=1), load on CPU 0; memory = RSS growth per key after DEBUG POPULATE
# 1000000 key 32 (measured once per server). --baseline compares two builds of damselfly, e.g.
# `git worktree add /tmp/base <commit> && cargo build --release --manifest-path
# /tmp/base/Cargo.toml` then `--baseline /tmp/base/target/release/damselfly`.
# Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
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
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
cargo build --release -q -p damselfly
BIN=target/release/damselfly
NAMES=(damselfly redis)
[ -n "$BASE" ] && NAMES=(damselfly baseline redis)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
TCK=$(getconf CLK_TCK)

start_server() { # name port -> pid
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --enable-debug-command yes >/dev/null 2>&1 & ;;
    baseline) taskset -c "$SERVER_CPU" "$BASE" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --enable-debug-command yes >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no --enable-debug-command yes >/dev/null 2>&1 & ;;
  esac
  echo $!
}

declare -A RPS CPUNS MEM
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
    for P in 1 30; do
      for t in set get; do
        c0=$(cpu_ticks "$pid")
        rps=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -t $t -n "$N" -r 100000 -d 32 -c 50 -P "$P" --csv 2>/dev/null \
              | awk -F'","' 'NR>1{gsub(/"/,"",$2); print $2}' | head -1)
        c1=$(cpu_ticks "$pid")
        RPS[$name,$t,$P]+="${rps:-0} "
        CPUNS[$name,$t,$P]+="$(python3 -c "print(round(($c1-$c0)/$TCK*1e9/$N))") "
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

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f'{statistics.median(v):.0f}')" $1; }
ratio() { python3 -c "a=float('$1' or 0); b=float('$2' or 0); print(f'{a/b:.2f}' if b else 'n/a')"; }
{
  echo "### Core engine: redis-benchmark, one server thread (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Medians of $ROUNDS interleaved rounds. Server pinned to CPU $SERVER_CPU (damselfly \`--proactor_threads=1\`), load pinned to CPU $LOAD_CPU:"
  echo "\`redis-benchmark -t set,get -n $N -r 100000 -d 32 -c 50 -P {1,30}\`. Machine: $(nproc) cores, $(uname -r)."
  [ -n "$BASE" ] && echo "\"baseline\" is an earlier damselfly build ($BASE) measured in the same rounds."
  echo
  if [ -n "$BASE" ]; then
    echo "| test | pipeline | damselfly ops/s | baseline ops/s | redis-server ops/s | damselfly/redis | baseline/redis | damselfly CPU ns/op | baseline CPU ns/op | redis CPU ns/op |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
  else
    echo "| test | pipeline | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/op | redis CPU ns/op |"
    echo "|---|---|---|---|---|---|---|"
  fi
  for P in 1 30; do for t in set get; do
    d=$(median "${RPS[damselfly,$t,$P]}"); r=$(median "${RPS[redis,$t,$P]}")
    dc=$(median "${CPUNS[damselfly,$t,$P]}"); rc=$(median "${CPUNS[redis,$t,$P]}")
    if [ -n "$BASE" ]; then
      b=$(median "${RPS[baseline,$t,$P]}"); bc=$(median "${CPUNS[baseline,$t,$P]}")
      echo "| ${t^^} | $P | $d | $b | $r | $(ratio "$d" "$r") | $(ratio "$b" "$r") | $dc | $bc | $rc |"
    else
      echo "| ${t^^} | $P | $d | $r | $(ratio "$d" "$r") | $dc | $rc |"
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
