#!/usr/bin/env bash
# Snapshot benchmark (issue 13): BGSAVE under a full-speed write load, SAVE, start-up load.
# damselfly (--proactor_threads=1) and redis-server (--save '' --appendonly no) run one after the
# other in each of ROUNDS interleaved rounds, each in a fresh server process and a fresh --dir,
# server pinned to CPU $SERVER_CPU, load generator and sampler pinned to CPU $LOAD_CPU; prints a
# markdown report of per-metric medians with ratios measured in the same run.
#
#   scripts/bench-snapshot.sh [--keys N] [--rounds R] [--duration S] [--save-at S]
#                             [--collections-pct P] [--out FILE]
#   (KEYS=N works too; DFLY_BIN=path / DFLY_BENCH_BIN=path: other builds, no cargo build when
#    both are given)
#
# Per server and round:
# 1. Dataset, identical for both servers: N keys (default 5000000), P% (default 10) of them small
#    collections (equal shares of lists, hashes, sets, sorted sets of 10 elements each, created
#    with `redis-cli --pipe`), the rest strings from `DEBUG POPULATE <n> key 64`.
# 2. Write load: damselfly-bench, 1 thread, 50 connections, pipeline 1, SET of 64-byte values to
#    random keys of the populated strings (key:0 .. key:<n-1>: overwrites, the dataset does not
#    grow). Throughput is counted by the server (INFO total_commands_processed, minus the script's
#    own commands) over a window of S seconds (default 10) that starts 1 s after the load.
#    Run twice: without a save (baseline), then with BGSAVE sent --save-at seconds (default 1)
#    into the window; the window is extended to the end of the save if the save outlasts it.
#    During the save run the server's RSS (VmRSS; for redis plus its fork child's, found through
#    /proc/PID/task/*/children) is sampled every 20 ms, INFO persistence is polled every 20 ms
#    until rdb_bgsave_in_progress:0, and a probe connection sends SET key:0 every 10 ms to find
#    the longest write stall. The probes' round trips also give the write latency: p50 and p99
#    (ms) over the window without a save and during BGSAVE (the load generator is stopped by a
#    kill, so its own latencies are not read).
# 3. SAVE on the quiet server: wall time of the command, server CPU time (utime+stime from
#    /proc/PID/stat), file size.
# 4. Start-up load: the server is stopped and started again on the same --dir; reported are the
#    server's own "DB loaded from disk: X seconds" log line, the time from spawn to the first
#    +PONG (redis answers -LOADING until then; damselfly does not listen until loaded) and the
#    server's CPU time at that point.
# 3 and 4 (and the RSS figures) are durations, CPU times and sizes, not requests: no latency
# percentiles beside them.
# Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-5000000}
ROUNDS=3
DURATION=10
SAVE_AT=1
COLL_PCT=10
OUT=""
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) KEYS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --save-at) SAVE_AT=$2; shift 2 ;;
    --collections-pct) COLL_PCT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server redis-tools)" >&2; exit 1; }
if [ -z "${DFLY_BIN:-}" ] || [ -z "${DFLY_BENCH_BIN:-}" ]; then
  cargo build --release -q -p damselfly -p damselfly-bench
fi
BIN=${DFLY_BIN:-${CARGO_TARGET_DIR:-target}/release/damselfly}
LOADGEN=${DFLY_BENCH_BIN:-${CARGO_TARGET_DIR:-target}/release/damselfly-bench}
NAMES=(damselfly redis)
PER_TYPE=$(( KEYS * COLL_PCT / 100 / 4 ))
NSTR=$(( KEYS - 4 * PER_TYPE ))

TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; return 1; }
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }

start_server() { # name port dir log -> pid
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --bind 127.0.0.1 --proactor_threads=1 \
                 --enable-debug-command yes --dir "$3" --dbfilename dump.rdb >"$4" 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no \
             --enable-debug-command yes --dir "$3" --dbfilename dump.rdb >"$4" 2>&1 & ;;
  esac
  echo $!
}
stop_server() { # pid: SIGTERM (no save points: neither server saves), wait until it is gone
  kill "$1" 2>/dev/null || true
  for _ in $(seq 1 600); do [ -e "/proc/$1" ] || break; sleep 0.05; done
  SERVER_PID=""
}

