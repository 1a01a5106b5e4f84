/* sampled_holders: one pthread mutex contended so often that blameprof measures only a
 * random subset of the contended acquisitions (tens a millisecond per thread, past the
 * runtime's budget of CONTENDED_MEASURED_PER_MS), and scales them. Blame must still land on
 * the right holder, in the right amounts.
 *
 * THREADS threads alternate short_hold (5 us) and long_hold (15 us), each a critical section
 * of busy work, with 2 us of work between: on a 2-CPU machine nearly every acquisition
 * waits.
 *
 * Usage: sampled_holders [seconds=1] [threads=4] [short_ns=5000 long_ns=15000 gap_ns=2000
 *                        [try]]
 *
 * With "try", each acquisition tries first (pthread_mutex_trylock, then pthread_mutex_lock
 * if that failed): many holds then begin without waiting while others wait, and past the
 * runtime's budget it notes only a random subset of their starts, scaled (hold sampling).
 *
 * Ground truth as in three_holders.c (wait_truth.h): every hold and wait is logged with
 * CLOCK_MONOTONIC; blame of a holder function = sum over all waits of overlap(wait, its
 * holds). Prints
 *   truth blame_short_hold_ns=.. blame_long_hold_ns=.. idle_ns=.. acquisitions=..
 *         wait_sq_<fn>_us2=.. hold_sq_<fn>_us2=.. idle_sq_us2=..
 * (the truth's spread, truth_log.h's truth_mutex_spread(): how far a sampled estimate of
 * it may fall from it; large when the machine preempted holders mid-hold).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wait_truth.h"

enum { F_SHORT, F_LONG, NFUNC };

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink[64];
static uint64_t deadline, short_ns = 5000, long_ns = 15000, gap_ns = 2000;
static int try_first;

static inline __attribute__((always_inline)) void critical(tlog_t *l, int fn, uint64_t ns) {
    uint64_t w0 = now_ns();
    if (!try_first || pthread_mutex_trylock(&m) != 0)
        pthread_mutex_lock(&m);
    uint64_t h0 = now_ns();
    busy_for(ns, (unsigned)fn + 1);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&m);
    log_iv(l, fn, w0, h0, h1);
}

NOINL void short_hold(tlog_t *l) { critical(l, F_SHORT, short_ns); }
NOINL void long_hold(tlog_t *l) { critical(l, F_LONG, long_ns); }

static void *worker(void *arg) {
    tlog_t *l = arg;
    for (unsigned i = (unsigned)l->index; now_ns() < deadline; i++) {
        if (i % 2)
            short_hold(l);
        else
            long_hold(l);
        busy_for(gap_ns, (unsigned)l->index);
        sink[l->index] += i; /* keeps the calls above out of tail position */
    }
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int nthreads = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 5) {
        short_ns = strtoull(argv[3], NULL, 10);
        long_ns = strtoull(argv[4], NULL, 10);
        gap_ns = strtoull(argv[5], NULL, 10);
    }
    try_first = argc > 6 && argv[6][0] == 't';
    if (secs <= 0 || nthreads < 2 || nthreads > 64 || short_ns < 1 || long_ns < 1) {
        fprintf(stderr,
                "usage: sampled_holders [seconds] [threads] [short_ns long_ns gap_ns [try]]\n");
        return 2;
    }
    size_t cap = (size_t)(secs * 200000) + 1000;
    tlog_t *logs = truth_alloc_logs(nthreads, cap);
    if (!logs)
        return 2;
    uint64_t t_start = now_ns();
    deadline = t_start + (uint64_t)(secs * 1e9);
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, worker, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, count[NFUNC] = {0};
    if (truth_mutex_totals(logs, nthreads, "sampled_holders", blame, idle, held, count, NULL))
        return 2;
    uint64_t wait_sq[NFUNC], hold_sq[NFUNC], idle_sq;
    if (truth_mutex_spread(logs, nthreads, NFUNC, wait_sq, hold_sq, &idle_sq))
        return 2;
    printf("sampled_holders: %.2f s, %d threads, %llu acquisitions\n",
           (now_ns() - t_start) / 1e9, nthreads,
           (unsigned long long)(count[F_SHORT] + count[F_LONG]));
    printf("truth blame_short_hold_ns=%llu blame_long_hold_ns=%llu idle_ns=%llu"
           " acquisitions=%llu wait_sq_short_hold_us2=%llu wait_sq_long_hold_us2=%llu"
           " hold_sq_short_hold_us2=%llu hold_sq_long_hold_us2=%llu idle_sq_us2=%llu\n",
           (unsigned long long)blame[F_SHORT], (unsigned long long)blame[F_LONG],
           (unsigned long long)(idle[F_SHORT] + idle[F_LONG]),
           (unsigned long long)(count[F_SHORT] + count[F_LONG]),
           (unsigned long long)wait_sq[F_SHORT], (unsigned long long)wait_sq[F_LONG],
           (unsigned long long)hold_sq[F_SHORT], (unsigned long long)hold_sq[F_LONG],
           (unsigned long long)idle_sq);
    return 0;
}
