#!/usr/bin/env bash
# Collections benchmark: damselfly vs redis-server, same run, same cores.
#
#   scripts/bench-collections.sh [--requests N] [--big N] [--small N] [--out FILE] [--skip-throughput]
#                                [--skip-memory]      (DFLY_BIN=path: another damselfly build)
#
# 1. Throughput (one server thread, server pinned to CPU $SERVER_CPU, redis-benchmark pinned to
#    CPU $LOAD_CPU, -c 50, P=1 and P=30): LPUSH, LPOP, SADD, HSET, ZADD (redis-benchmark's built-in
#    tests: random members via -r) and ZRANGE zs 0 9 on a 1000-member sorted set.
#    At P=1 redis-benchmark itself is the bottleneck on this kind of machine (its event loop costs
#    more CPU per request than either server: ~6.8 us vs ~5.5 us), so the P=1 tests also run under
#    damselfly-bench (1 thread, 50 connections, ~3.8 us per request), which saturates the server:
#    that table is the one that compares the servers' throughput at P=1.
#    Both tables also give p50/p99 latency (ms) per server: redis-benchmark's --csv columns, and
#    damselfly-bench's Totals row (--json-out-file).
# 2. Memory (RSS growth / element): one key with --big elements (default 1M) per type, and --small
#    (default 100k) keys of 10 elements per type. Members are "m:<n>" strings (a set of integers
#    is measured separately: it stays compact as intset in Redis only up to 512 entries).
#    Data is loaded with `redis-cli --pipe`. (Memory figures: no request latency to report.)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
N=1000000
BIG=1000000
SMALL=100000
OUT=""
THROUGHPUT=1
MEMORY=1
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) N=$2; shift 2 ;;
    --big) BIG=$2; shift 2 ;;
    --small) SMALL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --skip-throughput) THROUGHPUT=0; shift ;;
    --skip-memory) MEMORY=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cargo build --release -q -p damselfly -p damselfly-bench
BIN=${DFLY_BIN:-${CARGO_TARGET_DIR:-target}/release/damselfly}
LOADGEN=${CARGO_TARGET_DIR:-target}/release/damselfly-bench

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }

start_server() { # name port -> pid
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dir "$BENCH_DIR" --save '' >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --dir "$BENCH_DIR" --save '' --appendonly no >/dev/null 2>&1 & ;;
  esac
  echo $!
}

# Payloads (RESP, for redis-cli --pipe): big = one key, small = SMALL keys x 10 elements.
python3 - "$TMP" "$BIG" "$SMALL" <<'EOF'
import sys
tmp, big, small = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def enc(*a):
    out = [b"*%d\r\n" % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)
BATCH = 100
def write(name, cmds):
    with open(f"{tmp}/{name}", "wb") as f:
        for c in cmds:
            f.write(enc(*c))
def big_cmds(kind):
    for s in range(0, big, BATCH):
        r = range(s, min(s + BATCH, big))
        if kind == "list": yield ["RPUSH", "big"] + [f"m:{i}" for i in r]
        if kind == "hash": yield ["HSET", "big"] + [x for i in r for x in (f"f:{i}", f"v:{i}")]
        if kind == "set": yield ["SADD", "big"] + [f"m:{i}" for i in r]
        if kind == "intset": yield ["SADD", "big"] + [str(i) for i in r]
        if kind == "zset": yield ["ZADD", "big"] + [x for i in r for x in (str(i), f"m:{i}")]
def small_cmds(kind):
    for k in range(small):
        key = f"s:{k}"
        r = range(10)
        if kind == "list": yield ["RPUSH", key] + [f"m:{i}" for i in r]
        if kind == "hash": yield ["HSET", key] + [x for i in r for x in (f"f:{i}", f"v:{i}")]
        if kind == "set": yield ["SADD", key] + [f"m:{i}" for i in r]
        if kind == "intset": yield ["SADD", key] + [str(i) for i in r]
        if kind == "zset": yield ["ZADD", key] + [x for i in r for x in (str(i), f"m:{i}")]
for kind in ["list", "hash", "set", "intset", "zset"]:
    write(f"big-{kind}", big_cmds(kind))
    write(f"small-{kind}", small_cmds(kind))
zr = [["ZADD", "zs"] + [x for i in range(s, s + 100) for x in (str(i), f"member:{i}")] for s in range(0, 1000, 100)]
write("zrange-setup", zr)
EOF

