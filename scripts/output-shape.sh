#!/usr/bin/env bash
# output-shape.sh OUTDIR BINARY: what the benchmark writes, for checking that a change to it
# keeps every file, column, row key and report heading (see output-shape.py).
#
# Runs every `elastree repro <experiment>` at the smallest --scale it accepts (found by
# probing: a probe passes --out /dev/null/... and, if the flag exists, --repeat 0, so an
# accepted scale fails before measuring anything; a refused scale prints "--scale S makes N
# keys per key set; EXP needs at least M"), plus two `elastree bench` runs, writing into OUTDIR:
#
#   OUTDIR/repro/<experiment>/...      each experiment's report.md, raw rows, plots
#   OUTDIR/bench/default.{jsonl,csv}   bench with default indexes / key sets / workloads, small --n
#   OUTDIR/bench/dist.{jsonl,csv}      bench --index dist,dist-baseline on rand64 (local cluster)
#   OUTDIR/_snapshot/meta.txt          per command: the scale / n chosen and the exit code
#   OUTDIR/_snapshot/times.txt         per command: wall seconds (not part of the schema)
#   OUTDIR/_snapshot/logs/*.log        stdout+stderr of every command (not part of the schema)
#
# Then: python3 output-shape.py OUTDIR > OUTDIR.schema.txt
#
# Environment: SNAPSHOT_SEED (default 1), SNAPSHOT_BENCH_N (default 2000),
# SNAPSHOT_TIMEOUT (seconds per command, default 1800), SNAPSHOT_ONLY (space-separated
# experiment names to run instead of all; "bench" for the bench runs only), SNAPSHOT_DRY=1
# (only find and print each experiment's scale).
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 OUTDIR BINARY" >&2
    exit 2
fi
OUT=$1
BIN=$2
SEED=${SNAPSHOT_SEED:-1}
BENCH_N=${SNAPSHOT_BENCH_N:-2000}
TIMEOUT=${SNAPSHOT_TIMEOUT:-1800}
ONLY=${SNAPSHOT_ONLY:-}

if [ ! -x "$BIN" ]; then
    echo "$0: $BIN is not an executable" >&2
    exit 2
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
if [ -e "$OUT" ]; then
    # Only ever remove a directory an earlier snapshot made.
    if [ -f "$OUT/_snapshot/meta.txt" ]; then
        rm -rf -- "$OUT"
    elif [ -n "$(ls -A "$OUT")" ]; then
        echo "$0: $OUT exists and is not an earlier snapshot; remove it first" >&2
        exit 2
    fi
fi
mkdir -p "$OUT/_snapshot/logs" "$OUT/repro" "$OUT/bench"
OUT=$(cd "$OUT" && pwd)
META=$OUT/_snapshot/meta.txt
TIMES=$OUT/_snapshot/times.txt
: >"$META"
: >"$TIMES"
echo "binary: $BIN" >"$OUT/_snapshot/binary.txt"

wanted() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

# run NAME CMD...: runs CMD with a time limit, logs it, records its exit code and time.
run() {
    local name=$1
    shift
    local log=$OUT/_snapshot/logs/$name.log
    local t0 t1 rc
    echo "== $name: $*" >&2
    t0=$(date +%s.%N)
    {
        echo "\$ $*"
        timeout --kill-after=30 "$TIMEOUT" "$@"
    } >"$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    [ $rc -eq 124 ] && echo "$name: TIMED OUT after $TIMEOUT s" >&2
    printf '%s %.1f\n' "$name" "$(echo "$t1 - $t0" | bc)" >>"$TIMES"
    printf '%s exit=%s\n' "$name" "$rc" >>"$META"
    echo "   exit $rc, $(tail -1 "$TIMES" | cut -d' ' -f2) s" >&2
}

HELP=$("$BIN" repro --help 2>&1) || { echo "$0: $BIN repro --help failed" >&2; exit 1; }
# The experiments: the "- name: about" lines of the EXPERIMENT argument's possible values.
EXPERIMENTS=$(printf '%s\n' "$HELP" | awk '/^Options:/{exit} /Possible values:/{on=1; next} on && /^ +- [A-Za-z0-9_-]+:/{sub(/^ +- /,""); sub(/:.*/,""); print}')
if [ -z "$EXPERIMENTS" ]; then
    echo "$0: no experiments found in '$BIN repro --help'" >&2
    exit 1
fi
REPEAT_ARGS=()
if printf '%s\n' "$HELP" | grep -q -- '--repeat'; then REPEAT_ARGS=(--repeat 1); fi
echo "experiments: $(echo $EXPERIMENTS)" >&2

