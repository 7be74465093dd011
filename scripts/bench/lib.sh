# Shared helpers of the redis-benchmark comparison scripts (scripts/bench-*.sh): sourced, not
# run. The scripts pin the server to $SERVER_CPU (default 1) with one shard thread and the load
# to $LOAD_CPU (default 0), and report medians of interleaved rounds: ops/s, server CPU per op,
# and p50/p99 request latency (ms) as the load generator measured it (redis-benchmark's --csv
# columns, damselfly-bench's / memtier's Totals row or JSON).

SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
BIN=${BIN:-target/release/damselfly}
TCK=$(getconf CLK_TCK)

command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits until the server on port $1 answers PING with PONG: an error reply (-LOADING while a
# snapshot loads) is not up yet.
wait_up() { for _ in $(seq 1 100); do [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }
# CPU time (utime + stime, in ticks) of process $1.
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# Server CPU ns per operation between two cpu_ticks readings: ns_per_op START END OPS
ns_per_op() { python3 -c "print(round(($2-$1)/$TCK*1e9/$3))"; }

# Every server runs in this emptied directory: a snapshot left in the working directory (a
# dump.rdb from another run) would otherwise be loaded, and measured against an empty peer.
BENCH_DIR=$PWD/target/bench-dir
rm -rf "$BENCH_DIR" && mkdir -p "$BENCH_DIR"

# start_server NAME PORT: starts damselfly or redis pinned to $SERVER_CPU; prints its pid.
start_server() {
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dir "$BENCH_DIR" --save '' >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --dir "$BENCH_DIR" --save '' --appendonly no >/dev/null 2>&1 & ;;
  esac
  echo $!
}

stop_server() { redis-cli -p "$1" shutdown nosave >/dev/null 2>&1 || true; wait "$2" 2>/dev/null || true; }

# redis-benchmark's numbers for its first test from its --csv output on stdin: "RPS P50 P99"
# (ops/s, p50 and p99 latency in ms). redis-benchmark 7 writes the header "test","rps",
# "avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",
# "max_latency_ms" and a row per test; columns are found by name. "0 n/a n/a" without a row
# (the test failed), "n/a" for a latency column the header lacks (an older redis-benchmark).
csv_stats() {
  awk -F'","' '
    NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i }; next }
    !done { for (i = 1; i <= NF; i++) gsub(/"/, "", $i)
            print $col["rps"], ("p50_latency_ms" in col ? $col["p50_latency_ms"] : "n/a"),
                  ("p99_latency_ms" in col ? $col["p99_latency_ms"] : "n/a"); done = 1 }
    END { if (!done) print "0 n/a n/a" }'
}
# redis-benchmark's ops/s for one test from its --csv output on stdin.
csv_rps() { csv_stats | awk '{print $1}'; }

# redis-benchmark pinned to $LOAD_CPU, -c 50, -r $RANDOM_KEYS (default 100000): "RPS P50 P99" of
# the first test (csv_stats). bench_stats PORT N P [options] [cmd...]
bench_stats() {
  local port=$1 n=$2 p=$3; shift 3
  taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -n "$n" -r "${RANDOM_KEYS:-100000}" -c 50 -P "$p" --csv "$@" 2>/dev/null | csv_stats
}
# The same, ops/s only. bench_rps PORT N P [options] [cmd...]
bench_rps() { bench_stats "$@" | awk '{print $1}'; }

# damselfly-bench's (or memtier_benchmark's) text report on stdin: "OPS P50 P99" of its Totals
# row (ops/s, p50 and p99 latency in ms; the columns are found by the header "Type Ops/sec
# Hits/sec Misses/sec Avg. Latency p50 Latency p99 Latency p99.9 Latency KB/sec"). "0 n/a n/a"
# without a Totals row, "n/a" for a percentile not printed (--print-percentiles).
memtier_stats() {
  awk '
    $1 == "Type" && !ncol { for (i = 1; i <= NF; i++) if ($i != "Latency") col[$i] = ++ncol; next }
    $1 == "Totals" && ncol && !done { print $col["Ops/sec"], ("p50" in col ? $col["p50"] : "n/a"),
                                       ("p99" in col ? $col["p99"] : "n/a"); done = 1 }
    END { if (!done) print "0 n/a n/a" }'
}
# The same from its --json-out-file: json_stats FILE -> "OPS P50 P99".
json_stats() {
  python3 - "$1" <<'PY'
import json, sys
try:
    t = json.load(open(sys.argv[1]))["ALL STATS"]["Totals"]
except (OSError, ValueError, KeyError):
    print("0 n/a n/a")
    sys.exit()
p = t.get("Percentile Latencies", {})
print(round(t["Ops/sec"], 1), p.get("p50.00", "n/a"), p.get("p99.00", "n/a"))
PY
}

# keep_stats KEY "RPS P50 P99": appends one round's numbers to RPS[KEY], P50[KEY] and P99[KEY]
# (associative arrays the script declares: declare -A RPS P50 P99).
keep_stats() {
  local r a b
  read -r r a b <<<"$2"
  RPS[$1]+="${r:-0} "; P50[$1]+="${a:-n/a} "; P99[$1]+="${b:-n/a} "
}

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f'{statistics.median(v):.0f}')" $1; }
# Median of latencies in ms (space-separated in $1), three decimals; "n/a" values are skipped,
# "n/a" when none is left.
median_ms() {
  # shellcheck disable=SC2086
  python3 -c "
import statistics, sys
v = []
for x in sys.argv[1:]:
    try: v.append(float(x))
    except ValueError: pass
print(f'{statistics.median(v):.3f}' if v else 'n/a')" ${1:-}
}

