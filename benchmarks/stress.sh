#!/usr/bin/env bash
# stress.sh: the long, on-demand version of the lock-protocol stress tests (issue 19).
#
#   1. The model checks and the randomized stress of the real code, in unit tests: the
#      exhaustive models (blameprof-locks, src/locks/model_check/; a few seconds), then
#      each stress part (blameprof-measure, src/measure/stress.rs) (spin locks with conversion and recycling, the wake path's
#      sequence lock) for SECS seconds (`BLAMEPROF_STRESS_SECS`; `cargo test` alone runs
#      them for 0.3 s).
#   2. tests/programs/counters_stress.c (the lock semantics test of tests/locks.rs, which
#      runs it with 100000 iterations) under `blameprof run -F HZ`, ROUNDS times with ITERS
#      iterations per thread and part: mutexes of every kind, spin locks, trylock loops,
#      timed locks, spin-lock conversion with destroy/init between phases, process-shared
#      locks.
# Unlike the other scripts here, this one is pass/fail: it exits non-zero on the first
# failure, with the failing output. Progress goes to stderr.
#
# Environment: SECS (600), ITERS (2000000), THREADS (4), ROUNDS (3), HZ (1000),
#   WORK (scratch dir, default mktemp), BLAMEPROF (default target/release/blameprof),
#   SKIP_BUILD=1 to use an existing build, SKIP_UNIT=1 / SKIP_PROGRAM=1 to run one half.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECS=${SECS:-600}
ITERS=${ITERS:-2000000}
THREADS=${THREADS:-4}
ROUNDS=${ROUNDS:-3}
HZ=${HZ:-1000}
WORK=${WORK:-$(mktemp -d /tmp/blameprof-stress.XXXXXX)}
BLAMEPROF=${BLAMEPROF:-$ROOT/target/release/blameprof}

NAME=stress.sh
# shellcheck source=benchmarks/common.sh
. "$ROOT/benchmarks/common.sh"

if [[ ${SKIP_UNIT:-0} != 1 ]]; then
    log "model checks, then each stress part for $SECS s"
    (cd "$ROOT" && BLAMEPROF_STRESS_SECS=$SECS cargo test --release -p blameprof-locks \
        model_check -- --nocapture --test-threads 1 &&
        BLAMEPROF_STRESS_SECS=$SECS cargo test --release -p blameprof-measure \
            stress -- --nocapture --test-threads 1) ||
        die "the model checks or the stress of the real code failed (output above)"
fi

if [[ ${SKIP_PROGRAM:-0} != 1 ]]; then
    build_and_check
    PROG=$WORK/counters_stress
    gcc -O2 -g -pthread "$ROOT/tests/programs/counters_stress.c" -o "$PROG"
    for round in $(seq 1 "$ROUNDS"); do
        log "counters_stress round $round/$ROUNDS: $THREADS threads x $ITERS, profiled at $HZ Hz"
        out=$WORK/run-$round.txt
        started=$(now_ns)
        if ! "$BLAMEPROF" run -q -F "$HZ" -o "$WORK/prof-$round" -- \
            "$PROG" "$THREADS" "$ITERS" >"$out" 2>&1; then
            cat "$out" >&2
            die "counters_stress failed in round $round"
        fi
        if ! grep -q "counters_stress: ok" "$out" || grep -qE "FAIL|MISMATCH" "$out"; then
            cat "$out" >&2
            die "counters_stress reported a failure in round $round"
        fi
        log "round $round ok in $(( ($(now_ns) - started) / 1000000 )) ms"
        rm -rf "$WORK/prof-$round"
    done
fi
log "all stress runs passed"
