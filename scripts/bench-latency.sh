#!/usr/bin/env bash
# The benchmark of record (issue 43): latency as users measure it, with memtier-shaped traffic.
#
#   scripts/bench-latency.sh [--rounds R] [--duration S] [--tests "get set"] [--clients "1 10 50"]
#                            [--pipelines "1 10 30"] [--rates "100000 ... 0"] [--no-matrix]
#                            [--no-rates] [--baseline BIN] [--out FILE] [--img DIR]
#                            [--report-only]
#   MEMTIER=/path/to/memtier_benchmark VALKEY=/path/to/valkey-server scripts/bench-latency.sh
#
# 1. The matrix: GET and SET (32-byte values, 100k keys loaded first), -c 1/10/50 connections
#    on one load thread, pipeline 1/10/30; every server with one thread pinned to SERVER_CPU
#    (default 1), the load pinned to LOAD_CPU (default 0). Per cell: ops/s, p50, p99, p99.9,
#    server CPU ns per op (CPU time / commands processed), load-generator CPU.
# 2. Latency against throughput: GET, -c 10, pipeline 30, open-loop rate steps (memtier's
#    --rate-limiting, per connection; --rates are totals over the 10 connections, 0 =
#    unlimited) up to saturation; charts of p50 and p99 against the achieved ops/s.
# Servers: damselfly (BIN, default target/release/damselfly), --baseline BIN (an earlier
# damselfly build), redis-server, and valkey when VALKEY names its binary. Load generators:
# damselfly-bench (BENCH) always, memtier_benchmark when MEMTIER names its binary (the two are
# compared cell by cell: docs/benchmarks-toolkit.md). Rounds are interleaved: in each round every
# cell is measured once per server and tool, in turn; the report gives medians over rounds.
#
# memtier's ops/s is taken from its running average (the last progress line): its `Totals`
# row divides by a duration rounded to whole seconds, which at a few seconds per run moves the
# figure by up to ±50% (seen: 1.52M on the progress line, 1.30M in Totals of the same run).
#
# Output: markdown on stdout (and --out FILE), raw rows in target/bench-latency/raw.tsv, charts
# in --img (default target/bench-latency); --report-only writes the report and charts again
# from the last raw.tsv without measuring. Not a test: numbers depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
DURATION=3
TESTS="get set"
CLIENTS="1 10 50"
PIPELINES="1 10 30"
RATES="100000 300000 500000 700000 900000 1100000 1300000 1500000 0"
MATRIX=1
SWEEP=1
REPORT_ONLY=0
BASE=""
OUT=""
WORK=target/bench-latency
IMG=$WORK
KEYS=100000
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --tests) TESTS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --pipelines) PIPELINES=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --no-matrix) MATRIX=0; shift ;;
    --no-rates) SWEEP=0; shift ;;
    --report-only) REPORT_ONLY=1; shift ;;
    --baseline) BASE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --img) IMG=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "bench-latency: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
SERVER_CPU=${SERVER_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
BIN=${BIN:-target/release/damselfly}
BENCH=${BENCH:-target/release/damselfly-bench}
MEMTIER=${MEMTIER:-}
VALKEY=${VALKEY:-}
[ -x "$BIN" ] && [ -x "$BENCH" ] || cargo build --release -q -p damselfly -p damselfly-bench
command -v redis-server >/dev/null || { echo "bench-latency: redis-server not found (./scripts/deps.sh install)" >&2; exit 1; }
[ -z "$MEMTIER" ] || [ -x "$MEMTIER" ] || { echo "bench-latency: MEMTIER=$MEMTIER is not executable" >&2; exit 1; }
[ -z "$VALKEY" ] || [ -x "$VALKEY" ] || { echo "bench-latency: VALKEY=$VALKEY is not executable" >&2; exit 1; }
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "bench-latency: --baseline $BASE is not executable" >&2; exit 1; }

RAW=$WORK/raw.tsv
if [ "$REPORT_ONLY" = 1 ]; then
  [ -s "$RAW" ] || { echo "bench-latency: no $RAW to report on" >&2; exit 1; }
  mkdir -p "$IMG"
else
SERVERS=(damselfly)
[ -n "$BASE" ] && SERVERS+=(baseline)
SERVERS+=(redis)
[ -n "$VALKEY" ] && SERVERS+=(valkey)
TOOLS=(damselfly-bench)
[ -n "$MEMTIER" ] && TOOLS+=(memtier)

