# Helpers shared by the scripts/bench-*.sh comparisons (sourced, not run).

# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits until a server answers PING on port $1 (plain RESP).
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }

# The median of the space-separated numbers in $1, as an integer.
median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f'{statistics.median(v):.0f}')" $1; }

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
