#!/usr/bin/env bash
# Build damselfly + damselfly-bench and run the side-by-side comparison.
# Writes docs/benchmarks-compare.md and docs/img/*.png (override with --out/--img).
#
#   scripts/bench/compare.sh                       # full run (~10 s per scenario)
#   scripts/bench/compare.sh --quick               # smoke test, seconds
#   scripts/bench/compare.sh --duration 3 --keys 200000 --scenarios write,read,read_p30
#
# Env: DAMSELFLY_BIN (server binary; default target/release/damselfly),
#      SKIP_BUILD=1 to use existing binaries.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --release -p damselfly-bench
  # The server is optional: the runner skips it with a message when absent.
  cargo build --release -p damselfly || echo "note: damselfly server did not build; comparing peers only" >&2
fi
export DAMSELFLY_BIN=${DAMSELFLY_BIN:-$TARGET/release/damselfly}
exec "$TARGET/release/damselfly-bench" compare "$@"
