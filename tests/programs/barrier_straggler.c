/* barrier_straggler: threads meet at a pthread barrier every round; one of them is always
 * late.
 *
 * `quick` threads spend QUICK_NS per round in `quick_step` (sleeping: on 2 CPUs, threads
 * woken by the barrier then find a free processor at once), one straggler computes slow_ms
 * in `slow_step`; each step ends with pthread_barrier_wait. The quick threads wait
 * at the barrier for the straggler every round: their idleness is at
 * `quick_step -> pthread_barrier_wait`, the blame belongs to the last thread to arrive, at
 * `slow_step -> pthread_barrier_wait`.
 *
 * Usage: barrier_straggler [rounds=200] [quick=2] [slow_ms=4]
 *
 * Ground truth (CLOCK_MONOTONIC): every pthread_barrier_wait call [called, returned] is a
 * wait; the last arrival of each round is the wake event, charged to the last arriver's
 * function (see wait_truth.h). Prints
 *   truth wait_quick_ns=<quick threads' barrier waiting> wait_slow_ns=<straggler's>
 *         blame_slow_step_ns=.. blame_quick_step_ns=.. late_rounds=<rounds the straggler
 *         arrived last> rounds=.. serial_ok=<1 if exactly one waiter per round got
 *         PTHREAD_BARRIER_SERIAL_THREAD> wall_ns=..
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_QUICK, F_SLOW, NFUNC };

#define QUICK_NS 300000ull

static pthread_barrier_t bar;
static int rounds = 200;
static uint64_t slow_ns = 4000000ull;
static uint64_t *arrive; /* [thread * rounds + round] */
static int *serial;      /* serial-thread returns per round */
static int nthreads;

/* One barrier wait of thread `l->index` in `round`, logged as a wait of `fn`. */
static inline __attribute__((always_inline)) void meet(tlog_t *l, int fn, int round) {
    uint64_t a = now_ns();
    arrive[l->index * rounds + round] = a;
    int r = pthread_barrier_wait(&bar);
    wt_wait(l, fn, a, now_ns());
    if (r == PTHREAD_BARRIER_SERIAL_THREAD)
        __atomic_fetch_add(&serial[round], 1, __ATOMIC_RELAXED);
    else if (r != 0)
        __atomic_fetch_add(&serial[round], 1000, __ATOMIC_RELAXED);
}

NOINL void quick_step(tlog_t *l, int round) {
    struct timespec ts = {0, (long)QUICK_NS};
    nanosleep(&ts, NULL);
    meet(l, F_QUICK, round);
}

NOINL void slow_step(tlog_t *l, int round) {
    busy_for(slow_ns, (unsigned)round);
    meet(l, F_SLOW, round);
}

static void *thread_main(void *arg) {
    tlog_t *l = arg;
    for (int r = 0; r < rounds; r++) {
        if (l->index == 0)
            slow_step(l, r);
        else
            quick_step(l, r);
        wt_sink[l->index] += (uint64_t)r; /* keeps the steps out of tail position */
    }
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 200;
    int nquick = argc > 2 ? atoi(argv[2]) : 2;
    double sms = argc > 3 ? atof(argv[3]) : 4.0;
    if (rounds < 1 || nquick < 1 || nquick > 15 || sms <= 0) {
        fprintf(stderr, "usage: barrier_straggler [rounds] [quick] [slow_ms]\n");
        return 2;
    }
    slow_ns = (uint64_t)(sms * 1e6);
    nthreads = nquick + 1;
    arrive = calloc((size_t)nthreads * (size_t)rounds, sizeof *arrive);
    serial = calloc((size_t)rounds, sizeof *serial);
    tlog_t *logs = truth_alloc_logs(nthreads, (size_t)rounds + 10);
    if (!arrive || !serial || !logs)
        return 2;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    uint64_t t0 = now_ns();
    pthread_t th[16];
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, thread_main, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    pthread_barrier_destroy(&bar);

    /* The wake event of each round: its last arrival, charged to the last arriver. */
    int late = 0, serial_ok = 1;
    for (int r = 0; r < rounds; r++) {
        int last = 0;
        for (int i = 1; i < nthreads; i++)
            if (arrive[i * rounds + r] > arrive[last * rounds + r])
                last = i;
        late += last == 0;
        wt_event(&logs[last], last == 0 ? F_SLOW : F_QUICK, arrive[last * rounds + r]);
        serial_ok &= serial[r] == 1;
    }
    if (truth_overflowed(logs, nthreads, "barrier_straggler"))
        return 2;
    uint64_t idle[NFUNC] = {0}, blame[NFUNC] = {0};
    wt_wait_totals(logs, nthreads, idle, NULL);
    uint64_t nobody = wt_event_blame(logs, nthreads, blame);
    printf("barrier_straggler: %.2f s, %d rounds, %d quick threads waited %.3f s, straggler"
           " late in %d rounds\n",
           wall / 1e9, rounds, nquick, idle[F_QUICK] / 1e9, late);
    printf("truth wait_quick_ns=%llu wait_slow_ns=%llu blame_slow_step_ns=%llu"
           " blame_quick_step_ns=%llu after_last_arrival_ns=%llu late_rounds=%d rounds=%d"
           " serial_ok=%d wall_ns=%llu\n",
           (unsigned long long)idle[F_QUICK], (unsigned long long)idle[F_SLOW],
           (unsigned long long)blame[F_SLOW], (unsigned long long)blame[F_QUICK],
           (unsigned long long)nobody, late, rounds, serial_ok, (unsigned long long)wall);
    return serial_ok ? 0 : 1;
}
