#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs):
#   formatting, lints, every workspace test, the loom model checks of the version lock and
#   the writer gate, and the single-threaded model tests and the unsafe node and epoch code
#   under valgrind memcheck at a small scale. Prints each step's wall time at the end.
#
# Everything is compiled once, in the test profile (Cargo.toml): the memcheck step runs the
# binaries `cargo test` built, and the loom step rebuilds only the crates that link the
# library with its `loom` feature.
set -euo pipefail
cd "$(dirname "$0")/.."

# A fresh clone (CI) gains nothing from incremental compilation's caches and pays for writing
# them (about 8 s of the test build here).
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi

step_names=()
step_seconds=()
current=""
started=$SECONDS

# step NAME COMMAND...: runs COMMAND as one timed step.
step() {
  current=$1
  shift
  printf '\n=== %s\n' "$current"
  local t0=$SECONDS
  "$@"
  step_names+=("$current")
  step_seconds+=($((SECONDS - t0)))
  current=""
}

# The table of step times, also when a step fails (that step is marked).
report() {
  local status=$?
  printf '\n=== step times\n'
  printf '%-58s %8s\n' "step" "seconds"
  local i
  for i in "${!step_names[@]}"; do
    printf '%-58s %8d\n' "${step_names[$i]}" "${step_seconds[$i]}"
  done
  if [ -n "$current" ]; then
    printf '%-58s %8s\n' "$current" "FAILED"
  fi
  printf '%-58s %8d\n' "total" $((SECONDS - started))
  exit "$status"
}
trap report EXIT

# The memcheck run: the elastree library's unit tests (nodes, version lock, writer gate,
# epochs) and its single-threaded model tests, at 5% of their native size. valgrind runs one
# thread at a time; --fair-sched=yes hands the core over in turn when a thread yields, so a
# waiter cannot take it straight back from the lock holder. The multi-threaded stress tests
# run natively (several seeds, in the test step): under memcheck they only serialize.
MEMCHECK_TESTS=(lib model tree_shape hybrid elastic)
memcheck() {
  local binaries
  binaries=$(cargo test --workspace --no-run --message-format=json 2>/dev/null |
    python3 scripts/test-binaries.py elastree "${MEMCHECK_TESTS[@]}")
  [ -n "$binaries" ] || { echo "memcheck: no test binaries found" >&2; return 1; }
  local binary
  for binary in $binaries; do
    echo "--- valgrind ${binary#"$PWD"/}"
    ELASTREE_TEST_SCALE=0.05 ELASTREE_TEST_TIME_FACTOR=3 \
      valgrind --quiet --fair-sched=yes --error-exitcode=99 --leak-check=full \
      --show-leak-kinds=definite --errors-for-leak-kinds=definite \
      "$binary" --quiet
  done
}

step "system dependencies" scripts/install-deps.sh
step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy -D warnings" cargo clippy --workspace --all-targets --quiet -- -D warnings
step "build the tests (test profile)" cargo test --workspace --no-run --quiet
step "cargo test (workspace)" cargo test --workspace
step "loom model checks (version lock, writer gate)" \
  cargo test --workspace --features elastree/loom --test loom_olc
step "valgrind memcheck (model tests, nodes, epochs; 5% scale)" memcheck

printf '\n=== all tests passed\n'
