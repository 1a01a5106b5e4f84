#!/usr/bin/env bash
# overhead.sh: what blameprof costs.
#
#   1. Wall-time overhead on a CPU-bound multithreaded program (tests/programs/split.c):
#      unprofiled vs `blameprof run -F 200`, `-F 1000` and `perf record -g` (when perf works),
#      runs interleaved, N times each; medians and ratios to the unprofiled median.
#      perf records at the same rates with the cpu-clock event (no hardware PMU is needed).
#   2. Report speed: records a profile of about SAMPLES samples (default 1,000,000) of
#      benchmarks/programs/manypaths.c (thousands of distinct call paths) at 10 kHz, and
#      times `blameprof report` (text, JSON) and `blameprof flamegraph` on it.
# Prints markdown tables on stdout; progress goes to stderr.
#
# Environment: N (5), THREADS (nproc), CPU_SECONDS per thread (2), SAMPLES (1000000),
#   WORK (scratch dir, default mktemp), BLAMEPROF (default target/release/blameprof),
#   SKIP_BUILD=1 to use an existing build.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-5}
THREADS=${THREADS:-$(nproc)}
CPU_SECONDS=${CPU_SECONDS:-2}
SAMPLES=${SAMPLES:-1000000}
WORK=${WORK:-$(mktemp -d /tmp/blameprof-bench.XXXXXX)}
BLAMEPROF=${BLAMEPROF:-$ROOT/target/release/blameprof}

NAME=overhead.sh
# shellcheck source=benchmarks/common.sh
. "$ROOT/benchmarks/common.sh"

# seconds with 3 decimals from nanoseconds
secs() { awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e9 }'; }

build_and_check
PROG=$WORK/split
gcc -O2 -g -pthread "$ROOT/tests/programs/split.c" -o "$PROG"

PERF_OK=0
if command -v perf >/dev/null && perf stat -e task-clock true >/dev/null 2>&1; then
    PERF_OK=1
else
    log "perf is not usable here; skipping the perf record column"
fi

CONFIGS=(plain bp200 bp1000 bp200s)
((PERF_OK)) && CONFIGS+=(perf200 perf1000)
declare -A LABEL=(
    [plain]="unprofiled"
    [bp200]="blameprof run -q -F 200 (sampling only)"
    [bp1000]="blameprof run -q -F 1000 (sampling only)"
    [bp200s]="blameprof run -F 200 (with the post-run summary)"
    [perf200]="perf record -e cpu-clock -F 200 -g"
    [perf1000]="perf record -e cpu-clock -F 1000 -g"
)
declare -A TIMES

run_config() { # config iteration -> prints elapsed ns
    local cfg=$1 i=$2 out=$WORK/run-$1-$2 t0 t1
    rm -rf "$out" "$out.data"
    t0=$(now_ns)
    case $cfg in
        plain) "$PROG" "$THREADS" "$CPU_SECONDS" >/dev/null ;;
        bp200) "$BLAMEPROF" run -q -F 200 -o "$out" -- "$PROG" "$THREADS" "$CPU_SECONDS" >/dev/null 2>&1 ;;
        bp1000) "$BLAMEPROF" run -q -F 1000 -o "$out" -- "$PROG" "$THREADS" "$CPU_SECONDS" >/dev/null 2>&1 ;;
        bp200s) "$BLAMEPROF" run -F 200 -o "$out" -- "$PROG" "$THREADS" "$CPU_SECONDS" >/dev/null 2>&1 ;;
        perf200) perf record -e cpu-clock -F 200 -g -q -o "$out.data" -- "$PROG" "$THREADS" "$CPU_SECONDS" >/dev/null 2>&1 ;;
        perf1000) perf record -e cpu-clock -F 1000 -g -q -o "$out.data" -- "$PROG" "$THREADS" "$CPU_SECONDS" >/dev/null 2>&1 ;;
    esac
    t1=$(now_ns)
    rm -rf "$out" "$out.data"
    echo $((t1 - t0))
}

log "overhead: $N rounds x ${#CONFIGS[@]} configs, $THREADS threads x ${CPU_SECONDS}s CPU each"
for ((i = 1; i <= N; i++)); do
    for cfg in "${CONFIGS[@]}"; do
        t=$(run_config "$cfg" "$i") || die "$cfg run $i failed"
        TIMES[$cfg]="${TIMES[$cfg]:-} $t"
        log "round $i $cfg $(secs "$t") s"
    done
done

BASE=$(median ${TIMES[plain]})
echo "## Overhead ($THREADS threads x ${CPU_SECONDS} s CPU, median of $N, $(nproc) CPUs)"
echo
echo "| configuration | median wall time (s) | ratio to unprofiled |"
echo "|---|---:|---:|"
for cfg in "${CONFIGS[@]}"; do
    m=$(median ${TIMES[$cfg]})
    echo "| ${LABEL[$cfg]} | $(secs "$m") | $(ratio "$m" "$BASE") |"
done
echo

# ---- report speed on a large profile ----
samples_of() { # profile dir -> sample count from the JSON report
    "$BLAMEPROF" report "$1" --view flat --format json |
        grep -o '"samples"[[:space:]]*:[[:space:]]*[0-9]*' | head -1 | grep -o '[0-9]*$'
}

BIG=$WORK/big
rm -rf "$BIG"
gcc -O2 -g -pthread "$ROOT/benchmarks/programs/manypaths.c" -o "$WORK/manypaths"
# 5% more CPU time than SAMPLES needs: start-up and the last partial period deliver a little less.
BIG_SECONDS=$(awk -v n="$SAMPLES" -v t="$THREADS" 'BEGIN { printf "%.1f", 1.05 * n / 10000 / t }')
log "recording the large profile: $THREADS threads x ${BIG_SECONDS} s CPU of manypaths at 10 kHz"
"$BLAMEPROF" run -F 10000 -o "$BIG" -- "$WORK/manypaths" "$THREADS" "$BIG_SECONDS" >/dev/null 2>&1 ||
    die "large profile run failed"
BIG_SAMPLES=$(samples_of "$BIG")

time_cmd() { # label, command... -> table row with median of 3 and max RSS
    local label=$1; shift
    local ts=() rss="n/a" t0 t1
    for _ in 1 2 3; do
        t0=$(now_ns)
        "$@" >/dev/null 2>&1 || die "$label failed"
        t1=$(now_ns)
        ts+=($((t1 - t0)))
    done
    if [[ -x /usr/bin/time ]] && /usr/bin/time -f '%M' -o "$WORK/rss" "$@" >/dev/null 2>&1; then
        local kib
        kib=$(tail -1 "$WORK/rss")
        [[ $kib =~ ^[0-9]+$ ]] && rss="$((kib / 1024)) MiB"
    fi
    echo "| $label | $(secs "$(median "${ts[@]}")") | $rss |"
}

echo "## Report speed (${BIG_SAMPLES:-?} samples in $(ls "$BIG" | wc -l) part files, $(du -sh "$BIG" | cut -f1))"
echo
echo "| command | median wall time (s), 3 runs | max RSS |"
echo "|---|---:|---:|"
time_cmd "report --view flat --format text" "$BLAMEPROF" report "$BIG" --view flat --format text
time_cmd "report --view top-down --format json" "$BLAMEPROF" report "$BIG" --view top-down --format json
time_cmd "report --view bottom-up --format text" "$BLAMEPROF" report "$BIG" --view bottom-up --format text
time_cmd "flamegraph --metric work" "$BLAMEPROF" flamegraph "$BIG" --metric work -o "$WORK/big.svg"
echo
log "scratch files are in $WORK"
