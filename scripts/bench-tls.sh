#!/usr/bin/env bash
# TLS benchmark (issue 20): GET/SET at -P 1 and -P 30 over TLS (tls-port, client certificates
# required) and over the plain port, on damselfly and redis-server with the same certificates and
# settings, in ROUNDS interleaved rounds on the same pinned CPUs. Prints a markdown report of
# medians with the damselfly/redis ratio in each mode, and p50/p99 latency (ms, from
# redis-benchmark's --csv) per server and mode; the goal is a TLS ratio no worse than the plain
# one.
#
#   scripts/bench-tls.sh [--requests N] [--rounds R] [--out FILE]
#
# Certificates: a throwaway CA, server and client certificate (RSA 2048) made with openssl.
# Server on CPU 1 (--proactor_threads=1), load (redis-benchmark -c 50 -d 32 -r 100000, with
# --tls --cert --key --cacert in the TLS mode) on CPU 0. Not a test: numbers depend on the
# machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
bench_args "$@"
command -v openssl >/dev/null || { echo "openssl not found (apt-get install -y openssl)" >&2; exit 1; }
cargo build --release -q -p damselfly
BIN=$PWD/target/release/damselfly
NAMES=(damselfly redis)
MODES=(plain tls)

CERTS=$(mktemp -d)
trap 'rm -rf "$CERTS"' EXIT
(
  cd "$CERTS"
  printf '[s]\nsubjectAltName=IP:127.0.0.1\n[c]\nextendedKeyUsage=clientAuth\n' >ext.cnf
  openssl genrsa -out ca.key 2048 2>/dev/null
  openssl req -x509 -new -nodes -sha256 -key ca.key -days 2 -subj /CN=bench-ca -out ca.crt
  for n in server:s client:c; do
    f=${n%%:*}
    openssl genrsa -out "$f.key" 2048 2>/dev/null
    openssl req -new -key "$f.key" -subj "/CN=$f" -out "$f.csr"
    openssl x509 -req -sha256 -in "$f.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile ext.cnf -extensions "${n##*:}" -out "$f.crt" 2>/dev/null
  done
)
TLS_SERVER=(--tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key" --tls-ca-cert-file "$CERTS/ca.crt")
TLS_CLIENT=(--tls --cacert "$CERTS/ca.crt" --cert "$CERTS/client.crt" --key "$CERTS/client.key")

start_server() { # name port tls-port -> pid
  case "$1" in
    damselfly) taskset -c "$SERVER_CPU" "$BIN" --port "$2" --tls-port "$3" "${TLS_SERVER[@]}" --bind 127.0.0.1 --proactor_threads=1 --dir "$CERTS" >/dev/null 2>&1 & ;;
    redis) taskset -c "$SERVER_CPU" redis-server --port "$2" --tls-port "$3" "${TLS_SERVER[@]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$CERTS" >/dev/null 2>&1 & ;;
  esac
  echo $!
}

declare -A RPS P50 P99
for round in $(seq 1 "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "round $round/$ROUNDS: $name" >&2
    port=$(free_port); tport=$(free_port); pid=$(start_server "$name" "$port" "$tport"); wait_up "$port"
    # The TLS port really is TLS with client certificates: PING answers over it.
    pong=$(redis-cli -p "$tport" "${TLS_CLIENT[@]}" PING 2>&1 || true)
    [ "$pong" = PONG ] || { echo "$name: TLS port not answering: $pong" >&2; exit 1; }
    for mode in "${MODES[@]}"; do
      conn=(-p "$port")
      [ "$mode" = tls ] && conn=(-p "$tport" "${TLS_CLIENT[@]}")
      for P in 1 30; do
        for t in set get; do
          stats=$(taskset -c "$LOAD_CPU" redis-benchmark "${conn[@]}" -t $t -n "$N" -r 100000 -d 32 -c 50 -P "$P" --csv 2>/dev/null | csv_stats)
          keep_stats "$name,$mode,$t,$P" "$stats"
        done
      done
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done

{
  echo "### TLS vs plain TCP, redis-benchmark, one server thread (run $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Medians of $ROUNDS interleaved rounds. Server pinned to CPU $SERVER_CPU (damselfly \`--proactor_threads=1\`), load pinned to CPU $LOAD_CPU:"
  echo "\`redis-benchmark -t set,get -n $N -r 100000 -d 32 -c 50 -P {1,30}\` on the plain port and on the TLS port"
  echo "(\`--tls\` with a client certificate; RSA 2048 certificates; rustls vs OpenSSL $(openssl version | awk '{print $2}')). Machine: $(nproc) cores, $(uname -r)."
  echo
  report_two_modes "${MODES[@]}"
} | tee ${OUT:+"$OUT"}