declare -A RPS MEM CPUNS PORT PID P50 P99
KINDS="list hash set intset zset"
TESTS="lpush lpop sadd hset zadd zrange"
# (Not lib.sh's median: the medians here keep their decimals.)
median() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
if [ "$THROUGHPUT" = 1 ]; then
  # Both servers stay up (both pinned to the server CPU; only one is loaded at a time) and every
  # test alternates between them for $ROUNDS rounds: P=1 runs are within a few percent of each
  # other and drift with the machine, so the median of interleaved rounds is what is compared.
  ROUNDS=${ROUNDS:-3}
  # Medians of one cell's rounds (R, C, L5, L9: per server, space-separated) into
  # RPS/CPUNS/P50/P99[server,cell].
  keep_medians() {
    for name in damselfly redis; do
      # shellcheck disable=SC2086
      RPS[$name,$1]=$(median ${R[$name]})
      # shellcheck disable=SC2086
      CPUNS[$name,$1]=$(median ${C[$name]})
      P50[$name,$1]=$(median_ms "${L5[$name]}")
      P99[$name,$1]=$(median_ms "${L9[$name]}")
    done
    unset R C L5 L9
  }
  # One round's "RPS P50 P99" of server $1 into R, L5, L9.
  keep_round() {
    local r a b
    read -r r a b <<<"$2"
    R[$1]="${R[$1]:-} $r"; L5[$1]="${L5[$1]:-} $a"; L9[$1]="${L9[$1]:-} $b"
  }
  for name in damselfly redis; do
    PORT[$name]=$(free_port); PID[$name]=$(start_server $name "${PORT[$name]}"); wait_up "${PORT[$name]}"
    redis-cli -p "${PORT[$name]}" --pipe < "$TMP/zrange-setup" >/dev/null 2>&1 || true
  done
  for P in 1 30; do
    for t in $TESTS; do
      declare -A R=() C=() L5=() L9=()
      for round in $(seq 1 "$ROUNDS"); do
        for name in damselfly redis; do
          port=${PORT[$name]}; pid=${PID[$name]}
          c0=$(cpu_ticks "$pid")
          if [ "$t" = zrange ]; then
            out=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -n "$N" -c 50 -P "$P" --csv ZRANGE zs 0 9 2>/dev/null)
          else
            out=$(taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -t $t -n "$N" -r 100000 -c 50 -P "$P" --csv 2>/dev/null)
          fi
          c1=$(cpu_ticks "$pid")
          keep_round "$name" "$(csv_stats <<<"$out")"
          C[$name]="${C[$name]:-} $(python3 -c "print(round(($c1-$c0)/$TCK*1e9/$N))")"
        done
      done
      keep_medians "$t,$P"
    done
  done
  # P=1 under damselfly-bench (a load generator that does not saturate before the server).
  # The same commands as redis-benchmark's tests; each run is 50 connections x PER requests.
  PER=$(( N / 50 ))
  declare -A TEMPLATE=(
    [lpush]="LPUSH mylist __data__" [lpop]="LPOP mylist" [sadd]="SADD myset __key__"
    [hset]="HSET myhash __key__ __data__" [zadd]="ZADD myzset 0 __key__" [zrange]="ZRANGE zs 0 9")
  for t in $TESTS; do
    declare -A R=() C=() L5=() L9=()
    for round in $(seq 1 "$ROUNDS"); do
      for name in damselfly redis; do
        port=${PORT[$name]}; pid=${PID[$name]}
        rm -f "$TMP/lg.json"
        c0=$(cpu_ticks "$pid")
        taskset -c "$LOAD_CPU" "$LOADGEN" -p "$port" -t 1 -c 50 -n "$PER" --command "${TEMPLATE[$t]}" \
          --key-maximum 100000 -d 3 --hide-progress --json-out-file "$TMP/lg.json" >/dev/null 2>&1
        c1=$(cpu_ticks "$pid")
        keep_round "$name" "$(json_stats "$TMP/lg.json")"
        C[$name]="${C[$name]:-} $(python3 -c "print(round(($c1-$c0)/$TCK*1e9/($PER*50)))")"
      done
    done
    keep_medians "$t,lg"
  done
  for name in damselfly redis; do kill "${PID[$name]}"; wait "${PID[$name]}" 2>/dev/null || true; done
