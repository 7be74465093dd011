#!/usr/bin/env bash
# Core-engine benchmark (issue: core engine). Runs damselfly and redis-server one after the other
# on the same pinned CPU, drives both with the same redis-benchmark load pinned to another CPU,
# and prints a markdown report with ratios measured in the same run.
#
#   scripts/bench-core.sh [--requests N] [--out FILE]
#
# Defaults follow the acceptance criteria: -t set,get -n 2000000 -r 100000 -d 32 -c 50, at -P 1
# and -P 30; server on CPU 1 (--proactor_threads=1), load on CPU 0; memory = RSS growth per key
# after DEBUG POPULATE 1000000 key 32. Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
N=2000000
OUT=""
POP=1000000
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) N=$2; shift 2 ;;
    --populate) POP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
cargo build --release -q -p damselfly
BIN=target/release/damselfly

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
TCK=$(getconf CLK_TCK)

start_server() { # name port -> pid
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & ;;
  esac
  echo $!
}

declare -A RPS CPUNS MEM
for name in damselfly redis; do
  port=$(free_port); pid=$(start_server $name "$port"); wait_up "$port"
  for P in 1 30; do
    for t in set get; do
      c0=$(cpu_ticks "$pid")
      rps=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -t $t -n "$N" -r 100000 -d 32 -c 50 -P "$P" --csv 2>/dev/null \
            | awk -F'","' 'NR>1{gsub(/"/,"",$2); print $2}' | head -1)
      c1=$(cpu_ticks "$pid")
      RPS[$name,$t,$P]=$rps
      CPUNS[$name,$t,$P]=$(python3 -c "print(round(($c1-$c0)/$TCK*1e9/$N))")
    done
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  # Memory: fresh server, RSS growth after DEBUG POPULATE.
  port=$(free_port); pid=$(start_server $name "$port"); wait_up "$port"
  r0=$(rss_kb "$pid"); redis-cli -p "$port" debug populate "$POP" key 32 >/dev/null; sleep 0.5; r1=$(rss_kb "$pid")
  MEM[$name]=$(python3 -c "print(round(($r1-$r0)*1024/$POP,1))")
  kill "$pid"; wait "$pid" 2>/dev/null || true
done

ratio() { python3 -c "a=float('$1' or 0); b=float('$2' or 0); print(f'{a/b:.2f}' if b else 'n/a')"; }
{
  echo "### Core engine: redis-benchmark, one server thread (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Server pinned to CPU $SERVER_CPU (damselfly \`--proactor_threads=1\`), load pinned to CPU $LOAD_CPU:"
  echo "\`redis-benchmark -t set,get -n $N -r 100000 -d 32 -c 50 -P {1,30}\`. Machine: $(nproc) cores, $(uname -r)."
  echo
  echo "| test | pipeline | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/op | redis CPU ns/op |"
  echo "|---|---|---|---|---|---|---|"
  for P in 1 30; do for t in set get; do
    echo "| ${t^^} | $P | ${RPS[damselfly,$t,$P]} | ${RPS[redis,$t,$P]} | $(ratio "${RPS[damselfly,$t,$P]}" "${RPS[redis,$t,$P]}") | ${CPUNS[damselfly,$t,$P]} | ${CPUNS[redis,$t,$P]} |"
  done; done
  echo
  echo "Memory after \`DEBUG POPULATE $POP key 32\` (RSS growth per key): damselfly ${MEM[damselfly]} B, redis-server ${MEM[redis]} B, ratio $(ratio "${MEM[damselfly]}" "${MEM[redis]}")."
} | tee ${OUT:+"$OUT"}
