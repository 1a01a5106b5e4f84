#!/usr/bin/env bash
# fidelity.sh: does the program under blameprof contend as it does alone? (issue 38)
#
#   1. The grid: benchmarks/workloads/fidelity_trylock.c on one mutex and on one spin lock,
#      4 and 8 threads, holds of 30/60/120 and gaps of 100/150/300 multiply-adds (a failed
#      trylock before each lock is a contended acquisition, counted by the program). Per
#      point, the median contended fraction of R rounds in three configurations run in turn:
#      unprofiled, the runtime preloaded without profiling (its lock functions run, nothing is
#      measured: the lock code alone) and `blameprof run -q -F HZ`. Per point the ratios
#      profiled / unprofiled and preloaded / unprofiled; per lock and thread count their
#      geometric means, judged against [0.8, 1.25]. Beside them, the program's own
#      sensitivity, which no profiler can be better than: the unprofiled program with its
#      hold one multiply-add longer (about 1.3 ns, less than any interposed lock adds inside
#      a hold), its fraction over the unprofiled one, and the unprofiled rounds' spread
#      (lowest and highest of R). Where contention is low the fraction is set by whether
#      the running threads fall into step, and a nanosecond moves it by a factor of several.
#   3. With ONLY=paired: builds compared with each other in paired rounds, for telling a
#      change to the runtime from the runs' spread (a single grid run cannot, by less than a
#      factor of about 3: at low contention the program falls into a convoy or out of it,
#      run by run). BUILDS names the `blameprof` binaries (the first is the baseline);
#      each round runs every POINTS entry (hold/gap) unprofiled and under each build in
#      turn; per point the median of R rounds; per build the geometric mean over the
#      points of its median over the unprofiled one. Not part of the default run.
#   2. Debian's `sysbench mutex` (4 threads, 2 mutexes): wall time unprofiled vs profiled,
#      the median of N paired rounds' ratios, judged against [0.85, 1.15] (installed by
#      `apt-get install sysbench`; the section says so and is skipped when it is absent).
#
# Prints markdown on stdout, progress on stderr; asserts nothing (timing is never a test).
# Environment: R (3 rounds a grid point), N (5 sysbench rounds), HZ (200), OPS (acquisitions
#   per run, all threads: 1600000), WORK, BLAMEPROF, SKIP_BUILD=1, ONLY (grid|sysbench),
#   LOCKS (the grid's locks: "mutex spin"), THREADS (its thread counts: "4 8"); for
#   ONLY=paired, BUILDS (blameprof binaries; default: $BLAMEPROF) and POINTS ("30/150
#   60/150 60/300 120/300").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
R=${R:-3}
N=${N:-5}
HZ=${HZ:-200}
OPS=${OPS:-1600000}
WORK=${WORK:-$(mktemp -d /tmp/blameprof-fidelity.XXXXXX)}
BLAMEPROF=${BLAMEPROF:-$ROOT/target/release/blameprof}
RUNTIME=${RUNTIME:-$(dirname "$BLAMEPROF")/libblameprof_rt.so}
ONLY=${ONLY:-}
LOCKS=${LOCKS:-mutex spin}
THREADS=${THREADS:-4 8}

NAME=fidelity.sh
# shellcheck source=benchmarks/common.sh
. "$ROOT/benchmarks/common.sh"
fmt() { awk -v x="$1" -v d="${2:-3}" 'BEGIN { printf "%.*f", d, x }'; }
geomean() { printf '%s\n' "$@" | awk '$1 + 0 > 0 { s += log($1); n++ } END { if (n) printf "%.3f", exp(s / n); else print "n/a" }'; }
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { print (x >= lo && x <= hi) ? "met" : "**missed**" }'; }

build_and_check
[[ -f $RUNTIME ]] || die "no runtime library at $RUNTIME"
gcc -O2 -g -pthread "$ROOT/benchmarks/workloads/fidelity_trylock.c" -o "$WORK/fidelity_trylock"

# fraction CONFIG ARGS...: the contended fraction fidelity_trylock printed
fraction() {
    local cfg=$1
    shift
    rm -rf "$WORK/prof"
    case $cfg in
        plain) "$WORK/fidelity_trylock" "$@" >"$WORK/out" ;;
        preload) LD_PRELOAD=$RUNTIME "$WORK/fidelity_trylock" "$@" >"$WORK/out" ;;
        prof) "$BLAMEPROF" run -q -F "$HZ" -o "$WORK/prof" -- "$WORK/fidelity_trylock" "$@" >"$WORK/out" ;;
    esac
    awk '/^fidelity:/ { print $3 }' "$WORK/out"
}

