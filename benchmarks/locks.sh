#!/usr/bin/env bash
# locks.sh: what lock interposition costs (benchmarks/programs/lockbench.c).
#
#   1. ns added per uncontended pair of operations (spin lock, mutex, rwlock read and write
#      lock+unlock; semaphore post+wait; condvar signal+broadcast with no waiter): a loop of
#      PAIRS pairs in one thread (timed by the program itself, loop only), unprofiled vs
#      `blameprof run -q -F 200`; medians of N runs; the per-pair difference.
#   2. Slowdown at 200 Hz on programs doing millions of lock operations per second per
#      thread: 2 threads on their own locks (spin locks and mutexes, mostly uncontended), with
#      24 and 400 multiply-adds between operations; both the program's own lock rate (the
#      in-program slowdown) and whole-command wall time (which adds blameprof's start-up and
#      summary), unprofiled vs profiled; medians of N.
# Prints markdown tables on stdout; progress goes to stderr. Asserts nothing.
#
# Environment: N (5), PAIRS (50000000), OPS (20000000), THREADS (2), HZ (200),
#   WORK (scratch dir, default mktemp), BLAMEPROF (default target/release/blameprof),
#   SKIP_BUILD=1 to use an existing build.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-5}
PAIRS=${PAIRS:-50000000}
OPS=${OPS:-20000000}
THREADS=${THREADS:-2}
HZ=${HZ:-200}
WORK=${WORK:-$(mktemp -d /tmp/blameprof-locks.XXXXXX)}
BLAMEPROF=${BLAMEPROF:-$ROOT/target/release/blameprof}

NAME=locks.sh
# shellcheck source=benchmarks/common.sh
. "$ROOT/benchmarks/common.sh"
fmt() { awk -v x="$1" -v d="${2:-2}" 'BEGIN { printf "%.*f", d, x }'; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }
field() { # name, text -> value of name=value
    tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k { print $2 }'
}

build_and_check
PROG=$WORK/lockbench
gcc -O2 -g -pthread "$ROOT/benchmarks/programs/lockbench.c" -o "$PROG"

RT=$(dirname "$BLAMEPROF")/libblameprof_rt.so
if [[ -f $RT ]] && ! nm -D --defined-only "$RT" 2>/dev/null | grep -qw pthread_mutex_lock; then
    log "warning: $RT does not interpose pthread_mutex_lock: profiled runs measure sampling only"
fi

run() { # config, lockbench args... -> program stdout
    local cfg=$1 out=$WORK/prof
    shift
    rm -rf "$out"
    case $cfg in
        plain) "$PROG" "$@" ;;
        prof) "$BLAMEPROF" run -q -F "$HZ" -o "$out" -- "$PROG" "$@" 2>/dev/null ;;
    esac
    rm -rf "$out"
}

KINDS=${KINDS:-spin mutex rdlock wrlock sem signal}
declare -A PAIR_NS
for kind in $KINDS; do
    for cfg in plain prof; do PAIR_NS[$kind-$cfg]=""; done
done
log "uncontended pairs: $N rounds x {$KINDS} x {unprofiled, -F $HZ}, $PAIRS pairs each"
for ((i = 1; i <= N; i++)); do
    for kind in $KINDS; do
        for cfg in plain prof; do
            o=$(run "$cfg" pairs "$kind" "$PAIRS") || die "pairs $kind $cfg failed"
            v=$(field ns_per_pair "$o")
            [[ -n $v ]] || die "pairs $kind $cfg: no ns_per_pair in: $o"
            PAIR_NS[$kind-$cfg]+=" $v"
            log "round $i $kind $cfg $v ns/pair"
        done
    done
done

echo "## Uncontended pairs ($PAIRS pairs, one thread, median of $N, $(nproc) CPUs)"
echo
echo "| operations | unprofiled (ns/pair) | blameprof -F $HZ (ns/pair) | added (ns/pair) |"
echo "|---|---:|---:|---:|"
declare -A PAIR_NAME=(
    [spin]="pthread_spin_lock + unlock" [mutex]="pthread_mutex_lock + unlock"
    [rdlock]="pthread_rwlock_rdlock + unlock" [wrlock]="pthread_rwlock_wrlock + unlock"
    [sem]="sem_post + sem_wait (never blocks)" [signal]="pthread_cond_signal + broadcast (no waiter)"
)
for kind in $KINDS; do
    a=$(median ${PAIR_NS[$kind-plain]})
    b=$(median ${PAIR_NS[$kind-prof]})
    echo "| ${PAIR_NAME[$kind]} | $(fmt "$a") | $(fmt "$b") | $(sub "$b" "$a") |"
done
echo

# Two lock-heavy programs: WORK multiply-adds between lock operations sets the rate
# (24: tens of millions of pairs per second per thread, nothing but locking; 400: a few
# million, the issue's "millions of lock operations per second per thread").
for work in 24 400; do
    declare -A WALL=([plain]="" [prof]="") RATE=([plain]="" [prof]="")
    ops=$OPS
    [[ $work -gt 24 ]] && ops=$((OPS / 8))
    log "lock-heavy program (work $work): $N rounds x {unprofiled, -F $HZ}, $THREADS threads x $ops pairs"
    for ((i = 1; i <= N; i++)); do
        for cfg in plain prof; do
            t0=$(now_ns)
            o=$(run "$cfg" ops "$THREADS" "$ops" "$work") || die "ops $cfg failed"
            t1=$(now_ns)
            WALL[$cfg]+=" $((t1 - t0))"
            RATE[$cfg]+=" $(field ops_per_sec_per_thread "$o")"
            log "round $i $cfg $(fmt "$(((t1 - t0) / 1000000))" 0) ms"
        done
    done
    wp=$(median ${WALL[plain]})
    wq=$(median ${WALL[prof]})
    rp=$(median ${RATE[plain]})
    rq=$(median ${RATE[prof]})
    echo "## Lock-heavy program, $work multiply-adds between operations ($THREADS threads x $ops pairs, own locks, median of $N)"
    echo
    echo "| configuration | lock pairs per second per thread | in-program slowdown | wall time (s) | wall-time ratio |"
    echo "|---|---:|---:|---:|---:|"
    echo "| unprofiled | $(fmt "$rp" 0) | 1.000 | $(fmt "$(awk -v n="$wp" 'BEGIN { print n / 1e9 }')" 3) | 1.000 |"
    echo "| blameprof run -q -F $HZ | $(fmt "$rq" 0) | $(ratio "$rp" "$rq") | $(fmt "$(awk -v n="$wq" 'BEGIN { print n / 1e9 }')" 3) | $(ratio "$wq" "$wp") |"
    echo
done
log "scratch files are in $WORK"
