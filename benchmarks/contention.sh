#!/usr/bin/env bash
# contention.sh: what blameprof costs a heavily contended program (issue 22), paired runs.
#
#   1. Debian's `sysbench mutex` (a program nobody here wrote): --threads=4 --mutex-num=2
#      --mutex-locks=3000000 --mutex-loops=100, wall time unprofiled vs `blameprof run -q -F HZ`.
#   2. One mutex shared by 4 and 8 threads (benchmarks/workloads/scale_locks.c, 32M
#      lock/increment/unlock operations in all), wall time.
#   3. Contention fidelity (benchmarks/workloads/fidelity_trylock.c, 4 and 8 threads, a
#      failed trylock before each lock counted by the program): the contended fraction
#      unprofiled and profiled, and the wall-time ratio.
#   4. What moves that fraction besides the profiler (4 threads): the same workload
#      unprofiled with holds or gaps 7% shorter and longer (56 and 64, 140 and 160
#      multiply-adds), and with the runtime library preloaded but not profiling (no
#      `blameprof run`: its lock functions run, nothing is measured), beside the profiled
#      run; each as the median of the per-round ratios to the unprofiled default.
# Each configuration runs N rounds, unprofiled and profiled alternating; medians of the
# per-round ratios. Prints markdown on stdout; progress on stderr. Asserts nothing.
#
# Environment: N (5), NF (15: rounds of parts 3 and 4, whose unprofiled fraction moves by up
#   to 2x from run to run), HZ (200), WORK (scratch dir), BLAMEPROF (target/release/blameprof),
#   SKIP_BUILD=1 to use an existing build, ONLY (sysbench|scale|fidelity|sensitivity: one
#   part).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-5}
NF=${NF:-15}
HZ=${HZ:-200}
WORK=${WORK:-$(mktemp -d /tmp/blameprof-contention.XXXXXX)}
BLAMEPROF=${BLAMEPROF:-$ROOT/target/release/blameprof}
ONLY=${ONLY:-}

NAME=contention.sh
# shellcheck source=benchmarks/common.sh
. "$ROOT/benchmarks/common.sh"
fmt() { awk -v x="$1" -v d="${2:-3}" 'BEGIN { printf "%.*f", d, x }'; }

build_and_check
gcc -O2 -g -pthread "$ROOT/benchmarks/workloads/scale_locks.c" -o "$WORK/scale_locks"
gcc -O2 -g -pthread "$ROOT/benchmarks/workloads/fidelity_trylock.c" -o "$WORK/fidelity_trylock"

# timed CONFIG CMD... -> "seconds" on stdout (the command's stdout goes to $WORK/out)
timed() {
    local cfg=$1 t0 t1
    shift
    rm -rf "$WORK/prof"
    t0=$(now_ns)
    case $cfg in
        plain) "$@" >"$WORK/out" ;;
        prof) "$BLAMEPROF" run -q -F "$HZ" -o "$WORK/prof" -- "$@" >"$WORK/out" ;;
    esac
    t1=$(now_ns)
    awk -v n=$((t1 - t0)) 'BEGIN { printf "%.4f", n / 1e9 }'
}

# paired LABEL CMD...: N alternating rounds; prints a table row
paired() {
    local label=$1 i a b ratios="" plains="" profs=""
    shift
    for ((i = 1; i <= N; i++)); do
        a=$(timed plain "$@")
        b=$(timed prof "$@")
        plains+=" $a"
        profs+=" $b"
        ratios+=" $(ratio "$b" "$a")"
        log "$label round $i: $a s -> $b s"
    done
    echo "| $label | $(fmt "$(median $plains)") s | $(fmt "$(median $profs)") s | $(median $ratios) |"
}

if [[ -z $ONLY || $ONLY == sysbench ]]; then
    if command -v sysbench >/dev/null; then
        echo "## sysbench mutex (median of $N paired rounds)"
        echo
        echo "| program | unprofiled | blameprof -F $HZ | ratio |"
        echo "|---|---:|---:|---:|"
        paired "sysbench mutex --threads=4 --mutex-num=2 --mutex-locks=3000000 --mutex-loops=100" \
            sysbench mutex --threads=4 --mutex-num=2 --mutex-locks=3000000 --mutex-loops=100 run
        echo
    else
        log "sysbench not installed (apt-get install sysbench): section skipped"
        echo "sysbench: not installed, not measured"
        echo
    fi
