# Shared helpers of the redis-benchmark comparison scripts (scripts/bench-*.sh): sourced, not
# run. The scripts pin the server to $SERVER_CPU (default 1) with one shard thread and the load
# to $LOAD_CPU (default 0), and report medians of interleaved rounds.

SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
BIN=${BIN:-target/release/damselfly}
TCK=$(getconf CLK_TCK)

command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }
# CPU time (utime + stime, in ticks) of process $1.
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# Server CPU ns per operation between two cpu_ticks readings: ns_per_op START END OPS
ns_per_op() { python3 -c "print(round(($2-$1)/$TCK*1e9/$3))"; }

# start_server NAME PORT: starts damselfly or redis pinned to $SERVER_CPU; prints its pid.
start_server() {
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 --dbfilename '' >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & ;;
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
