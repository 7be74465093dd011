#!/usr/bin/env bash
# Checks the systemd unit dist/systemd/damselfly.service (the test command's unit-file stage):
#
#   scripts/check-unit.sh [BINARY]     BINARY: the damselfly to run (default: the release build,
#                                      $CARGO_TARGET_DIR/release/damselfly or target/release/...)
#
#   1. `systemd-analyze verify` on a copy that names BINARY wherever the unit names the installed
#      /usr/local/bin/damselfly (verify checks that ExecStart's program exists). verify reports
#      unknown keys and bad values as warnings and still exits 0, so any output fails the check.
#   2. What the unit promises: Type=notify, ExecStart with --supervised systemd --daemonize no,
#      the StateDirectory as --dir, LimitNOFILE=65535, a User.
#   3. Its ExecStart, run as systemd would run it (NOTIFY_SOCKET naming a datagram socket; BINARY,
#      a temporary --dir and a free loopback port in place of the installed paths), sends READY=1
#      once it accepts connections, and STOPPING=1 and a clean exit on SIGTERM.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UNIT="$ROOT/dist/systemd/damselfly.service"
INSTALLED=/usr/local/bin/damselfly
BIN=${1:-${CARGO_TARGET_DIR:-$ROOT/target}/release/damselfly}
fail() { echo "check-unit: FAILED: $*" >&2; exit 1; }

[[ -f $UNIT ]] || fail "$UNIT is missing"
[[ -x $BIN ]] || fail "no damselfly binary at $BIN (cargo build --release first, or pass its path)"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (apt-get install systemd; scripts/deps.sh)"
command -v python3 >/dev/null || fail "python3 not found (scripts/deps.sh)"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# 1. verify.
grep -q "^ExecStart=$INSTALLED " "$UNIT" || fail "ExecStart does not start $INSTALLED"
sed "s#$INSTALLED#$BIN#g" "$UNIT" > "$TMP/damselfly.service"
out=$(systemd-analyze verify --man=no "$TMP/damselfly.service" 2>&1)
rc=$?
if [[ $rc -ne 0 || -n $out ]]; then
    printf '%s\n' "$out" >&2
    fail "systemd-analyze verify (exit $rc) on $UNIT (ExecStart pointed at $BIN)"
fi
echo "check-unit: systemd-analyze verify: clean"

# 2. The unit's promises.
need() { # regex what
    grep -Eq "$1" "$UNIT" || fail "the unit lacks $2 ($1)"
}
need '^Type=notify$' "Type=notify"
need '^ExecStart=.* --supervised systemd( |$)' "--supervised systemd on ExecStart"
need '^ExecStart=.* --daemonize no( |$)' "--daemonize no on ExecStart"
need '^StateDirectory=damselfly$' "StateDirectory=damselfly"
need '^ExecStart=.* --dir /var/lib/damselfly( |$)' "the StateDirectory (/var/lib/damselfly) as --dir"
need '^LimitNOFILE=65535$' "LimitNOFILE=65535"
need '^User=[a-z]' "a User="
echo "check-unit: Type=notify, ExecStart, StateDirectory, LimitNOFILE, User: present"

# 3. Its ExecStart under a stand-in for systemd's notify socket.
exec_line=$(sed -n 's/^ExecStart=//p' "$UNIT")
state_dir=/var/lib/damselfly
mkdir -p "$TMP/state"
exec_line=${exec_line//"$INSTALLED"/"$BIN"}
exec_line=${exec_line//"$state_dir"/"$TMP/state"}
# shellcheck disable=SC2086
python3 - "$TMP" $exec_line <<'PY' || fail "the unit's ExecStart did not complete the notify hand-shake (above)"
import os, signal, socket, subprocess, sys, time

tmp, argv = sys.argv[1], sys.argv[2:]
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
path = os.path.join(tmp, "notify.sock")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
sock.settimeout(1)
env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "UPSTART_JOB")}
env["NOTIFY_SOCKET"] = path
log = open(os.path.join(tmp, "server.log"), "w+")
proc = subprocess.Popen(argv + ["--port", str(port), "--bind", "127.0.0.1", "--save", ""],
                        env=env, stdout=log, stderr=subprocess.STDOUT)

def fail(why):
    proc.kill()
    proc.wait()
    log.seek(0)
    sys.stderr.write(log.read()[-3000:])
    sys.exit("check-unit: " + why)

def until(want):
    seen, deadline = [], time.monotonic() + 60
    while True:
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail("no %r from the server (got %r)" % (want, seen))
            continue
        seen.append(msg)
        if msg.strip() == want:
            return seen

until("READY=1")
try:
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(b"PING\r\n")
    if not c.recv(64).startswith(b"+PONG"):
        fail("no PONG after READY=1")
    c.close()
except OSError as e:
    fail("connection refused after READY=1: %s" % e)
proc.send_signal(signal.SIGTERM)
until("STOPPING=1")
try:
    rc = proc.wait(timeout=60)
except subprocess.TimeoutExpired:
    fail("still running 60 s after SIGTERM")
if rc != 0:
    fail("exit status %d after SIGTERM" % rc)
print("check-unit: ExecStart: READY=1 once serving, STOPPING=1 and exit 0 on SIGTERM")
PY
echo "check-unit: ok"
