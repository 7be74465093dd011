#!/usr/bin/env bash
# THE test command: everything CI checks, in one go.
#
#   ./scripts/test.sh
#
# Stages: deps → fmt → layers (import knots between top-level modules: scripts/check-layers.py,
# held at the counts reached so far until issue 45's limits of 3 hold) → clippy → build (release) → unit-file (dist/systemd/damselfly.service:
# systemd-analyze verify, and its ExecStart reaches READY=1: scripts/check-unit.sh) →
# test (cargo test --workspace) → redis-suite
# (Redis 7.0's Tcl suite against the release binary: external mode for the default units, compared
# with tests/redis-suite/expected-pass, and normal mode - runtest starts the servers - for the units
# with a list in tests/redis-suite/expected-pass-normal; see tests/redis-suite/NOTES.md) →
# redis-suite-tls (a set of those units again with runtest --tls) →
# libraries (real client libraries' Lua scripts, bee-queue and redlock, against the release
# binary and redis-server: tests/libraries/run.sh) → memcache-libs (pymemcache against
# --memcached_port and real memcached: tests/libraries/memcache/run.sh) → memccapable
# (libmemcached's ASCII conformance tests: tests/libraries/memcache/memccapable.sh).
# Every stage runs even when an earlier one failed (except that nothing runs when a dependency is
# missing and cannot be installed, and nothing needing the binary runs when the build fails); a summary with timings is printed and the exit status is non-zero when
# any stage failed.
#
# Environment:
#   SKIP=fmt,clippy      skip stages by name (deps fmt layers clippy build unit-file test redis-suite
#                        redis-suite-tls libraries memcache-libs memccapable)
#   PROPTEST_CASES=N     cases per property test (default 64, keeps the parser fuzz bounded)
#   TEST_PROFILE=release run `cargo test` in release mode with the test-only fault-injection
#                        feature (faster CI, but no debug assertions / overflow checks)
#   CARGO_TARGET_DIR     honoured everywhere (the Tcl suite uses $CARGO_TARGET_DIR/release/damselfly)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if ! command -v cargo >/dev/null && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null || { echo "test.sh: cargo not found (install Rust: https://rustup.rs)" >&2; exit 2; }

export PROPTEST_CASES="${PROPTEST_CASES:-64}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
SKIP=",${SKIP:-},"

declare -a NAMES=() RESULTS=() TIMES=()
FAILED=0

run_stage() { # name cmd...
    local name=$1; shift
    if [[ $SKIP == *",$name,"* ]]; then
        NAMES+=("$name"); RESULTS+=("skipped"); TIMES+=("-")
        return 0
    fi
    echo
    echo "==== [$name] $* ===="
    local t0 rc
    t0=$(date +%s)
    "$@"
    rc=$?
    local dt=$(( $(date +%s) - t0 ))
    NAMES+=("$name"); TIMES+=("${dt}s")
    if [[ $rc -eq 0 ]]; then
        RESULTS+=("ok")
    else
        RESULTS+=("FAILED (exit $rc)")
        FAILED=1
    fi
    return $rc
}

cargo_test() {
    if [[ ${TEST_PROFILE:-debug} == release ]]; then
        # Release test builds need the test-only FAULT.* commands explicitly (debug builds
        # always have them); the release binary `cargo build --release` makes never does.
        cargo test --workspace --no-fail-fast --release --features damselfly/fault-injection
    else
        cargo test --workspace --no-fail-fast
    fi
}

# The suite over TLS (runtest --tls: TLS ports, client certificates, TLS replication): these
# units in CI; `scripts/redis-suite.sh --mode normal --tls` runs every normal-mode unit
# (tests/redis-suite/NOTES.md has that run's result).
TLS_UNITS=(unit/tls unit/protocol unit/keyspace unit/type/incr unit/type/hash unit/pubsub
    unit/tracking unit/acl unit/info unit/limits unit/obuf-limits integration/replication-4)

# Expected-pass Tcl tests that did not pass, from both suite stages: printed last, since CI's
# output is often read from its tail only.
REDIS_SUITE_REGRESSED=$(mktemp)
export REDIS_SUITE_REGRESSED
trap 'rm -f "$REDIS_SUITE_REGRESSED"' EXIT

# Dependencies first, and nothing else when one is missing and cannot be installed: later stages
# would only fail on it (scripts/deps.sh: each probe proves the thing works).
if ! run_stage deps ./scripts/deps.sh install; then
    echo "RESULT: FAILED (a dependency is missing: the line above names it and how to install it)"
    exit 1
fi
run_stage fmt cargo fmt --all -- --check
# A ratchet: the largest cycle and the mutual pairs may shrink, never grow (issue 45 ends at 3/3).
run_stage layers python3 ./scripts/check-layers.py --max-cycle 3 --max-pairs 2
run_stage clippy cargo clippy --workspace --all-targets -- -D warnings
if run_stage build cargo build --release; then
    run_stage unit-file ./scripts/check-unit.sh
    run_stage test cargo_test
    run_stage redis-suite ./scripts/redis-suite.sh --mode both
    run_stage redis-suite-tls ./scripts/redis-suite.sh --mode normal --tls "${TLS_UNITS[@]}"
    run_stage libraries ./tests/libraries/run.sh
    run_stage memcache-libs ./tests/libraries/memcache/run.sh
    run_stage memccapable ./tests/libraries/memcache/memccapable.sh
else
    for s in unit-file test redis-suite redis-suite-tls libraries memcache-libs memccapable; do
        NAMES+=("$s"); RESULTS+=("not run (build failed)"); TIMES+=("-")
    done
fi

echo
echo "==== summary ===="
for i in "${!NAMES[@]}"; do
    printf '  %-12s %-28s %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}"
done
if [[ -s $REDIS_SUITE_REGRESSED ]]; then
    echo "expected-pass Tcl tests that did not pass:"
    sed 's/^/  /' "$REDIS_SUITE_REGRESSED"
fi
if [[ $FAILED -ne 0 ]]; then
    echo "RESULT: FAILED"
    exit 1
fi
echo "RESULT: all stages passed"