# Collections payload (RESP for redis-cli --pipe), generated once: PER_TYPE keys per type.
python3 - "$TMP/collections.resp" "$PER_TYPE" <<'EOF'
import sys
path, n = sys.argv[1], int(sys.argv[2])
def enc(*a):
    out = [b"*%d\r\n" % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)
with open(path, "wb") as f:
    for k in range(n):
        r = range(10)
        f.write(enc("RPUSH", f"list:{k}", *[f"m:{i}" for i in r]))
        f.write(enc("HSET", f"hash:{k}", *[x for i in r for x in (f"f:{i}", f"v:{k}:{i}")]))
        f.write(enc("SADD", f"set:{k}", *[f"m:{k}:{i}" for i in r]))
        f.write(enc("ZADD", f"zset:{k}", *[x for i in r for x in (str(i), f"m:{i}")]))
EOF

# Measuring helper: prints "metric value" lines.
#   window PORT PID SECONDS SAVE_AT|-1 LOADGEN-ARGS...   write-load window, optionally with BGSAVE
#   timed PORT PID CMD...                                 wall and server CPU time of one command
#   pong PORT PID T0_NS                                   spawn (T0) -> first +PONG, CPU at that point
cat > "$TMP/snap.py" <<'EOF'
import os, socket, subprocess, sys, threading, time
TCK = os.sysconf("SC_CLK_TCK")

class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(1 << 16)
            if not d:
                raise ConnectionError("server closed the connection")
            self.buf += d
        i = self.buf.index(b"\r\n")
        line, self.buf = self.buf[:i], self.buf[i + 2:]
        return line
    def cmd(self, *a):
        a = [x if isinstance(x, bytes) else str(x).encode() for x in a]
        self.s.sendall(b"".join([b"*%d\r\n" % len(a)] + [b"$%d\r\n%s\r\n" % (len(x), x) for x in a]))
        line = self._line()
        if line[:1] != b"$":
            return line.decode()
        n = int(line[1:])
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(1 << 16)
        body, self.buf = self.buf[:n], self.buf[n + 2:]
        return body.decode()

def field(text, name):
    for l in text.split("\r\n"):
        if l.startswith(name + ":"):
            return l.split(":", 1)[1]
    raise KeyError(name)

def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for l in f:
                if l.startswith("VmRSS:"):
                    return int(l.split()[1])
    except OSError:
        pass
    return 0

def children(pid):
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/children") as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out

def cpu_s(pid):  # utime+stime of all threads, plus reaped children (redis's fork child)
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    v = s[s.rindex(")") + 2:].split()
    return sum(int(x) for x in v[11:15]) / TCK

def out(k, v):
    print(k, v)

def probe_pcts(prefix, lat):  # p50/p99 of probe round trips (s), in ms
    lat = sorted(lat)
    for name, q in (("p50", 0.50), ("p99", 0.99)):
        out(f"{prefix}_{name}_ms", round(1000 * lat[min(len(lat) - 1, int(len(lat) * q))], 3) if lat else 0)

