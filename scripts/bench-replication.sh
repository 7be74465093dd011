#!/usr/bin/env bash
# Replication benchmark: damselfly vs redis-server 7.0, each replicating itself, in the same run.
#
#   1. Full sync time: a primary holding $KEYS keys (DEBUG POPULATE, 100-byte values); a replica
#      is started and REPLICAOF'd; time until its link is up with every key loaded.
#   2. Primary throughput with one attached replica as a fraction of the same primary without
#      one (redis-benchmark SET, -P $PIPE, $ROUNDS interleaved rounds, medians), with the SETs'
#      p50/p99 latency (ms, redis-benchmark's --csv columns, medians) beside it.
#   3. Replica lag under that load: the primary's master_repl_offset minus the replica's
#      offset, sampled every 50 ms (median and max bytes), and the time the replica needs
#      after the load stops to reach the primary's offset.
#   (1 and 3 are a duration and replication offsets, not requests: no latency percentiles.)
#
# Pinning (2-core machine): every primary on $SERVER_CPU (default 1) with one shard thread,
# the load generator on $LOAD_CPU (default 0), and the replica on $LOAD_CPU too (a replica
# needs a core; both servers' replicas get the same one).
#
# Both servers sync the same way: SYNC=disk (default: the snapshot file, then `$<len>`) or
# SYNC=diskless (`$EOF:` straight to the socket); no diskless delay either way.
#
# Usage: scripts/bench-replication.sh [KEYS] (default 5000000); ROUNDS, N, PIPE, SYNC in the env.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/lib.sh

KEYS=${1:-5000000}
ROUNDS=${ROUNDS:-3}
N=${N:-2000000}
PIPE=${PIPE:-16}
SYNC=${SYNC:-disk}
case "$SYNC" in
  disk) DISKLESS=no ;;
  diskless) DISKLESS=yes ;;
  *) echo "SYNC must be disk or diskless" >&2; exit 2 ;;
esac
WORK=$(mktemp -d /tmp/bench-repl.XXXXXX)
trap 'pkill -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT

[[ -x $BIN ]] || cargo build --release -q

# start_at NAME PORT CPU DIR: a server pinned to CPU, working in DIR; prints its pid.
start_at() {
  mkdir -p "$4"
  case "$1" in
    damselfly) taskset -c "$3" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dir "$4" --dbfilename dump.rdb --enable-debug-command yes --repl-diskless-sync "$DISKLESS" --repl-diskless-sync-delay 0 >"$4/log" 2>&1 & ;;
    redis) taskset -c "$3" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no --dir "$4" --enable-debug-command yes --repl-diskless-sync "$DISKLESS" --repl-diskless-sync-delay 0 >"$4/log" 2>&1 & ;;
  esac
  echo $!
}

field() { redis-cli -p "$1" info replication | tr -d '\r' | awk -F: -v f="$2" '$1==f{print $2}'; }

# full_sync NAME: seconds from REPLICAOF to a replica with every key.
full_sync() {
  local name=$1 pp rp ppid rpid t0 t1
  pp=$(free_port); rp=$(free_port)
  ppid=$(start_at "$name" "$pp" "$SERVER_CPU" "$WORK/$name-p"); wait_up "$pp"
  redis-cli -p "$pp" debug populate "$KEYS" key 100 >/dev/null
  rpid=$(start_at "$name" "$rp" "$LOAD_CPU" "$WORK/$name-r"); wait_up "$rp"
  t0=$(date +%s.%N)
  redis-cli -p "$rp" replicaof 127.0.0.1 "$pp" >/dev/null
  while :; do
    if [[ $(field "$rp" master_link_status) == up ]] && [[ $(redis-cli -p "$rp" dbsize) == "$KEYS" ]]; then break; fi
    sleep 0.05
  done
  t1=$(date +%s.%N)
  stop_server "$rp" "$rpid"; stop_server "$pp" "$ppid"
  python3 -c "print(f'{$t1-$t0:.2f}')"
}

