#!/usr/bin/env bash
# Pub/Sub benchmark: fan-out of one channel to 1, 10 and 100 subscribers, and 1,000 channels
# with 100 channel subscribers and 10 pattern subscribers, against redis-server and damselfly
# in interleaved rounds on the same pinned CPUs (server on CPU 1 with one shard thread, load on
# CPU 0); prints a markdown table of the medians: messages delivered per second and server CPU
# time per delivered message (from /proc), and damselfly's ratios.
#
#   scripts/bench-pubsub.sh [--rounds R] [--time S]
#
# Load: `damselfly-bench pubsub`, 4 publishers pipelining 16 PUBLISHes of 32-byte payloads,
# held back while more than a window of messages is undelivered (so that delivery is measured,
# not buffering; the pubsub output buffer limit is lifted on both servers for the same reason).
# No latency columns: `damselfly-bench pubsub` measures rates only (no per-message latency is
# timed), and a publisher's round trip would time the window that holds it back, not the server.
# Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
TIME=5
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --time) TIME=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
cargo build --release -q -p damselfly -p damselfly-bench
BIN=target/release/damselfly
BENCH=target/release/damselfly-bench

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }

start_server() { # server port -> pid
  case "$1" in
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & ;;
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dbfilename '' >/dev/null 2>&1 & ;;
  esac
  echo $!
}

declare -A SCEN=(
  [fanout-1]="--subscribers 1"
  [fanout-10]="--subscribers 10"
  [fanout-100]="--subscribers 100"
  [1000ch-patterns]="--channels 1000 --subscribers 100 --pattern-subscribers 10"
)
ORDER=(fanout-1 fanout-10 fanout-100 1000ch-patterns)
declare -A DEL CPU
for round in $(seq 1 "$ROUNDS"); do
  for sc in "${ORDER[@]}"; do
    for srv in redis damselfly; do
      echo "round $round/$ROUNDS: $sc on $srv" >&2
      port=$(free_port); pid=$(start_server "$srv" "$port"); wait_up "$port"
      redis-cli -p "$port" config set client-output-buffer-limit "pubsub 0 0 0" >/dev/null
      # shellcheck disable=SC2086
      line=$("$BENCH" pubsub -p "$port" ${SCEN[$sc]} --publishers 4 --pipeline 16 -d 32 \
        --test-time "$TIME" --warmup 1 --server-pid "$pid" --cpus "$LOAD_CPU")
      DEL[$srv,$sc]+="$(sed -E 's/.*delivered_per_sec=([0-9.]+).*/\1/' <<<"$line") "
      CPU[$srv,$sc]+="$(sed -E 's/.*server_cpu_ns_per_delivery=([0-9.]+).*/\1/' <<<"$line") "
      redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
      wait "$pid" 2>/dev/null || true
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo
echo "| scenario | redis delivered/s | damselfly delivered/s | ratio | redis CPU ns/msg | damselfly CPU ns/msg | CPU ratio (redis/damselfly) |"
echo "|---|---|---|---|---|---|---|"
for sc in "${ORDER[@]}"; do
  rd=$(median <<<"${DEL[redis,$sc]}"); dd=$(median <<<"${DEL[damselfly,$sc]}")
  rc=$(median <<<"${CPU[redis,$sc]}"); dc=$(median <<<"${CPU[damselfly,$sc]}")
  awk -v s="$sc" -v rd="$rd" -v dd="$dd" -v rc="$rc" -v dc="$dc" \
    'BEGIN{printf "| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", s, rd, dd, dd/rd, rc, dc, rc/dc}'
done