if [[ -z $ONLY || $ONLY == grid ]]; then
    echo "## Contention fidelity grid (fidelity_trylock; medians of $R rounds a point; ratios to unprofiled)"
    echo
    summary=""
    for lock in $LOCKS; do
        for t in $THREADS; do
            echo "### $lock, $t threads"
            echo
            echo "| hold | gap | contended unprofiled (rounds' range) | hold + 1, unprofiled | preloaded | profiled | hold + 1 / unprofiled | preloaded / unprofiled | profiled / unprofiled |"
            echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            prof_ratios="" pre_ratios="" own_ratios=""
            for hold in 30 60 120; do
                for gap in 100 150 300; do
                    fa="" fb="" fc="" fd=""
                    for ((i = 1; i <= R; i++)); do
                        a=$(fraction plain "$t" $((OPS / t)) "$hold" "$gap" "$lock")
                        d=$(fraction plain "$t" $((OPS / t)) $((hold + 1)) "$gap" "$lock")
                        b=$(fraction preload "$t" $((OPS / t)) "$hold" "$gap" "$lock")
                        c=$(fraction prof "$t" $((OPS / t)) "$hold" "$gap" "$lock")
                        fa+=" $a" fb+=" $b" fc+=" $c" fd+=" $d"
                        log "$lock $t threads hold $hold gap $gap round $i: $a (hold + 1: $d) / $b / $c"
                    done
                    ma=$(median $fa) mb=$(median $fb) mc=$(median $fc) md=$(median $fd)
                    range="$(fmt "$(printf '%s\n' $fa | sort -g | head -1)" 4)-$(fmt "$(printf '%s\n' $fa | sort -g | tail -1)" 4)"
                    rb=$(ratio "$mb" "$ma") rc=$(ratio "$mc" "$ma") rd=$(ratio "$md" "$ma")
                    pre_ratios+=" $rb" prof_ratios+=" $rc" own_ratios+=" $rd"
                    echo "| $hold | $gap | $(fmt "$ma" 4) ($range) | $(fmt "$md" 4) | $(fmt "$mb" 4) | $(fmt "$mc" 4) | $rd | $rb | $rc |"
                done
            done
            gp=$(geomean $prof_ratios) gb=$(geomean $pre_ratios) gd=$(geomean $own_ratios)
            echo
            echo "Geometric mean: profiled / unprofiled **$gp** ($(within "$gp" 0.8 1.25) [0.8, 1.25]); preloaded / unprofiled $gb; the program's own, hold + 1 / unprofiled, $gd."
            echo
            summary+="| $lock | $t | $gd | $gb | $gp | $(within "$gp" 0.8 1.25) |"$'\n'
        done
    done
    echo "### Summary"
    echo
    echo "| lock | threads | hold + 1 / unprofiled | preloaded / unprofiled | profiled / unprofiled | within [0.8, 1.25] |"
    echo "|---|---:|---:|---:|---:|---|"
    printf '%s' "$summary"
    echo
fi

if [[ $ONLY == paired ]]; then
    read -r -a builds <<<"${BUILDS:-$BLAMEPROF}"
    points=${POINTS:-30/150 60/150 60/300 120/300}
    echo "## Builds in paired rounds (fidelity_trylock; medians of $R rounds a point; geometric means of profiled / unprofiled)"
    echo
    for lock in $LOCKS; do
        for t in $THREADS; do
            declare -A got=()
            for ((i = 1; i <= R; i++)); do
                for p in $points; do
                    got[$p/plain]+=" $(fraction plain "$t" $((OPS / t)) "${p%/*}" "${p#*/}" "$lock")"
                    for b in "${!builds[@]}"; do
                        got[$p/$b]+=" $(BLAMEPROF=${builds[$b]} fraction prof "$t" $((OPS / t)) "${p%/*}" "${p#*/}" "$lock")"
                    done
                done
                log "$lock $t threads: round $i of $R"
            done
            for b in "${!builds[@]}"; do
                ratios=""
                for p in $points; do
                    # shellcheck disable=SC2086
                    ratios+=" $(ratio "$(median ${got[$p/$b]})" "$(median ${got[$p/plain]})")"
                done
                echo "- $lock, $t threads, \`${builds[$b]}\`: **$(geomean $ratios)** (per point:$ratios)"
            done
            unset got
        done
    done
    echo
fi

if [[ -z $ONLY || $ONLY == sysbench ]]; then
    echo "## sysbench mutex, 4 threads, 2 mutexes (median of $N paired rounds)"
    echo
    if command -v sysbench >/dev/null; then
        args=(mutex --threads=4 --mutex-num=2 --mutex-locks=3000000 --mutex-loops=100 run)
        ratios=""
        for ((i = 1; i <= N; i++)); do
            t0=$(now_ns)
            sysbench "${args[@]}" >/dev/null
            t1=$(now_ns)
            rm -rf "$WORK/prof"
            "$BLAMEPROF" run -q -F "$HZ" -o "$WORK/prof" -- sysbench "${args[@]}" >/dev/null
            t2=$(now_ns)
            r=$(ratio $((t2 - t1)) $((t1 - t0)))
            ratios+=" $r"
            log "sysbench round $i: $(((t1 - t0) / 1000000)) ms -> $(((t2 - t1) / 1000000)) ms ($r)"
        done
        m=$(median $ratios)
        echo "Profiled / unprofiled wall time: **$m** ($(within "$m" 0.85 1.15) [0.85, 1.15])."
    else
        log "sysbench not installed (apt-get install sysbench): section skipped"
        echo "sysbench: not installed (apt-get install sysbench), not measured."
    fi
    echo
fi