# min_scale EXP: prints "SCALE N" for the smallest scale EXP accepts (N = its keys per key set).
min_scale() {
    python3 - "$BIN" "$1" "${#REPEAT_ARGS[@]}" <<'PY'
import re, subprocess, sys
from decimal import Decimal, ROUND_CEILING
binary, exp, has_repeat = sys.argv[1], sys.argv[2], sys.argv[3] != "0"
REFUSED = re.compile(r"makes (\d+) keys per key set; .* needs at least (\d+)")
def probe(scale):
    """('refused', n, min_n) or ('accepted',); never measures anything."""
    argv = [binary, "repro", exp, "--scale", scale, "--seed", "1",
            "--out", "/dev/null/elastree-snapshot-probe"]
    if has_repeat:
        argv += ["--repeat", "0"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    err = p.stderr + p.stdout
    m = REFUSED.search(err)
    if m:
        return ("refused", int(m.group(1)), int(m.group(2)))
    if "must be at least 1" in err or "/dev/null/elastree-snapshot-probe" in err:
        return ("accepted",)
    sys.exit(f"min_scale {exp}: unexpected answer to a probe at --scale {scale} "
             f"(exit {p.returncode}): {err.strip()[:500]}")
def fmt(d):
    return format(d.normalize(), "f")
r = probe("0.000000000001")
if r[0] != "refused":
    sys.exit(f"min_scale {exp}: a tiny --scale was accepted; cannot find its minimum")
min_n = r[2]
# A refused and an accepted power of ten around the minimum.
lo, hi = Decimal("1e-12"), None
s = Decimal("1e-9")
while s <= Decimal("1e6"):
    if probe(fmt(s))[0] == "accepted":
        hi = s
        break
    lo = s
    s *= 10
if hi is None:
    sys.exit(f"min_scale {exp}: no scale up to 1e6 accepted")
# Bisect to the smallest accepted scale (keys = round(base_n * scale) reach min_n there).
lo, hi = float(lo), float(hi)
for _ in range(60):
    mid = (lo + hi) / 2
    if probe(repr(mid))[0] == "accepted":
        hi = mid
    else:
        lo = mid
base = (min_n - 0.5) / hi  # base_n, to about 1e-12
# The shortest decimal at or above hi that still makes min_n keys and is accepted.
for digits in range(1, 18):
    q = Decimal(repr(hi))
    exp10 = q.adjusted() - digits + 1
    c = q.quantize(Decimal(1).scaleb(exp10), rounding=ROUND_CEILING)
    if round(base * float(c)) == min_n and probe(fmt(c))[0] == "accepted":
        print(fmt(c), min_n)
        break
else:
    print(repr(hi), min_n)
PY
}

START=$(date +%s)
for exp in $EXPERIMENTS; do
    wanted "$exp" || continue
    found=$(min_scale "$exp") || { echo "$exp: could not find its minimum scale" >&2; printf 'repro-%s scale=? exit=probe-failed\n' "$exp" >>"$META"; continue; }
    read -r scale n <<<"$found"
    printf 'repro-%s scale=%s n=%s\n' "$exp" "$scale" "$n" >>"$META"
    if [ -n "${SNAPSHOT_DRY:-}" ]; then echo "$exp: --scale $scale ($n keys per key set)" >&2; continue; fi
    run "repro-$exp" "$BIN" repro "$exp" --scale "$scale" "${REPEAT_ARGS[@]}" --seed "$SEED" --out "$OUT/repro/$exp"
done

if wanted bench && [ -z "${SNAPSHOT_DRY:-}" ]; then
    printf 'bench-default n=%s\n' "$BENCH_N" >>"$META"
    run bench-default "$BIN" bench --n "$BENCH_N" --repeat 1 --seed "$SEED" \
        --json "$OUT/bench/default.jsonl" --csv "$OUT/bench/default.csv"
    printf 'bench-dist n=%s\n' "$BENCH_N" >>"$META"
    run bench-dist "$BIN" bench --index dist,dist-baseline --keys rand64 --n "$BENCH_N" --repeat 1 --seed "$SEED" \
        --json "$OUT/bench/dist.jsonl" --csv "$OUT/bench/dist.csv"
fi
END=$(date +%s)
printf 'total %s\n' "$((END - START))" >>"$TIMES"
echo "snapshot of $BIN in $OUT: $((END - START)) s (per command: $TIMES)" >&2
