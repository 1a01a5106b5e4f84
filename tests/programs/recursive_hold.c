/* recursive_hold: blame for a recursive mutex is the waiting during the whole hold, from
 * the outermost lock to the outermost unlock; an inner unlock releases nothing.
 *
 * One thread calls `outer_hold` in a loop: it locks a recursive mutex, computes 1 ms, calls
 * `inner_hold` (lock again, 1 ms, unlock: still held), computes 3 ms more and unlocks. WAITERS
 * threads call `short_hold` (10 us under the lock) in a loop, so they wait during every
 * outer hold.
 *
 * Usage: recursive_hold [seconds=1.5] [waiters=2]
 *
 * Ground truth as in lookup_insert.c: every (outermost) hold and every wait is logged with
 * CLOCK_MONOTONIC; blame of a holder function = sum over waits of the overlap with its holds.
 * Prints  truth blame_outer_ns=.. blame_short_ns=.. idle_short_ns=.. ...
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_OUTER, F_SHORT, NFUNC };

static pthread_mutex_t m;
static volatile uint64_t sink[1024];
static uint64_t deadline;

NOINL void inner_hold(void) {
    pthread_mutex_lock(&m); /* already ours: returns at once */
    busy_for(1000000ull, 3);
    pthread_mutex_unlock(&m); /* still held by the outer lock */
    sink[1]++;
}

NOINL void outer_hold(tlog_t *l) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&m);
    uint64_t h0 = now_ns();
    busy_for(1000000ull, 1);
    inner_hold();
    busy_for(3000000ull, 2);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&m);
    log_iv(l, F_OUTER, w0, h0, h1);
}

NOINL void short_hold(tlog_t *l) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&m);
    uint64_t h0 = now_ns();
    busy_for(10000ull, 4);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&m);
    log_iv(l, F_SHORT, w0, h0, h1);
}

static void *holder_thread(void *arg) {
    tlog_t *l = arg;
    while (now_ns() < deadline) {
        outer_hold(l);
        busy_for(500000ull, 5); /* let the waiters in */
    }
    return NULL;
}

static void *waiter_thread(void *arg) {
    tlog_t *l = arg;
    while (now_ns() < deadline) {
        short_hold(l);
        busy_for(50000ull, 6);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.5;
    int nwait = argc > 2 ? atoi(argv[2]) : 2;
    if (secs <= 0 || nwait < 1 || nwait > 60) {
        fprintf(stderr, "usage: recursive_hold [seconds] [waiters]\n");
        return 2;
    }
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&m, &a);
    pthread_mutexattr_destroy(&a);

    int nthreads = nwait + 1;
    size_t cap = (size_t)(secs * 40000) + 1000;
    tlog_t *logs = truth_alloc_logs(nthreads, cap);
    if (!logs)
        return 2;
    uint64_t t_start = now_ns();
    deadline = t_start + (uint64_t)(secs * 1e9);
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&th[i], NULL, i == 0 ? holder_thread : waiter_thread, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, count[NFUNC] = {0};
    if (truth_mutex_totals(logs, nthreads, "recursive_hold", blame, idle, held, count, NULL))
        return 2;
    printf("recursive_hold: %.2f s, 1 holder, %d waiters: outer holds=%llu blame=%.3f s; "
           "short holds=%llu blame=%.3f s waited=%.3f s\n",
           (now_ns() - t_start) / 1e9, nwait, (unsigned long long)count[F_OUTER],
           blame[F_OUTER] / 1e9, (unsigned long long)count[F_SHORT], blame[F_SHORT] / 1e9,
           idle[F_SHORT] / 1e9);
    printf("truth blame_outer_ns=%llu blame_short_ns=%llu idle_short_ns=%llu idle_outer_ns=%llu"
           " holds_outer=%llu\n",
           (unsigned long long)blame[F_OUTER], (unsigned long long)blame[F_SHORT],
           (unsigned long long)idle[F_SHORT], (unsigned long long)idle[F_OUTER],
           (unsigned long long)count[F_OUTER]);
    pthread_mutex_destroy(&m);
    return 0;
}