# $1/$2 with two decimals ("n/a" when $2 is 0 or empty).
ratio() { python3 -c "a=float('$1' or 0); b=float('$2' or 0); print(f'{a/b:.2f}' if b else 'n/a')"; }

# Latency columns of a report: lat_head LABEL... is the header part, " LABEL p50 ms |" for each
# label then " LABEL p99 ms |" for each; lat_cells KEY NAME... the matching cells, the medians
# (median_ms) of P50[NAME,KEY] then of P99[NAME,KEY]; lat_sep LABEL... the separator part.
lat_head() { local s="" l; for l in "$@"; do s+=" $l p50 ms |"; done; for l in "$@"; do s+=" $l p99 ms |"; done; echo "$s"; }
lat_cells() {
  local k=$1 s="" n; shift
  for n in "$@"; do s+=" $(median_ms "${P50[$n,$k]:-}") |"; done
  for n in "$@"; do s+=" $(median_ms "${P99[$n,$k]:-}") |"; done
  echo "$s"
}
lat_sep() { local s="" l; for l in "$@" "$@"; do s+="---|"; done; echo "$s"; }

# The report: table_header, then per test table_row NAME D_RPS R_RPS D_NS R_NS D_P50 R_P50 D_P99
# R_P99 (latencies "n/a" when left out), or median_row NAME KEY: the row of the medians of
# RPS/CPU/P50/P99[damselfly,KEY] and [redis,KEY].
table_header() {
  echo "| test | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/call | redis CPU ns/call | CPU ratio (redis/damselfly) |$(lat_head damselfly redis)"
  echo "|---|---|---|---|---|---|---|$(lat_sep damselfly redis)"
}
table_row() { echo "| $1 | $2 | $3 | $(ratio "$2" "$3") | $4 | $5 | $(ratio "$5" "$4") | ${6:-n/a} | ${7:-n/a} | ${8:-n/a} | ${9:-n/a} |"; }
median_row() {
  table_row "$1" "$(median "${RPS[damselfly,$2]}")" "$(median "${RPS[redis,$2]}")" \
    "$(median "${CPU[damselfly,$2]}")" "$(median "${CPU[redis,$2]}")" \
    "$(median_ms "${P50[damselfly,$2]:-}")" "$(median_ms "${P50[redis,$2]:-}")" \
    "$(median_ms "${P99[damselfly,$2]:-}")" "$(median_ms "${P99[redis,$2]:-}")"
}

# The options every comparison takes: sets N (requests), ROUNDS, OUT (report file) and the pinned
# CPUs SERVER_CPU/LOAD_CPU (environment), and checks that redis-server is there.
bench_args() {
  N=1000000
  ROUNDS=3
  OUT=""
  SERVER_CPU=${SERVER_CPU:-1}
  LOAD_CPU=${LOAD_CPU:-0}
  while [ $# -gt 0 ]; do
    case "$1" in
      --requests) N=$2; shift 2 ;;
      --rounds) ROUNDS=$2; shift 2 ;;
      --out) OUT=$2; shift 2 ;;
      *) echo "unknown option $1" >&2; exit 2 ;;
    esac
  done
  command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
}

# The table rows and per-round lines of a two-mode GET/SET comparison: RPS[server,mode,test,P]
# holds each round's ops/s, P50/P99[server,mode,test,P] its latencies (keep_stats); $1 and $2
# are the two modes. Ops/s columns first, then p50/p99 ms per mode and server.
report_two_modes() {
  local a=$1 b=$2 P t da ra db rb mode
  echo "| test | pipeline | damselfly $a | redis $a | ratio $a | damselfly $b | redis $b | ratio $b |$(lat_head "damselfly $a" "redis $a")$(lat_head "damselfly $b" "redis $b")"
  echo "|---|---|---|---|---|---|---|---|$(lat_sep 1 2)$(lat_sep 1 2)"
  for P in 1 30; do for t in set get; do
    da=$(median "${RPS[damselfly,$a,$t,$P]}"); ra=$(median "${RPS[redis,$a,$t,$P]}")
    db=$(median "${RPS[damselfly,$b,$t,$P]}"); rb=$(median "${RPS[redis,$b,$t,$P]}")
    echo "| ${t^^} | $P | $da | $ra | $(ratio "$da" "$ra") | $db | $rb | $(ratio "$db" "$rb") |$(lat_cells "$a,$t,$P" damselfly redis)$(lat_cells "$b,$t,$P" damselfly redis)"
  done; done
  echo
  echo "Per-round ops/s (damselfly / redis):"
  echo
  for mode in "$a" "$b"; do for P in 1 30; do for t in set get; do
    echo "- $mode ${t^^} -P $P: ${RPS[damselfly,$mode,$t,$P]% } / ${RPS[redis,$mode,$t,$P]% }"
  done; done; done
}