fi
used_memory() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/{print $2+0}'; }
for name in damselfly redis; do
  [ "$MEMORY" = 1 ] || break
  for size in big small; do
    for kind in $KINDS; do
      port=$(free_port); pid=$(start_server $name "$port"); wait_up "$port"
      r0=$(rss_kb "$pid"); u0=$(used_memory "$port")
      redis-cli -p "$port" --pipe < "$TMP/$size-$kind" >/dev/null 2>&1 || true
      sleep 0.5
      r1=$(rss_kb "$pid"); u1=$(used_memory "$port")
      enc=$(redis-cli -p "$port" object encoding "$( [ $size = big ] && echo big || echo s:0 )")
      elems=$([ $size = big ] && echo "$BIG" || echo $((SMALL * 10)))
      MEM[$name,$size,$kind]=$(python3 -c "print(round(($u1-$u0)/$elems,1))")
      MEM[$name,$size,$kind,rss]=$(python3 -c "print(round(($r1-$r0)*1024/$elems,1))")
      MEM[$name,$size,$kind,enc]=$enc
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done

{
  echo "### Collections: one server thread (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Server pinned to CPU $SERVER_CPU (damselfly \`--proactor_threads=1\`), redis-benchmark pinned to CPU $LOAD_CPU, -c 50, -n $N, -r 100000."
  echo "Machine: $(nproc) cores, $(uname -r)."
  if [ "$THROUGHPUT" = 1 ]; then
    echo
    echo "Median of $ROUNDS interleaved rounds per cell; CPU = server CPU time per request from /proc/PID/stat."
    echo
    echo "| test | pipeline | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/op | redis CPU ns/op |$(lat_head damselfly redis)"
    echo "|---|---|---|---|---|---|---|$(lat_sep 1 2)"
    for P in 1 30; do for t in $TESTS; do
      label=${t^^}; [ $t = zrange ] && label="ZRANGE zs 0 9 (1000 members)"
      echo "| $label | $P | ${RPS[damselfly,$t,$P]} | ${RPS[redis,$t,$P]} | $(ratio "${RPS[damselfly,$t,$P]}" "${RPS[redis,$t,$P]}") | ${CPUNS[damselfly,$t,$P]} | ${CPUNS[redis,$t,$P]} |$(lat_cells "$t,$P" damselfly redis)"
    done; done
    echo
    echo "P=1 with damselfly-bench as the load (\`-t 1 -c 50 -n $PER\`, pinned to CPU $LOAD_CPU; the server is the"
    echo "bottleneck here, unlike under redis-benchmark at P=1). Same commands: LPUSH/LPOP on one list,"
    echo "SADD/HSET/ZADD (score 0) of random members out of 100000, ZRANGE zs 0 9."
    echo
    echo "| test | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/op | redis CPU ns/op |$(lat_head damselfly redis)"
    echo "|---|---|---|---|---|---|$(lat_sep 1 2)"
    for t in $TESTS; do
      label=${t^^}; [ $t = zrange ] && label="ZRANGE zs 0 9 (1000 members)"
      echo "| $label | ${RPS[damselfly,$t,lg]} | ${RPS[redis,$t,lg]} | $(ratio "${RPS[damselfly,$t,lg]}" "${RPS[redis,$t,lg]}") | ${CPUNS[damselfly,$t,lg]} | ${CPUNS[redis,$t,lg]} |$(lat_cells "$t,lg" damselfly redis)"
    done
  fi
  [ "$MEMORY" = 1 ] || exit 0
  echo
  echo "Memory: growth of INFO used_memory (jemalloc allocated bytes, on both servers) per element after"
  echo "loading with \`redis-cli --pipe\`; RSS growth per element alongside (allocator page retention"
  echo "makes it noisier). Encoding as OBJECT ENCODING reports it: damselfly / redis."
  echo
  echo "| collection | damselfly B/elem | redis-server B/elem | ratio | damselfly RSS B/elem | redis RSS B/elem | encoding |"
  echo "|---|---|---|---|---|---|---|"
  for size in big small; do for kind in $KINDS; do
    label="$kind, $([ $size = big ] && echo "1 key x $BIG elements" || echo "$SMALL keys x 10 elements")"
    echo "| $label | ${MEM[damselfly,$size,$kind]} | ${MEM[redis,$size,$kind]} | $(ratio "${MEM[damselfly,$size,$kind]}" "${MEM[redis,$size,$kind]}") | ${MEM[damselfly,$size,$kind,rss]} | ${MEM[redis,$size,$kind,rss]} | ${MEM[damselfly,$size,$kind,enc]} / ${MEM[redis,$size,$kind,enc]} |"
  done; done
} | tee ${OUT:+"$OUT"}