fi

if [[ -z $ONLY || $ONLY == scale ]]; then
    echo "## One mutex, 32M lock/increment/unlock operations (scale_locks, median of $N paired rounds)"
    echo
    echo "| threads | unprofiled | blameprof -F $HZ | ratio |"
    echo "|---|---:|---:|---:|"
    for t in 2 4 8; do
        paired "$t" "$WORK/scale_locks" "$t" 1 1 32000000
    done
    echo
fi

if [[ -z $ONLY || $ONLY == fidelity ]]; then
    echo "## Contention fidelity (fidelity_trylock: one mutex, trylock then lock, holds of 60 multiply-adds, 150 between; median of $NF paired rounds)"
    echo
    echo "| threads | contended unprofiled | contended profiled | profiled / unprofiled | wall-time ratio |"
    echo "|---|---:|---:|---:|---:|"
    for t in 4 8; do
        per=$((8000000 / t))
        fp="" fq="" ratios=""
        for ((i = 1; i <= NF; i++)); do
            a=$(timed plain "$WORK/fidelity_trylock" "$t" "$per")
            ca=$(awk '/^fidelity:/ { print $3 }' "$WORK/out")
            b=$(timed prof "$WORK/fidelity_trylock" "$t" "$per")
            cb=$(awk '/^fidelity:/ { print $3 }' "$WORK/out")
            fp+=" $ca"
            fq+=" $cb"
            ratios+=" $(ratio "$b" "$a")"
            log "fidelity $t threads round $i: contended $ca -> $cb, $a s -> $b s"
        done
        mp=$(median $fp)
        mq=$(median $fq)
        echo "| $t | $(fmt "$mp" 4) | $(fmt "$mq" 4) | $(ratio "$mq" "$mp") | $(median $ratios) |"
    done
    echo
fi
if [[ -z $ONLY || $ONLY == sensitivity ]]; then
    echo "## What moves the contended fraction (fidelity_trylock, 4 threads; median of $NF rounds of per-round ratios to the unprofiled default, 60/150)"
    echo
    echo "| run | contended (median) | / unprofiled default |"
    echo "|---|---:|---:|"
    runtime=$(dirname "$BLAMEPROF")/libblameprof_rt.so
    [[ -f $runtime ]] || die "no runtime library at $runtime"
    labels=("unprofiled, hold 56" "unprofiled, hold 64" "unprofiled, gap 140" "unprofiled, gap 160"
        "runtime preloaded, not profiling" "blameprof run")
    base=""
    fr=("" "" "" "" "" "")
    rr=("" "" "" "" "" "")
    # fraction_of: the contended fraction the last run printed (exit if none)
    fraction_of() {
        local c
        c=$(awk '/^fidelity:/ { print $3 }' "$WORK/out")
        [[ -n $c ]] || die "fidelity_trylock printed no fraction"
        echo "$c"
    }
    for ((i = 1; i <= NF; i++)); do
        timed plain "$WORK/fidelity_trylock" 4 2000000 >/dev/null
        c0=$(fraction_of)
        base+=" $c0"
        # Each round starts at another configuration, so none is always first after the
        # default run.
        for j in 0 1 2 3 4 5; do
            k=$(((i + j) % 6))
            case $k in
                0) timed plain "$WORK/fidelity_trylock" 4 2000000 56 150 ;;
                1) timed plain "$WORK/fidelity_trylock" 4 2000000 64 150 ;;
                2) timed plain "$WORK/fidelity_trylock" 4 2000000 60 140 ;;
                3) timed plain "$WORK/fidelity_trylock" 4 2000000 60 160 ;;
                4) timed plain env LD_PRELOAD="$runtime" "$WORK/fidelity_trylock" 4 2000000 ;;
                5) timed prof "$WORK/fidelity_trylock" 4 2000000 ;;
            esac >/dev/null
            c=$(fraction_of)
            fr[k]+=" $c"
            rr[k]+=" $(ratio "$c" "$c0")"
        done
        log "sensitivity round $i: default $c0, last $c"
    done
    echo "| unprofiled, default (60/150) | $(fmt "$(median $base)" 4) | 1 |"
    for k in 0 1 2 3 4 5; do
        # shellcheck disable=SC2086
        echo "| ${labels[k]} | $(fmt "$(median ${fr[k]})" 4) | $(median ${rr[k]}) |"
    done
    echo
fi
log "scratch files are in $WORK"