mkdir -p "$WORK" "$IMG"
RUN_DIR=$(mktemp -d "$WORK/dir.XXXXXX")
printf 'round\tkind\ttool\tserver\ttest\tclients\tpipeline\trate\tops\tp50\tp99\tp999\tsrv_ns_op\tload_cpu\n' > "$RAW"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done; echo "bench-latency: server on $1 did not start" >&2; return 1; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
commands() { redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '/^total_commands_processed:/{print $2}'; }
TCK=$(getconf CLK_TCK)

declare -A PORT PID
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$RUN_DIR"' EXIT
for s in "${SERVERS[@]}"; do
  port=$(free_port)
  case $s in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$port" --bind 127.0.0.1 --proactor_threads=1 --dir "$RUN_DIR" --save '' >/dev/null 2>&1 & ;;
    baseline) taskset -c "$SERVER_CPU" "$BASE" --port "$port" --bind 127.0.0.1 --proactor_threads=1 --dir "$RUN_DIR" --save '' >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$port" --bind 127.0.0.1 --dir "$RUN_DIR" --save '' --appendonly no >/dev/null 2>&1 & ;;
    valkey) taskset -c "$SERVER_CPU" "$VALKEY" --port "$port" --bind 127.0.0.1 --dir "$RUN_DIR" --save '' --appendonly no >/dev/null 2>&1 & ;;
  esac
  PID[$s]=$!; PIDS+=($!); PORT[$s]=$port
  wait_up "$port"
  # Every key the GETs ask for exists (hits), as in the issue's scenario.
  taskset -c "$LOAD_CPU" "$BENCH" -p "$port" -t 1 -c 1 --pipeline 100 --ratio 1:0 -d 32 --key-minimum 1 \
    --key-maximum "$KEYS" --key-pattern P:P -n allkeys --hide-histogram --hide-progress >/dev/null
done

# measure ROUND KIND TOOL SERVER TEST CLIENTS PIPELINE RATE: one run, one row of raw.tsv.
measure() {
  local round=$1 kind=$2 tool=$3 s=$4 t=$5 c=$6 p=$7 rate=$8
  local port=${PORT[$s]} pid=${PID[$s]} ratio rl=() out err c0 c1 n0 n1 w0 w1 ops line
  [ "$t" = get ] && ratio=0:1 || ratio=1:0
  # memtier's per-connection budget; the totals in --rates are over all connections.
  [ "$rate" -gt 0 ] && rl=(--rate-limiting=$(( (rate + c - 1) / c )))
  local args=(-s 127.0.0.1 -p "$port" -t 1 -c "$c" --pipeline="$p" --ratio=$ratio -d 32 --key-minimum=1
    --key-maximum="$KEYS" --test-time="$DURATION" --hide-histogram --distinct-client-seed "${rl[@]}")
  out=$RUN_DIR/out err=$RUN_DIR/err
  n0=$(commands "$port"); c0=$(cpu_ticks "$pid"); w0=$(date +%s%N)
  if [ "$tool" = memtier ]; then
    /usr/bin/time -f '%U %S' -o "$RUN_DIR/time" taskset -c "$LOAD_CPU" "$MEMTIER" "${args[@]}" >"$out" 2>"$err"
  else
    /usr/bin/time -f '%U %S' -o "$RUN_DIR/time" taskset -c "$LOAD_CPU" "$BENCH" "${args[@]}" >"$out" 2>"$err"
  fi
  w1=$(date +%s%N); c1=$(cpu_ticks "$pid"); n1=$(commands "$port")
  line=$(grep '^Totals' "$out") || { echo "bench-latency: $tool against $s printed no Totals row:" >&2; tail -5 "$err" >&2; exit 1; }
  if [ "$tool" = memtier ]; then
    ops=$(tr '\r' '\n' < "$err" | grep -o 'avg: *[0-9]*) ops/sec' | tail -1 | grep -o '[0-9]*')
  else
    ops=$(awk '{print $2}' <<<"$line")
  fi
  python3 - "$round" "$kind" "$tool" "$s" "$t" "$c" "$p" "$rate" "$ops" "$line" "$c0" "$c1" "$n0" "$n1" "$w0" "$w1" "$TCK" "$RUN_DIR/time" >> "$RAW" <<'PY'
import sys
(round_, kind, tool, s, t, c, p, rate, ops, line, c0, c1, n0, n1, w0, w1, tck, tfile) = sys.argv[1:]
f = line.split()
cmds = max(int(n1) - int(n0) - 1, 1)  # less the INFO that read the count
srv_ns = (int(c1) - int(c0)) / int(tck) * 1e9 / cmds
u, k = (float(x) for x in open(tfile).read().split()[-2:])
load = (u + k) / ((int(w1) - int(w0)) / 1e9) * 100
print("\t".join([round_, kind, tool, s, t, c, p, rate, f"{float(ops):.0f}", f[5], f[6], f[7], f"{srv_ns:.0f}", f"{load:.0f}"]))
PY
}

