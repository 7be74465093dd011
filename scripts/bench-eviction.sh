#!/usr/bin/env bash
# Eviction benchmark: hit ratio and throughput under the same maxmemory and the same skewed
# workload, redis-server (allkeys-lru, allkeys-lfu) against damselfly (allkeys-lru, allkeys-lfu,
# cache mode), in interleaved rounds on the same pinned CPUs; prints a markdown report of the
# medians, p50/p99 request latency (ms, damselfly-bench's Totals row: SETs and GETs together)
# included.
#
#   scripts/bench-eviction.sh [--rounds R] [--maxmemory BYTES] [--keys N] [--warmup S] [--time S]
#
# Workload (damselfly-bench, memtier's options): SET:GET 1:1, Gaussian keys over N keys for both
# (`--key-pattern G:G`, memtier's default deviation: a sixth of the range; `--distinct-client-seed`
# so that the connections do not all draw the same keys), 100-byte values,
# 1 thread x 50 connections, pipeline 1. The default N (3,000,000 keys) is about 10x what fits
# in the default maxmemory (64 MiB). Each server first runs the workload for WARMUP seconds to
# fill up, then for TIME seconds measured: hit ratio = GET hits / GETs. Server on CPU 1 (one
# shard thread), load on CPU 0. Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
ROUNDS=3
MAXMEM=$((64 << 20))
KEYS=3000000
WARMUP=20
TIME=10
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --maxmemory) MAXMEM=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --time) TIME=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cargo build --release -q -p damselfly -p damselfly-bench
BIN=target/release/damselfly
BENCH=target/release/damselfly-bench
# CONFIGS="redis-lfu damselfly-cache" runs a subset (the cache-mode comparison needs both redis
# policies to name the best one).
read -r -a CONFIGS <<< "${CONFIGS:-redis-lru redis-lfu damselfly-lru damselfly-lfu damselfly-cache}"

rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }

start_server() { # config port -> pid
  local common=(--port "$2" --bind 127.0.0.1 --dir "$BENCH_DIR" --maxmemory "$MAXMEM")
  case "$1" in
    redis-lru) taskset -c "$SERVER_CPU" redis-server "${common[@]}" --maxmemory-policy allkeys-lru --save '' --appendonly no >/dev/null 2>&1 & ;;
    redis-lfu) taskset -c "$SERVER_CPU" redis-server "${common[@]}" --maxmemory-policy allkeys-lfu --save '' --appendonly no >/dev/null 2>&1 & ;;
    damselfly-lru) taskset -c "$SERVER_CPU" "$BIN" "${common[@]}" --maxmemory-policy allkeys-lru --proactor_threads=1 --dbfilename '' >/dev/null 2>&1 & ;;
    damselfly-lfu) taskset -c "$SERVER_CPU" "$BIN" "${common[@]}" --maxmemory-policy allkeys-lfu --proactor_threads=1 --dbfilename '' >/dev/null 2>&1 & ;;
    damselfly-cache) taskset -c "$SERVER_CPU" "$BIN" "${common[@]}" --cache_mode=true --proactor_threads=1 --dbfilename '' >/dev/null 2>&1 & ;;
  esac
  echo $!
}

load() { # port seconds -> "ops hits misses p50_ms p99_ms"
  local out ops p50 p99
  out=$(taskset -c "$LOAD_CPU" "$BENCH" -p "$1" -t 1 -c 50 --test-time "$2" --ratio 1:1 \
    --key-pattern G:G --key-minimum 1 --key-maximum "$KEYS" -d 100 --distinct-client-seed --hide-progress --hide-histogram 2>/dev/null)
  read -r ops p50 p99 <<<"$(memtier_stats <<<"$out")"
  echo "$ops $(awk '/^Gets/{hits=$3; miss=$4} END{print hits, miss}' <<<"$out") $p50 $p99"
}

declare -A OPS RATIO USED RSS EVICTED P50 P99
for round in $(seq 1 "$ROUNDS"); do
  for cfg in "${CONFIGS[@]}"; do
    echo "round $round/$ROUNDS: $cfg" >&2
    port=$(free_port); pid=$(start_server "$cfg" "$port"); wait_up "$port"
    load "$port" "$WARMUP" >/dev/null
    read -r ops hits miss p50 p99 < <(load "$port" "$TIME")
    OPS[$cfg]+="$ops "
    P50[$cfg]+="$p50 "; P99[$cfg]+="$p99 "
    RATIO[$cfg]+="$(awk -v h="$hits" -v m="$miss" 'BEGIN{printf "%.4f", h/(h+m)}') "
    USED[$cfg]+="$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/{print $2+0}') "
    EVICTED[$cfg]+="$(redis-cli -p "$port" info stats | awk -F: '/^evicted_keys:/{print $2+0}') "
    RSS[$cfg]+="$(( $(rss_kb "$pid") * 1024 )) "
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
  done
done

# (Not lib.sh's median: reads stdin, keeps the decimals.)
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
report() {
  echo "Eviction benchmark ($(date -u +%Y-%m-%d), $ROUNDS interleaved rounds, medians): maxmemory $((MAXMEM >> 20)) MiB, SET:GET 1:1 over $KEYS keys (Gaussian, G:G), 100-byte values, 50 connections, server on CPU $SERVER_CPU (one thread), load on CPU $LOAD_CPU; ${WARMUP}s warm-up, ${TIME}s measured."
  echo
  echo "| server / policy | hit ratio | ops/s | used_memory / maxmemory | RSS / maxmemory | evicted keys | p50 ms | p99 ms |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for cfg in "${CONFIGS[@]}"; do
    r=$(echo "${RATIO[$cfg]}" | median); o=$(echo "${OPS[$cfg]}" | median)
    u=$(echo "${USED[$cfg]}" | median); s=$(echo "${RSS[$cfg]}" | median); e=$(echo "${EVICTED[$cfg]}" | median)
    printf '| %s | %.3f | %.0f | %.3f | %.3f | %s | %s | %s |\n' "$cfg" "$r" "$o" "$(awk -v a="$u" -v b="$MAXMEM" 'BEGIN{print a/b}')" "$(awk -v a="$s" -v b="$MAXMEM" 'BEGIN{print a/b}')" "$e" \
      "$(median_ms "${P50[$cfg]}")" "$(median_ms "${P99[$cfg]}")"
  done
  [[ " ${CONFIGS[*]} " == *" damselfly-cache "* ]] || return 0
  best_r=0; best_o=0
  for cfg in redis-lru redis-lfu; do
    [ -n "${RATIO[$cfg]:-}" ] || continue
    r=$(echo "${RATIO[$cfg]}" | median); o=$(echo "${OPS[$cfg]}" | median)
    best_r=$(awk -v a="$r" -v b="$best_r" 'BEGIN{print (a>b)?a:b}'); best_o=$(awk -v a="$o" -v b="$best_o" 'BEGIN{print (a>b)?a:b}')
  done
  r=$(echo "${RATIO[damselfly-cache]}" | median); o=$(echo "${OPS[damselfly-cache]}" | median)
  echo
  echo "Cache mode vs the best redis-server policy: hit ratio $(awk -v a="$r" -v b="$best_r" 'BEGIN{printf "%+.3f", a-b}') ($r vs $best_r), throughput $(awk -v a="$o" -v b="$best_o" 'BEGIN{printf "%.2fx", a/b}')."
}
if [ -n "$OUT" ]; then report | tee "$OUT"; else report; fi
