#!/usr/bin/env bash
# under-load.sh: proves the test suite passes on a loaded machine (issue 38). Makes a fresh
# clone of this repository at REV (default HEAD) in a temporary directory, starts a CPU hog
# of HOG threads beside it (default 2: busy shell loops, killed on exit), runs `.ci/run`
# there RUNS times (default 3), and reports each run's tally and a verdict.
#
# usage: benchmarks/under-load.sh [-n RUNS] [-t HOG_THREADS] [-k] [REV]
#   -k  keep the clone (its path is printed); the logs are always kept
# Exit status 0 when every run passed (exit status 0 and no failed test), 1 otherwise.
set -euo pipefail
NAME=under-load
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benchmarks/common.sh
source "$ROOT/benchmarks/common.sh"

runs=3 hog_threads=2 keep=0
while getopts "n:t:kh" opt; do
    case $opt in
        n) runs=$OPTARG ;;
        t) hog_threads=$OPTARG ;;
        k) keep=1 ;;
        *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
rev=${1:-HEAD}
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number: $runs"
[[ $hog_threads =~ ^[0-9]+$ ]] || die "HOG_THREADS must be a number: $hog_threads"
commit=$(git -C "$ROOT" rev-parse --verify "$rev^{commit}") || die "no commit $rev"

work=$(mktemp -d "${TMPDIR:-/tmp}/blameprof-under-load.XXXXXX")
logs=$(mktemp -d "${TMPDIR:-/tmp}/blameprof-under-load-logs.XXXXXX")
hogs=()
cleanup() {
    for pid in "${hogs[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [[ $keep == 1 ]]; then
        log "clone kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "cloning $rev ($commit) into $work/repo"
git clone --quiet --no-checkout "$ROOT" "$work/repo"
git -C "$work/repo" checkout --quiet --detach "$commit"

for ((i = 0; i < hog_threads; i++)); do
    sh -c 'while :; do :; done' &
    hogs+=("$!")
done
log "CPU hog: $hog_threads busy threads (pids ${hogs[*]:-none}) on $(nproc) CPUs"

failures=0
tallies=()
for ((run = 1; run <= runs; run++)); do
    out="$logs/run-$run.log"
    log "run $run of $runs: .ci/run (log: $out)"
    start=$(now_ns)
    set +e
    (cd "$work/repo" && ./.ci/run) >"$out" 2>&1
    status=$?
    set -e
    secs=$(( ($(now_ns) - start) / 1000000000 ))
    tally=$(grep -E '^ci: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$out" | tail -n 1)
    tally=${tally:-"ci: no tally (see the log)"}
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    failed=$(sed -nE 's/^ci: [0-9]+ passed, ([0-9]+) failed.*/\1/p' <<<"$tally")
    if [[ $status -ne 0 || ${failed:-1} -ne 0 ]]; then
        failures=$((failures + 1))
        verdict=FAILED
        grep -E '^test .* \.\.\. FAILED$|^ci: skipped: ' "$out" | sed 's/^/    /' >&2 || true
    else
        verdict=passed
    fi
    tallies+=("run $run: ${tally#ci: } (exit status $status, ${secs} s, load $load): $verdict")
    log "${tallies[-1]}"
done

echo "under-load: $commit, $runs runs of .ci/run beside a $hog_threads-thread CPU hog on $(nproc) CPUs"
printf '  %s\n' "${tallies[@]}"
echo "  logs: $logs"
if [[ $failures -eq 0 ]]; then
    echo "under-load: PASS: all $runs runs passed"
else
    echo "under-load: FAIL: $failures of $runs runs failed"
    exit 1
fi