for round in $(seq 1 "$ROUNDS"); do
  if [ "$MATRIX" = 1 ]; then
    for t in $TESTS; do for c in $CLIENTS; do for p in $PIPELINES; do
      echo "round $round/$ROUNDS: $t -c $c --pipeline $p" >&2
      for s in "${SERVERS[@]}"; do for tool in "${TOOLS[@]}"; do
        measure "$round" matrix "$tool" "$s" "$t" "$c" "$p" 0
      done; done
    done; done; done
  fi
  if [ "$SWEEP" = 1 ]; then
    for rate in $RATES; do
      echo "round $round/$ROUNDS: rate ${rate} (GET -c 10 --pipeline 30)" >&2
      for s in "${SERVERS[@]}"; do for tool in "${TOOLS[@]}"; do
        measure "$round" rate "$tool" "$s" get 10 30 "$rate"
      done; done
    done
  fi
done

fi

python3 - "$RAW" "$IMG" "$BENCH" "$ROUNDS" "$DURATION" "$SERVER_CPU" "$LOAD_CPU" "$(nproc)" "$(uname -r)" "${BASE:-}" <<'PY' | tee ${OUT:+"$OUT"}
import csv, statistics, subprocess, sys, os, datetime
raw, img, bench, rounds, dur, scpu, lcpu, ncpu, kernel, base = sys.argv[1:]
rows = list(csv.DictReader(open(raw), delimiter="\t"))
rounds = max((int(r["round"]) for r in rows), default=0)
num = ("ops", "p50", "p99", "p999", "srv_ns_op", "load_cpu")
cells = {}
for r in rows:
    key = (r["kind"], r["tool"], r["server"], r["test"], int(r["clients"]), int(r["pipeline"]), int(r["rate"]))
    cells.setdefault(key, []).append({k: float(r[k]) for k in num})
def med(key, k):
    v = cells.get(key)
    return statistics.median(x[k] for x in v) if v else None
servers = list(dict.fromkeys(r["server"] for r in rows))
tools = list(dict.fromkeys(r["tool"] for r in rows))
names = {"damselfly": "damselfly", "baseline": "baseline", "redis": "redis-server", "valkey": "valkey"}
def fops(v): return "-" if v is None else f"{v/1e6:.2f}M" if v >= 1e6 else f"{v/1e3:.0f}k"
def fms(v): return "-" if v is None else f"{v:.3f}"
def ratio(a, b): return "-" if not a or not b else f"{a/b:.2f}"
print(f"### Latency matrix ({datetime.datetime.utcnow():%Y-%m-%d %H:%MZ})\n")
print(f"Medians of {rounds} interleaved rounds of {dur} s per cell; one server thread pinned to CPU {scpu}, "
      f"one load thread pinned to CPU {lcpu}; {ncpu} cores, Linux {kernel}. 32-byte values, 100k keys "
      f"(GETs hit). Latencies in ms; CPU = server CPU ns per command; load = load generator's CPU %."
      + (f" \"baseline\" is {base}." if base else "") + "\n")
matrix = sorted({k[3:6] for k in cells if k[0] == "matrix"}, key=lambda x: (x[0] != "get", x[1], x[2]))
for tool in tools:
    if not any(k[0] == "matrix" and k[1] == tool for k in cells):
        continue
    print(f"#### {tool}\n")
    head = "| test | -c | pipeline |"
    sep = "|---|---|---|"
    for s in servers:
        head += f" {names[s]} ops/s | p50 | p99 | p99.9 | CPU | load |"
        sep += "---|---|---|---|---|---|"
    if "redis" in servers:
        head += " damselfly/redis ops | damselfly/redis p50 | damselfly/redis p99 |"
        sep += "---|---|---|"
    print(head); print(sep)
    for (t, c, p) in matrix:
        line = f"| {t.upper()} | {c} | {p} |"
        for s in servers:
            k = ("matrix", tool, s, t, c, p, 0)
            line += (f" {fops(med(k,'ops'))} | {fms(med(k,'p50'))} | {fms(med(k,'p99'))} | {fms(med(k,'p999'))}"
                     f" | {med(k,'srv_ns_op') or 0:.0f} | {med(k,'load_cpu') or 0:.0f}% |")
        if "redis" in servers:
            d = ("matrix", tool, "damselfly", t, c, p, 0); r = ("matrix", tool, "redis", t, c, p, 0)
            line += f" {ratio(med(d,'ops'), med(r,'ops'))} | {ratio(med(d,'p50'), med(r,'p50'))} | {ratio(med(d,'p99'), med(r,'p99'))} |"
        print(line)
    print()
