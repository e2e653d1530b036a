#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs):
#   formatting, lints, every workspace test, the loom model checks of the version lock, the
#   writer gate, the SB-tree's seal and the Bw-tree's compare-and-swap installs, the
#   single-threaded model tests and the unsafe node and epoch code under valgrind memcheck at
#   a small scale, and the concurrent stress tests under AddressSanitizer. Prints each step's
#   wall time at the end.
#
# Everything is compiled once, in the test profile (Cargo.toml): the memcheck step runs the
# binaries `cargo test` built, and the loom step rebuilds only the crates that link the
# library with its `loom` feature (ASan needs every crate instrumented: its own build).
# Memcheck, loom and ASan run beside the workspace tests, which
# spend much of their time waiting on the Redis processes of the distributed index's
# clusters (none of the tests depends on having the machine to itself).
set -euo pipefail
cd "$(dirname "$0")/.."

# A fresh clone (CI) gains nothing from incremental compilation's caches and pays for writing
# them (about 8 s of the test build here).
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi

started=$SECONDS
# One line per step: its seconds (or FAILED), a tab, its name.
times=$(mktemp)
beside_log=$(mktemp)
memcheck_log=$(mktemp)

# step NAME COMMAND...: runs COMMAND as one timed step and returns its status. (Callers may
# run it inside `&&` or `||`, where bash ignores `set -e`: every function a step runs checks
# its commands' status itself.)
step() {
  local name=$1
  shift
  printf '\n=== %s\n' "$name"
  local t0=$SECONDS status=0
  "$@" || status=$?
  if [ "$status" -eq 0 ]; then
    printf '%d\t%s\n' $((SECONDS - t0)) "$name" >>"$times"
  else
    printf 'FAILED\t%s\n' "$name" >>"$times"
  fi
  return "$status"
}

# The steps run beside the tests, while they run (stopped if the script is interrupted).
beside_pid=""

# kill_tree PID: stops PID and every process below it (the lanes' valgrind, cargo and tests).
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do
    kill_tree "$child"
  done
  kill -TERM "$1" 2>/dev/null || true
}

# The table of step times, also when a step fails (that step is marked).
report() {
  local status=$?
  if [ -n "$beside_pid" ] && kill -0 "$beside_pid" 2>/dev/null; then
    kill_tree "$beside_pid"
  fi
  printf '\n=== step times\n'
  printf '%-64s %8s\n' "step" "seconds"
  local seconds name
  while IFS=$'\t' read -r seconds name; do
    printf '%-64s %8s\n' "$name" "$seconds"
  done <"$times"
  printf '%-64s %8d\n' "total" $((SECONDS - started))
  rm -f "$times" "$beside_log" "$memcheck_log"
  exit "$status"
}
trap report EXIT
trap 'exit 130' INT TERM

# The memcheck run: the elastree library's unit tests (nodes, version lock, writer gate,
# epochs) and its single-threaded model tests, at 5% of their native size (the model tests'
# tiny nodes keep splits, merges and conversions frequent at that size; their structure
# checks stay at least 20 per run rather than scaling with it). valgrind runs one thread at a time; --fair-sched=yes hands the core over in turn when a thread yields, so a
# waiter cannot take it straight back from the lock holder. The multi-threaded stress tests
# run natively (several seeds, in the test step): under memcheck they only serialize.
MEMCHECK_TESTS=(lib model tree_shape hybrid elastic)
memcheck() {
  local binaries=()
  mapfile -t binaries < <(cargo test --workspace --no-run --quiet --message-format=json |
    python3 scripts/test-binaries.py elastree "${MEMCHECK_TESTS[@]}")
  [ "${#binaries[@]}" -eq "${#MEMCHECK_TESTS[@]}" ] ||
    { echo "memcheck: expected ${#MEMCHECK_TESTS[@]} test binaries, found ${#binaries[@]}" >&2; return 1; }
  local binary
  for binary in "${binaries[@]}"; do
    echo "--- valgrind ${binary#"$PWD"/}"
    ELASTREE_TEST_SCALE=0.05 ELASTREE_TEST_TIME_FACTOR=2 \
      valgrind --quiet --fair-sched=yes --error-exitcode=99 --leak-check=full \
      --show-leak-kinds=definite --errors-for-leak-kinds=definite \
      "$binary" --quiet || return
  done
}

loom() {
  cargo test --workspace --features elastree/loom --test loom_olc --test loom_sbtree \
    --test loom_bwtree
}

# The concurrent stress tests (one seed) under AddressSanitizer: memcheck runs one thread at
# a time, ASan lets the writers, scanners and epoch reclamation of the unsafe node code race
# on both cores at full size, at 5x the native time instead of 20-50x. rustc's ASan runtime
# ships with the stable toolchain; the flag that enables it is unstable, so RUSTC_BOOTSTRAP
# lets this one build use it (its own target directory: every crate is instrumented).
asan() {
  local host
  host=$(rustc -vV | sed -n 's/^host: //p')
  RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR=target/asan \
    ELASTREE_STRESS_SEEDS=1 \
    cargo test -p elastree --target "$host" --test stress
}

# The steps that run beside the workspace tests, in two lanes: memcheck (valgrind runs one
# thread at a time, so it leaves a core to the rest) and, one after the other, loom and ASan.
# Each lane's output is kept in a log of its own, printed once the tests are done.
memcheck_lane() {
  step "  beside: valgrind memcheck (model tests, nodes, epochs; 5% scale)" memcheck
}
loom_asan_lane() {
  local status=0
  step "  beside: loom model checks (version lock, writer gate, SB-tree seal, Bw-tree installs)" loom || status=1
  step "  beside: AddressSanitizer (stress tests, 1 seed)" asan || status=1
  return "$status"
}
beside() {
  local status=0 lane_pid
  memcheck_lane >"$memcheck_log" 2>&1 &
  lane_pid=$!
  loom_asan_lane || status=1
  wait "$lane_pid" || status=1
  printf '\n--- memcheck lane\n'
  cat "$memcheck_log"
  return "$status"
}

# The workspace tests, with `beside` running alongside; fails if either fails.
tests_and_beside() {
  beside >"$beside_log" 2>&1 &
  beside_pid=$!
  local tests=0 side=0
  # Two stress seeds here (the tests' default is three): ASan runs a third beside, and the
  # step stays within the machine's time.
  ELASTREE_STRESS_SEEDS=2 cargo test --workspace --no-fail-fast || tests=$?
  wait "$beside_pid" || side=$?
  printf '\n=== output of the steps run beside the tests\n'
  cat "$beside_log"
  if [ "$side" -ne 0 ]; then
    echo "a step run beside the tests failed (exit code $side)" >&2
  fi
  [ "$tests" -eq 0 ] && [ "$side" -eq 0 ]
}

step "system dependencies" scripts/install-deps.sh
step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy -D warnings" cargo clippy --workspace --all-targets --quiet -- -D warnings
# The library crates' documentation: no broken links, none to items a reader cannot see.
step "cargo doc -D warnings" env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet \
  -p elastree -p elastree-dist -p elastree-testkit -p elastree-bench
# And their private items' documentation: the links inside the crates resolve too.
step "cargo doc -D warnings (private items)" env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps \
  --quiet --document-private-items -p elastree -p elastree-dist -p elastree-testkit -p elastree-bench
step "build the tests (test profile)" cargo test --workspace --no-run --quiet
step "cargo test (workspace), memcheck, loom and ASan beside it" tests_and_beside

printf '\n=== all tests passed\n'
