#!/usr/bin/env bash
# Big values during BGSAVE (issue 13): how long does one huge collection hold the server?
#
#   scripts/bench-bigvalue-save.sh [--elements N] [--rounds R] [--out FILE]
#   (DFLY_BIN=path: the damselfly build to measure; DFLY_BASE_BIN=path: a second damselfly build
#    measured in the same rounds, e.g. one from before a change; no cargo build when DFLY_BIN is
#    given)
#
# Per server and round, a fresh server pinned to CPU $SERVER_CPU (damselfly
# --proactor_threads=1; redis-server --save '' --appendonly no), everything else on $LOAD_CPU:
# 1. Dataset: one set, one hash, one sorted set and one list of N elements each (default
#    1,000,000; redis-cli --pipe, 1,000 elements per command) plus 100,000 small strings.
# 2. A probe connection sends PING every millisecond and records each round trip; BGSAVE is sent
#    after 0.5 s and the probe runs until INFO reports rdb_bgsave_in_progress:0.
# Reported (medians over rounds): the longest PING round trip during the save, its p50, p99 and
# 99.9th percentile, the number of round trips over 10 ms, the save's duration (a duration: no
# latency percentiles for it). The longest round trip
# is how long the server was unavailable to its clients at once: for redis-server the fork, for
# damselfly the longest step of its walk. Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
N=1000000
ROUNDS=3
OUT=""
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --elements) N=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
if [ -z "${DFLY_BIN:-}" ]; then
  cargo build --release -q -p damselfly
fi
BIN=${DFLY_BIN:-${CARGO_TARGET_DIR:-target}/release/damselfly}
WORK=$(mktemp -d /tmp/bench-bigvalue.XXXXXX)
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$WORK"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The dataset as redis-cli --pipe input, made once.
python3 - "$N" > "$WORK/data.resp" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
B = 1000
for start in range(0, n, B):
    r = range(start, min(n, start + B))
    cmd(b"SADD", b"bigset", *[b"member:%d" % i for i in r])
    hargs = []
    for i in r:
        hargs += [b"field:%d" % i, b"value:%d" % i]
    cmd(b"HSET", b"bighash", *hargs)
    zargs = []
    for i in r:
        zargs += [b"%d" % i, b"member:%d" % i]
    cmd(b"ZADD", b"bigzset", *zargs)
    cmd(b"RPUSH", b"biglist", *[b"element:%d" % i for i in r])
for i in range(100000):
    cmd(b"SET", b"key:%d" % i, b"x" * 32)
EOF

# probe PORT OUTFILE: PING every 1 ms; BGSAVE at 0.5 s; until the save is over. Prints
# "max_ms p999_ms over10 save_s p50_ms p99_ms".
probe() {
  taskset -c "$LOAD_CPU" python3 - "$1" <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
def call(s, cmd):
    s.sendall(cmd)
    data = b""
    while True:
        data += s.recv(1 << 16)
        if data.startswith(b"$"):
            head, _, rest = data.partition(b"\r\n")
            if len(rest) >= int(head[1:]) + 2:
                return rest
        elif data.endswith(b"\r\n"):
            return data
ping, ctl = conn(), conn()
rtts, started, sent, saving, t_save = [], None, False, False, 0.0
t0 = time.monotonic()
while True:
    now = time.monotonic()
    if not sent and now - t0 >= 0.5:
        assert call(ctl, b"BGSAVE\r\n").startswith(b"+"), "BGSAVE refused"
        sent, started = True, now
    a = time.monotonic()
    call(ping, b"PING\r\n")
    rtt = time.monotonic() - a
    if sent:
        rtts.append(rtt)
        if len(rtts) % 20 == 0:
            info = call(ctl, b"INFO persistence\r\n")
            if b"rdb_bgsave_in_progress:0" in info:
                t_save = time.monotonic() - started
                break
    time.sleep(0.001)
rtts.sort()
pct = lambda q: rtts[min(len(rtts) - 1, int(len(rtts) * q))]
print("%.2f %.2f %d %.2f %.3f %.3f" % (rtts[-1] * 1e3, pct(0.999) * 1e3, sum(r > 0.010 for r in rtts), t_save,
                                       pct(0.50) * 1e3, pct(0.99) * 1e3))
EOF
}

wait_pong() {
  for _ in $(seq 1 600); do
    if [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; then return 0; fi
    sleep 0.05
  done
  echo "server on port $1 did not start" >&2; return 1
}

run_one() { # kind bin -> "max p999 over10 save_s p50 p99"
  local kind=$1 bin=$2 port dir pid
  port=$(free_port)
  dir="$WORK/dir-$kind"; rm -rf "$dir"; mkdir -p "$dir"
  if [ "$kind" = redis ]; then
    taskset -c "$SERVER_CPU" redis-server --port "$port" --save '' --appendonly no --dir "$dir" \
      --logfile "$dir/log" & pid=$!
  else
    taskset -c "$SERVER_CPU" "$bin" --port "$port" --proactor_threads=1 --dir "$dir" \
      > "$dir/log" 2>&1 & pid=$!
  fi
  wait_pong "$port"
  taskset -c "$LOAD_CPU" redis-cli -p "$port" --pipe < "$WORK/data.resp" > /dev/null
  local res
  res=$(probe "$port")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$res"
}

declare -A R
kinds=(damselfly redis)
[ -n "${DFLY_BASE_BIN:-}" ] && kinds=(base damselfly redis)
for round in $(seq 1 "$ROUNDS"); do
  for kind in "${kinds[@]}"; do
    bin=$BIN
    [ "$kind" = base ] && bin=$DFLY_BASE_BIN
    res=$(run_one "$kind" "$bin")
    echo "round $round $kind: max_ms p999_ms over10ms save_s p50_ms p99_ms = $res" >&2
    R[$kind]+="$res"$'\n'
  done
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
col() { printf '%s' "${R[$1]}" | awk -v c="$2" 'NF {print $c}' | median; }
{
  echo "| metric (median of $ROUNDS rounds) | $(printf '%s | ' "${kinds[@]}")"
  echo "|---|$(printf -- '---:|%.0s' "${kinds[@]}")"
  names=("longest PING round trip during BGSAVE (ms)" "99.9th percentile (ms)" "round trips over 10 ms" "BGSAVE duration (s)"
         "PING round trip p50 during BGSAVE (ms)" "PING round trip p99 during BGSAVE (ms)")
  # Rows in this order: longest, p50, p99, p99.9, over 10 ms, duration.
  for c in 1 5 6 2 3 4; do
    row="| ${names[$((c-1))]} |"
    for kind in "${kinds[@]}"; do row+=" $(col "$kind" "$c") |"; done
    echo "$row"
  done
  echo
  echo "Per round (max_ms p999_ms over10 save_s p50_ms p99_ms):"
  for kind in "${kinds[@]}"; do
    echo "- $kind: $(printf '%s' "${R[$kind]}" | awk 'NF {printf "%s[%s] ", sep, $0; sep=""}')"
  done
} | tee ${OUT:+"$OUT"}
