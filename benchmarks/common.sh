# common.sh: helpers shared by the benchmark scripts (sourced, not run).
# The sourcing script sets NAME (its name, for log lines) before sourcing.

log() { echo "${NAME:-bench}: $*" >&2; }
die() { log "error: $*"; exit 1; }
now_ns() { date +%s%N; }

# median of the numbers given as arguments (general numeric sort: integers and decimals)
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan"; exit }
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# a / b with 3 decimals, or n/a
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }

# Builds blameprof unless SKIP_BUILD=1, checks that $BLAMEPROF and gcc are there, and makes
# $WORK. The sourcing script sets ROOT, BLAMEPROF and WORK first.
build_and_check() {
    if [[ ${SKIP_BUILD:-0} != 1 ]]; then
        log "building blameprof (release)"
        (cd "$ROOT" && cargo build --release --workspace >&2)
    fi
    [[ -x $BLAMEPROF ]] || die "no blameprof binary at $BLAMEPROF"
    command -v gcc >/dev/null || die "gcc is required"
    mkdir -p "$WORK"
}
