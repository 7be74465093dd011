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
