#!/usr/bin/env bash
# ACL benchmark (issue 20): GET/SET at -P 1 and -P 30 as a restricted ACL user, and as the
# unrestricted default user, on damselfly and redis-server with the same configuration, in
# ROUNDS interleaved rounds on the same pinned CPUs. Prints a markdown report of medians with
# the damselfly/redis ratio in each mode, and p50/p99 latency (ms, from redis-benchmark's --csv)
# per server and mode; the goal is an ACL ratio no worse than the open one.
#
#   scripts/bench-acl.sh [--requests N] [--rounds R] [--out FILE]
#
# The restricted user: `ACL SETUSER bench on >benchpw ~key:* resetchannels -@all +get +set
# +ping +config|get` (redis-benchmark's keys are key:NNNNNNNNNNNN, so every command passes
# the key check; +config|get for redis-benchmark's start-up query). Server on CPU 1
# (--proactor_threads=1), load (redis-benchmark -c 50 -d 32 -r 100000) on CPU 0.
# Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
bench_args "$@"
cargo build --release -q -p damselfly
BIN=target/release/damselfly
NAMES=(damselfly redis)
MODES=(open acl)
RULES="on >benchpw ~key:* resetchannels -@all +get +set +ping +config|get"

start_server() { # name port -> pid
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dir "$BENCH_DIR" --save '' >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --dir "$BENCH_DIR" --save '' --appendonly no >/dev/null 2>&1 & ;;
  esac
  echo $!
}

declare -A RPS P50 P99
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    port=$(free_port); pid=$(start_server "$name" "$port"); wait_up "$port"
    # shellcheck disable=SC2086
    redis-cli -p "$port" ACL SETUSER bench $RULES >/dev/null
    for mode in "${MODES[@]}"; do
      auth=()
      [ "$mode" = acl ] && auth=(--user bench -a benchpw)
      for P in 1 30; do
        for t in set get; do
          stats=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" "${auth[@]}" -t $t -n "$N" -r 100000 -d 32 -c 50 -P "$P" --csv 2>/dev/null | csv_stats)
          keep_stats "$name,$mode,$t,$P" "$stats"
        done
      done
    done
    # The restricted runs really were restricted: a denied command is refused.
    denied=$(redis-cli -p "$port" --user bench --pass benchpw --no-auth-warning DEL key:1 2>&1 || true)
    case "$denied" in *NOPERM*) ;; *) echo "$name: bench user not restricted: $denied" >&2; exit 1 ;; esac
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done

{
  echo "### ACL: restricted user vs default user, redis-benchmark, one server thread (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Medians of $ROUNDS interleaved rounds. Server pinned to CPU $SERVER_CPU (damselfly \`--proactor_threads=1\`), load pinned to CPU $LOAD_CPU:"
  echo "\`redis-benchmark -t set,get -n $N -r 100000 -d 32 -c 50 -P {1,30}\`, as the default user (open) and as"
  echo "\`ACL SETUSER bench $RULES\` (acl, \`--user bench -a benchpw\`). Machine: $(nproc) cores, $(uname -r)."
  echo
  report_two_modes "${MODES[@]}"
} | tee ${OUT:+"$OUT"}