if "memtier" in tools and "damselfly-bench" in tools:
    print("#### damselfly-bench against memtier_benchmark (ratio of medians, same cell, same round)\n")
    head = "| test | -c | pipeline |" + "".join(f" {names[s]} ops | p50 |" for s in servers)
    print(head); print("|---|---|---|" + "---|---|" * len(servers))
    worst = []
    for (t, c, p) in matrix:
        line = f"| {t.upper()} | {c} | {p} |"
        for s in servers:
            b = ("matrix", "damselfly-bench", s, t, c, p, 0); m = ("matrix", "memtier", s, t, c, p, 0)
            ro, rp = ratio(med(b,'ops'), med(m,'ops')), ratio(med(b,'p50'), med(m,'p50'))
            line += f" {ro} | {rp} |"
            for x in (ro, rp):
                if x != "-": worst.append(abs(float(x) - 1))
        print(line)
    if worst:
        within = sum(1 for w in worst if w <= 0.10)
        print(f"\n{within} of {len(worst)} ratios within 10%; largest difference {max(worst)*100:.0f}%.\n")
    if "redis" in servers:
        print("What each tool says of damselfly against redis-server (damselfly/redis, ops and p50):\n")
        print("| test | -c | pipeline | damselfly-bench ops | memtier ops | damselfly-bench p50 | memtier p50 |")
        print("|---|---|---|---|---|---|---|")
        for (t, c, p) in matrix:
            cell = lambda tool, s, k: med(("matrix", tool, s, t, c, p, 0), k)
            print(f"| {t.upper()} | {c} | {p} | "
                  + " | ".join(ratio(cell(tool, "damselfly", k), cell(tool, "redis", k))
                               for k in ("ops", "p50") for tool in ("damselfly-bench", "memtier")) + " |")
        print()
sweep = sorted({k[6] for k in cells if k[0] == "rate"})
if sweep:
    print("#### Latency against throughput (GET, -c 10, pipeline 30, rate steps)\n")
    print("| offered ops/s |" + "".join(f" {names[s]} ({tool}) ops/s | p50 | p99 |" for tool in tools for s in servers))
    print("|---|" + "---|---|---|" * len(servers) * len(tools))
    for rate in sorted(sweep, key=lambda x: (x == 0, x)):
        line = f"| {'unlimited' if rate == 0 else fops(rate)} |"
        for tool in tools:
            for s in servers:
                k = ("rate", tool, s, "get", 10, 30, rate)
                line += f" {fops(med(k,'ops'))} | {fms(med(k,'p50'))} | {fms(med(k,'p99'))} |"
        print(line)
    print()
    for pct in ("p50", "p99"):
        tsv = os.path.join(img, f"latency-vs-throughput-{pct}.tsv")
        with open(tsv, "w") as f:
            for tool in tools:
                for s in servers:
                    for rate in sweep:
                        k = ("rate", tool, s, "get", 10, 30, rate)
                        if med(k, "ops") is not None:
                            f.write(f"{names[s]} ({tool})\t{med(k,'ops'):.0f}\t{med(k,pct):.4f}\n")
        png = tsv[:-4] + ".png"
        subprocess.run([bench, "chart", "--kind", "lines", "--title",
                        f"GET -c 10 --pipeline 30: {pct} latency against throughput",
                        "--x-desc", "ops/sec", "--y-desc", f"{pct} latency (ms)", "--input", tsv, "--out", png], check=True)
        print(f"![{pct} latency against throughput]({png})\n")
if matrix:
    tool = tools[-1] if "memtier" in tools else tools[0]
    for t in sorted({m[0] for m in matrix}, key=lambda x: x != "get"):
        tsv = os.path.join(img, f"latency-matrix-{t}.tsv")
        with open(tsv, "w") as f:
            for (tt, c, p) in matrix:
                if tt != t: continue
                for s in servers:
                    v = med(("matrix", tool, s, t, c, p, 0), "p50")
                    if v is not None:
                        f.write(f"c{c} P{p}\t{names[s]}\t{v:.4f}\n")
        png = tsv[:-4] + ".png"
        subprocess.run([bench, "chart", "--kind", "bars", "--title", f"{t.upper()}: p50 latency ({tool})",
                        "--y-desc", "p50 latency (ms)", "--input", tsv, "--out", png], check=True)
        print(f"![{t.upper()} p50 by connections and pipeline]({png})\n")
PY