def window(port, pid, seconds, save_at, loadgen):
    own = []  # send times of the script's own commands (subtracted from the server's count)
    info = Conn(port)
    def c(conn, *a):
        own.append(time.time())
        return conn.cmd(*a)
    def processed():
        return int(field(c(info, "INFO", "stats"), "total_commands_processed"))
    stop = threading.Event()
    samples, probes = [], []
    def sampler():
        while not stop.is_set():
            r = rss_kb(pid)
            samples.append((time.time(), r, r + sum(rss_kb(ch) for ch in children(pid))))
            time.sleep(0.02)
    def prober():
        p = Conn(port)
        v = "p" * 64
        while not stop.is_set():
            t = time.time()
            c(p, "SET", "key:0", v)
            probes.append((t, time.time() - t))
            time.sleep(0.01)
    load = subprocess.Popen(loadgen, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    threads = [threading.Thread(target=sampler, daemon=True), threading.Thread(target=prober, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    if load.poll() is not None:
        sys.exit(f"load generator exited early: {load.returncode}")
    ta, ca, cpua = time.time(), processed(), cpu_s(pid)
    tb = tc = None
    if save_at >= 0:
        time.sleep(max(0.0, ta + save_at - time.time()))
        before = rss_kb(pid) + sum(rss_kb(ch) for ch in children(pid))
        cb, tb = processed(), time.time()
        r = c(info, "BGSAVE")
        if not r.startswith("+"):
            sys.exit(f"BGSAVE: {r}")
        while True:
            r = c(info, "INFO", "persistence")
            if field(r, "rdb_bgsave_in_progress") == "0":
                break
            time.sleep(0.02)
        tc = time.time()
        cc = processed()
    time.sleep(max(0.0, ta + seconds - time.time()))
    te, ce, cpue = time.time(), processed(), cpu_s(pid)
    load.kill()
    load.wait()
    stop.set()
    for t in threads:
        t.join()
    mine = lambda t0, t1: sum(1 for t in own if t0 <= t <= t1)
    n = ce - ca - mine(ta, te)
    out("ops", round(n / (te - ta)))
    out("cpu_ns_op", round((cpue - cpua) * 1e9 / max(n, 1)))
    out("window_s", round(te - ta, 2))
    if tb is None:
        out("stall_ms", round(1000 * max((l for t, l in probes if ta <= t <= te), default=0), 1))
        probe_pcts("probe", [l for t, l in probes if ta <= t <= te])
        return
    p = Conn(port).cmd("INFO", "persistence")
    if field(p, "rdb_last_bgsave_status") != "ok":
        sys.exit("BGSAVE failed: rdb_last_bgsave_status=" + field(p, "rdb_last_bgsave_status"))
    during = [s for s in samples if tb <= s[0] <= tc + 0.02]
    out("rss_before_kb", before)
    out("peak_server_kb", max([s[1] for s in during] + [before]))
    out("peak_total_kb", max([s[2] for s in during] + [before]))
    out("cow_bytes", field(p, "rdb_last_cow_size"))
    out("bgsave_s", round(tc - tb, 3))
    out("ops_during", round((cc - cb - mine(tb, tc)) / (tc - tb)))
    out("stall_ms", round(1000 * max((l for t, l in probes if tb - 0.1 <= t <= tc), default=0), 1))
    probe_pcts("probe", [l for t, l in probes if tb - 0.1 <= t <= tc])

def timed(port, pid, args):
    conn = Conn(port)
    c0, t0 = cpu_s(pid), time.time()
    r = conn.cmd(*args)
    t1, c1 = time.time(), cpu_s(pid)
    if not r.startswith("+"):
        sys.exit(f"{args}: {r}")
    out("wall_s", round(t1 - t0, 3))
    out("cpu_s", round(c1 - c0, 3))

def pong(port, pid, t0_ns):
    deadline = time.time() + 1800
    while time.time() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            sys.exit("server exited during start-up")
        try:
            conn = Conn(port)
            while True:
                r = conn.cmd("PING")
                if r == "+PONG":
                    t = time.time_ns()
                    out("pong_s", round((t - t0_ns) / 1e9, 3))
                    out("cpu_s", round(cpu_s(pid), 3))
                    return
                time.sleep(0.005)  # -LOADING
        except (OSError, ConnectionError):
            time.sleep(0.005)
    sys.exit("no PONG")

cmd, port, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if cmd == "window":
    window(port, pid, float(sys.argv[4]), float(sys.argv[5]), sys.argv[6:])
elif cmd == "timed":
    timed(port, pid, sys.argv[4:])
elif cmd == "pong":
    pong(port, pid, int(sys.argv[4]))
EOF
helper() { taskset -c "$LOAD_CPU" python3 "$TMP/snap.py" "$@"; }

declare -A V
keep() { # name prefix < "metric value" lines: append to V[name,prefix+metric]
  local k v
  while read -r k v; do V[$1,$2$k]+="$v "; done
}
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    dir=$(mktemp -d "$TMP/$name.XXXXXX")
    port=$(free_port); pid=$(start_server "$name" "$port" "$dir" "$dir/server.log"); SERVER_PID=$pid; wait_up "$port"
    redis-cli -p "$port" debug populate "$NSTR" key 64 >/dev/null
    redis-cli -p "$port" --pipe < "$TMP/collections.resp" > "$dir/pipe.out" 2>&1
    grep -q 'errors: 0' "$dir/pipe.out" || { echo "$name: redis-cli --pipe: $(tail -1 "$dir/pipe.out")" >&2; exit 1; }
    n=$(redis-cli -p "$port" dbsize)
    [ "$n" = "$KEYS" ] || { echo "$name: DBSIZE $n, expected $KEYS" >&2; exit 1; }
    V[$name,rss_loaded_kb]+="$(rss_kb "$pid") "
    load=(taskset -c "$LOAD_CPU" "$LOADGEN" -p "$port" -t 1 -c 50 --pipeline 1 --test-time $((DURATION * 3 + 600))
          --ratio 1:0 -d 64 --key-prefix key: --key-minimum 0 --key-maximum $((NSTR - 1))
          --distinct-client-seed --hide-histogram --hide-progress)
    keep "$name" base_ < <(helper window "$port" "$pid" "$DURATION" -1 "${load[@]}")
    keep "$name" save_ < <(helper window "$port" "$pid" "$DURATION" "$SAVE_AT" "${load[@]}")
    rm -f "$dir/dump.rdb"
    keep "$name" SAVE_ < <(helper timed "$port" "$pid" SAVE)
    V[$name,file_bytes]+="$(stat -c %s "$dir/dump.rdb") "
    stop_server "$pid"
    port=$(free_port); t0=$(date +%s%N)
    pid=$(start_server "$name" "$port" "$dir" "$dir/restart.log"); SERVER_PID=$pid
    keep "$name" load_ < <(helper pong "$port" "$pid" "$t0")
    s=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$dir/restart.log" | tail -1 | awk '{print $5}')
    [ -n "$s" ] || { echo "$name: no 'DB loaded from disk' line in the log:" >&2; cat "$dir/restart.log" >&2; exit 1; }
    V[$name,load_log_s]+="$s "
    n=$(redis-cli -p "$port" dbsize)
    [ "$n" = "$KEYS" ] || { echo "$name: DBSIZE $n after reload, expected $KEYS" >&2; exit 1; }
    stop_server "$pid"
    rm -rf "$dir"
  done
done

med() { # name metric [divisor] [decimals]
  # shellcheck disable=SC2086
  python3 -c "import statistics,sys; v=statistics.median(float(x) for x in sys.argv[3:]) / float(sys.argv[1]); print(f'{v:.{int(sys.argv[2])}f}')" "${3:-1}" "${4:-0}" ${V[$1,$2]}
}
ratio() { python3 -c "a=float('$1' or 0); b=float('$2' or 0); print(f'{a/b:.2f}' if b else 'n/a')"; }
MB=1024 # kB -> MiB
row() { # label metric divisor decimals
  local d r
  d=$(med damselfly "$2" "$3" "$4"); r=$(med redis "$2" "$3" "$4")
  echo "| $1 | $d | $r | $(ratio "$d" "$r") |"
}
for name in "${NAMES[@]}"; do
  for i in $(seq 1 "$ROUNDS"); do
    read -r -a b <<< "${V[$name,save_rss_before_kb]}"; read -r -a p <<< "${V[$name,save_peak_total_kb]}"
    read -r -a o <<< "${V[$name,base_ops]}"; read -r -a s <<< "${V[$name,save_ops_during]}"
    read -r -a c <<< "${V[$name,save_cow_bytes]}"
    V[$name,cow_peak_kb]+="$(( b[i-1] + c[i-1] / 1024 )) "
    V[$name,cow_peak_ratio]+="$(python3 -c "print(round((${b[i-1]} + ${c[i-1]} / 1024) / ${b[i-1]}, 3))") "
    V[$name,peak_ratio]+="$(python3 -c "print(round(${p[i-1]}/${b[i-1]}, 3))") "
    V[$name,ops_ratio]+="$(python3 -c "print(round(${s[i-1]}/${o[i-1]}, 3))") "
  done
done
{
  echo "### Snapshots: BGSAVE under write load, SAVE, start-up load (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Medians of $ROUNDS interleaved rounds, a fresh server in a fresh \`--dir\` each time. Server pinned to CPU $SERVER_CPU"
  echo "(damselfly \`--proactor_threads=1\`; redis-server \`--save '' --appendonly no\`; redis's fork child and damselfly's"
  echo "rdb-writer thread inherit the pin, so the save shares the server's CPU), load and sampler pinned to CPU $LOAD_CPU."
  echo "Machine: $(nproc) cores, $(uname -r)."
  echo
  echo "Dataset: $KEYS keys = \`DEBUG POPULATE $NSTR key 64\` + $PER_TYPE each of lists (RPUSH), hashes (HSET), sets (SADD)"
  echo "and sorted sets (ZADD) of 10 elements, loaded with \`redis-cli --pipe\`. Write load: \`damselfly-bench -t 1 -c 50"
  echo "--pipeline 1 --ratio 1:0 -d 64 --key-prefix key: --key-minimum 0 --key-maximum $((NSTR - 1)) --distinct-client-seed\`"
  echo "(overwrites the populated strings). Write ops/s = the server's \`total_commands_processed\` growth (minus the"
  echo "script's own commands) over a ${DURATION} s window starting 1 s after the load; \"during BGSAVE\" counts only from"
  echo "BGSAVE (sent ${SAVE_AT} s into the window) until INFO says \`rdb_bgsave_in_progress:0\`. RSS sampled every 20 ms;"
  echo "redis \"server + child\" adds the fork child's VmRSS (shared pages counted twice: its real extra memory is"
  echo "\`rdb_last_cow_size\`). Longest write stall: slowest of the \`SET key:0\` probes sent every 10 ms; write"
  echo "latency p50/p99: the same probes' round trips (alongside the load, on their own connection)."
  echo
  echo "| metric | damselfly | redis-server | damselfly/redis |"
  echo "|---|---|---|---|"
  row "RSS after loading the dataset (MiB)" rss_loaded_kb $MB 0
  row "RSS just before BGSAVE (MiB)" save_rss_before_kb $MB 0
  row "peak RSS during BGSAVE, server process (MiB)" save_peak_server_kb $MB 0
  row "peak RSS during BGSAVE, server + fork child (MiB)" save_peak_total_kb $MB 0
  row "peak / before (server + child; criterion ≤ 1.1)" peak_ratio 1 2
  row "rdb_last_cow_size (MiB; damselfly: no fork)" save_cow_bytes 1048576 1
  row "RSS before + rdb_last_cow_size (MiB; the fork's real peak)" cow_peak_kb $MB 0
  row "(RSS before + rdb_last_cow_size) / RSS before" cow_peak_ratio 1 2
  row "write ops/s, no save" base_ops 1 0
  row "write ops/s during BGSAVE" save_ops_during 1 0
  row "during BGSAVE / no save (criterion ≥ 0.7)" ops_ratio 1 2
  row "write ops/s over the whole window with BGSAVE" save_ops 1 0
  row "BGSAVE duration under the write load (s)" save_bgsave_s 1 3
  row "longest write stall, no save (ms)" base_stall_ms 1 1
  row "longest write stall during BGSAVE (ms)" save_stall_ms 1 1
  row "write latency p50, no save (ms, SET probes)" base_probe_p50_ms 1 3
  row "write latency p99, no save (ms, SET probes)" base_probe_p99_ms 1 3
  row "write latency p50 during BGSAVE (ms, SET probes)" save_probe_p50_ms 1 3
  row "write latency p99 during BGSAVE (ms, SET probes)" save_probe_p99_ms 1 3
  row "server CPU per write, no save (ns)" base_cpu_ns_op 1 0
  row "server CPU per write, window with BGSAVE, incl. fork child (ns)" save_cpu_ns_op 1 0
  row "SAVE, quiet server: wall time (s)" SAVE_wall_s 1 3
  row "SAVE: server CPU time (s)" SAVE_cpu_s 1 3
  row "file size (MiB)" file_bytes 1048576 1
  row "start-up: \"DB loaded from disk\" (s, server's log)" load_log_s 1 3
  row "start-up: spawn to first PONG (s)" load_pong_s 1 3
  row "start-up: server CPU time at first PONG (s)" load_cpu_s 1 3
  echo
  echo "Per-round values (damselfly / redis):"
  echo
  for m in save_peak_total_kb peak_ratio save_cow_bytes base_ops save_ops_during ops_ratio save_bgsave_s SAVE_wall_s load_log_s load_pong_s; do
    echo "- $m: ${V[damselfly,$m]% } / ${V[redis,$m]% }"
  done
  echo
  pr=$(med damselfly peak_ratio 1 2); orat=$(med damselfly ops_ratio 1 2)
  echo "Acceptance (damselfly, medians): peak RSS / before = $pr ($(python3 -c "print('meets' if $pr <= 1.1 else 'fails')") ≤ 1.1);"
  echo "write throughput during BGSAVE / without = $orat ($(python3 -c "print('meets' if $orat >= 0.7 else 'fails')") ≥ 0.7)."
} | tee ${OUT:+"$OUT"}