# throughput NAME WITH_REPLICA: "OPS P50 P99", the medians of ROUNDS rounds' SET ops/s and p50
# and p99 latency (ms); with a replica, also the lag samples (bytes) into $WORK/lag-NAME and the
# catch-up time into $WORK/catch-NAME.
throughput() {
  local name=$1 with=$2 pp rp ppid rpid=0 r rps=() p50=() p99=() lagpid a b c
  pp=$(free_port); rp=$(free_port)
  ppid=$(start_at "$name" "$pp" "$SERVER_CPU" "$WORK/$name-tp$with"); wait_up "$pp"
  if [[ $with == 1 ]]; then
    rpid=$(start_at "$name" "$rp" "$LOAD_CPU" "$WORK/$name-tr"); wait_up "$rp"
    redis-cli -p "$rp" replicaof 127.0.0.1 "$pp" >/dev/null
    until [[ $(field "$rp" master_link_status) == up ]]; do sleep 0.05; done
  fi
  for r in $(seq 1 "$ROUNDS"); do
    if [[ $with == 1 ]]; then
      ( while :; do
          # (The replica first: the difference is then never below the true lag.)
          s=$(field "$rp" slave_repl_offset); m=$(field "$pp" master_repl_offset)
          [[ -n $m && -n $s ]] && echo $((m - s))
          sleep 0.05
        done ) >>"$WORK/lag-$name" &
      lagpid=$!
    fi
    read -r a b c <<<"$(RANDOM_KEYS=1000000 bench_stats "$pp" "$N" "$PIPE" -t set -d 100)"
    rps+=("$a"); p50+=("$b"); p99+=("$c")
    if [[ $with == 1 ]]; then
      kill "$lagpid" 2>/dev/null || true; wait "$lagpid" 2>/dev/null || true
      local t0 t1 target
      t0=$(date +%s.%N); target=$(field "$pp" master_repl_offset)
      until [[ $(field "$rp" slave_repl_offset) -ge $target ]]; do sleep 0.01; done
      t1=$(date +%s.%N)
      python3 -c "print(f'{$t1-$t0:.3f}')" >>"$WORK/catch-$name"
    fi
  done
  [[ $rpid != 0 ]] && stop_server "$rp" "$rpid"
  stop_server "$pp" "$ppid"
  echo "$(median "${rps[*]}") $(median_ms "${p50[*]}") $(median_ms "${p99[*]}")"
}

echo "## Replication ($(date -u +%Y-%m-%d), $KEYS keys for full sync, SET -P $PIPE x $N, $ROUNDS rounds)"
echo
d_sync=$(full_sync damselfly); r_sync=$(full_sync redis)
echo "| full sync of $KEYS keys | damselfly s | redis-server s | ratio (redis/damselfly) |"
echo "|---|---|---|---|"
python3 -c "print(f'| REPLICAOF → link up, all keys | $d_sync | $r_sync | {$r_sync/$d_sync:.2f} |')"
echo
read -r d0 d0_50 d0_99 <<<"$(throughput damselfly 0)"; read -r r0 r0_50 r0_99 <<<"$(throughput redis 0)"
read -r d1 d1_50 d1_99 <<<"$(throughput damselfly 1)"; read -r r1 r1_50 r1_99 <<<"$(throughput redis 1)"
echo "| primary SET ops/s | damselfly | redis-server | damselfly p50 ms | redis p50 ms | damselfly p99 ms | redis p99 ms |"
echo "|---|---|---|---|---|---|---|"
echo "| no replica | $d0 | $r0 | $d0_50 | $r0_50 | $d0_99 | $r0_99 |"
echo "| one replica | $d1 | $r1 | $d1_50 | $r1_50 | $d1_99 | $r1_99 |"
python3 -c "print(f'| with / without | {$d1/$d0:.2f} | {$r1/$r0:.2f} | | | | |')"
python3 -c "print(f'| damselfly / redis, with a replica | {$d1/$r1:.2f} | | | | | |')"
echo
lagstats() { python3 - "$1" "$2" <<'EOF'
import statistics, sys
lag = [int(x) for x in open(sys.argv[1]).read().split() if x.lstrip('-').isdigit()]
catch = [float(x) for x in open(sys.argv[2]).read().split()]
print(f"{statistics.median(lag):.0f} | {max(lag)} | {statistics.median(catch):.3f}")
EOF
}
echo "| replica lag under the load | median bytes | max bytes | catch-up after the load, s |"
echo "|---|---|---|---|"
echo "| damselfly | $(lagstats "$WORK/lag-damselfly" "$WORK/catch-damselfly") |"
echo "| redis-server | $(lagstats "$WORK/lag-redis" "$WORK/catch-redis") |"
