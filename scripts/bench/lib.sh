# Shared helpers of the redis-benchmark comparison scripts (scripts/bench-*.sh): sourced, not
# run. The scripts pin the server to $SERVER_CPU (default 1) with one shard thread and the load
# to $LOAD_CPU (default 0), and report medians of interleaved rounds.

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

# redis-benchmark pinned to $LOAD_CPU: ops/s of the first test in its CSV output.
# bench_rps PORT N P cmd...
bench_rps() {
  local port=$1 n=$2 p=$3; shift 3
  taskset -c "$LOAD_CPU" redis-benchmark -p "$port" -n "$n" -r "${RANDOM_KEYS:-100000}" -c 50 -P "$p" --csv "$@" 2>/dev/null \
    | awk -F'","' 'NR>1{gsub(/"/,"",$2); print $2}' | head -1
}

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f'{statistics.median(v):.0f}')" $1; }

# The report: table_header, then table_row NAME D_RPS R_RPS D_NS R_NS per test.
table_header() {
  echo "| test | damselfly ops/s | redis-server ops/s | ratio | damselfly CPU ns/call | redis CPU ns/call | CPU ratio (redis/damselfly) |"
  echo "|---|---|---|---|---|---|---|"
}
table_row() { python3 -c "print(f'| $1 | $2 | $3 | {$2/$3:.2f} | $4 | $5 | {$5/max($4,1):.2f} |')"; }

# $1/$2 with two decimals ("n/a" when $2 is 0 or empty).
ratio() { python3 -c "a=float('$1' or 0); b=float('$2' or 0); print(f'{a/b:.2f}' if b else 'n/a')"; }

# redis-benchmark's ops/s for one test from its --csv output on stdin.
csv_rps() { awk -F'","' 'NR>1{gsub(/"/,"",$2); print $2}' | head -1; }

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
# holds each round's ops/s; $1 and $2 are the two modes.
report_two_modes() {
  local a=$1 b=$2 P t da ra db rb mode
  echo "| test | pipeline | damselfly $a | redis $a | ratio $a | damselfly $b | redis $b | ratio $b |"
  echo "|---|---|---|---|---|---|---|---|"
  for P in 1 30; do for t in set get; do
    da=$(median "${RPS[damselfly,$a,$t,$P]}"); ra=$(median "${RPS[redis,$a,$t,$P]}")
    db=$(median "${RPS[damselfly,$b,$t,$P]}"); rb=$(median "${RPS[redis,$b,$t,$P]}")
    echo "| ${t^^} | $P | $da | $ra | $(ratio "$da" "$ra") | $db | $rb | $(ratio "$db" "$rb") |"
  done; done
  echo
  echo "Per-round ops/s (damselfly / redis):"
  echo
  for mode in "$a" "$b"; do for P in 1 30; do for t in set get; do
    echo "- $mode ${t^^} -P $P: ${RPS[damselfly,$mode,$t,$P]% } / ${RPS[redis,$mode,$t,$P]% }"
  done; done; done
}
