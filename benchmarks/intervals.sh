#!/usr/bin/env bash
# intervals.sh: what the timeline's per-lock interval counts cost the profiled program
# (format version 4: each sampled acquisition and each failed trylock checks its lock row's
# 100 ms interval, and the first count of a new interval writes the old one's record).
#
# A/B against the runtime built at BEFORE (a commit before the intervals; default f1b81d6),
# preloaded through BLAMEPROF_RUNTIME, in paired rounds (unprofiled, before, now), medians
# of N:
#   1. failed trylocks per second: tests/programs/trylock_spin.c (two threads spinning on
#      pthread_mutex_trylock while a third holds the lock 2 ms at a time): every failure
#      now reads the clock and compares the row's interval;
#   2. lock pairs per second per thread: benchmarks/programs/lockbench.c `ops` (2 threads on
#      their own mutexes, 400 multiply-adds between operations), whose sampled
#      acquisitions (one in about 256) now also check the interval;
#   3. the profile's size for each.
# Prints markdown tables on stdout; progress goes to stderr. Asserts nothing.
#
# Environment: N (5), BEFORE (f1b81d6), SECONDS_RUN (2), OPS (2500000), HZ (200),
#   WORK (scratch dir, default mktemp), BLAMEPROF (default target/release/blameprof),
#   SKIP_BUILD=1 to use an existing build (the BEFORE runtime is built once into WORK).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-5}
BEFORE=${BEFORE:-f1b81d6}
SECONDS_RUN=${SECONDS_RUN:-2}
OPS=${OPS:-2500000}
HZ=${HZ:-200}
WORK=${WORK:-$(mktemp -d /tmp/blameprof-intervals.XXXXXX)}
BLAMEPROF=${BLAMEPROF:-$ROOT/target/release/blameprof}

NAME=intervals.sh
# shellcheck source=benchmarks/common.sh
. "$ROOT/benchmarks/common.sh"
fmt() { awk -v x="$1" -v d="${2:-2}" 'BEGIN { printf "%.*f", d, x }'; }
field() { # name, text -> value of name=value
    tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k { print $2 }'
}

build_and_check
NOW_RT=$(dirname "$BLAMEPROF")/libblameprof_rt.so
[[ -f $NOW_RT ]] || die "no runtime library at $NOW_RT: build the workspace first"
BEFORE_RT=$WORK/before-target/release/libblameprof_rt.so
if [[ ! -f $BEFORE_RT ]]; then
    log "building the runtime at $BEFORE"
    rm -rf "$WORK/before"
    git -C "$ROOT" worktree add -q --detach "$WORK/before" "$BEFORE"
    (cd "$WORK/before" && CARGO_TARGET_DIR=$WORK/before-target cargo build --release -p blameprof-runtime >&2)
    git -C "$ROOT" worktree remove --force "$WORK/before"
fi
gcc -O2 -g -pthread "$ROOT/tests/programs/trylock_spin.c" -o "$WORK/trylock_spin"
gcc -O2 -g -pthread "$ROOT/benchmarks/programs/lockbench.c" -o "$WORK/lockbench"

run() { # config (plain|before|now), program, args... -> program stdout; profile size in $WORK/size
    local cfg=$1 out=$WORK/prof
    shift
    rm -rf "$out"
    echo 0 >"$WORK/size"
    case $cfg in
        plain) "$@" ;;
        before) BLAMEPROF_RUNTIME=$BEFORE_RT "$BLAMEPROF" run -q -F "$HZ" -o "$out" -- "$@" 2>/dev/null ;;
        now) BLAMEPROF_RUNTIME=$NOW_RT "$BLAMEPROF" run -q -F "$HZ" -o "$out" -- "$@" 2>/dev/null ;;
    esac
    [[ -d $out ]] && du -sb "$out" | awk '{ print $1 }' >"$WORK/size"
    rm -rf "$out"
}

declare -A TRY SIZE_TRY PAIRS SIZE_OPS
for cfg in plain before now; do TRY[$cfg]=""; SIZE_TRY[$cfg]=""; PAIRS[$cfg]=""; SIZE_OPS[$cfg]=""; done
log "$N rounds x {unprofiled, runtime at $BEFORE, runtime now}"
for ((i = 1; i <= N; i++)); do
    for cfg in plain before now; do
        o=$(run "$cfg" "$WORK/trylock_spin" "$SECONDS_RUN") || die "trylock_spin $cfg failed"
        failed=$(field try_failed "$o")
        span=$(($(field end_ns "$o") - $(field start_ns "$o")))
        TRY[$cfg]+=" $(awk -v f="$failed" -v s="$span" 'BEGIN { printf "%.0f", f / (s / 1e9) }')"
        SIZE_TRY[$cfg]+=" $(cat "$WORK/size")"
        o=$(run "$cfg" "$WORK/lockbench" ops 2 "$OPS" 400) || die "lockbench $cfg failed"
        PAIRS[$cfg]+=" $(field ops_per_sec_per_thread "$o")"
        SIZE_OPS[$cfg]+=" $(cat "$WORK/size")"
        log "round $i $cfg done"
    done
done

echo "## Interval counts: cost to the profiled program (median of $N, $(nproc) CPUs, -F $HZ)"
echo
echo "| configuration | failed trylocks per second | slowdown | profile (bytes) | lock pairs per second per thread | slowdown | profile (bytes) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for cfg in plain before now; do
    case $cfg in
        plain) label="unprofiled" ;;
        before) label="runtime at $BEFORE (no intervals)" ;;
        now) label="runtime now (intervals)" ;;
    esac
    t=$(median ${TRY[$cfg]})
    p=$(median ${PAIRS[$cfg]})
    echo "| $label | $(fmt "$t" 0) | $(ratio "$(median ${TRY[plain]})" "$t") | $(median ${SIZE_TRY[$cfg]}) | $(fmt "$p" 0) | $(ratio "$(median ${PAIRS[plain]})" "$p") | $(median ${SIZE_OPS[$cfg]}) |"
done
echo
