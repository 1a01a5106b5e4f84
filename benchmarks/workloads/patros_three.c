/* patros_three: three locks acquired equally often, with critical sections of 4, 16 and
 * 64 ms (Patros, "Measuring Java Util Concurrent Parking Contention in the IBM J9 VM",
 * Listing 5.1, "Large Critical Section Bottleneck": S1=4, S2=16, S3=64 ms of Thread.sleep
 * under each lock). The lock with the largest critical section is the bottleneck.
 *
 * Each lock has its own group of GROUP threads, each calling its function ITERS times:
 * `cs_4ms`, `cs_16ms`, `cs_64ms` lock their own mutex, sleep (as the Java listing does) for
 * their length, and unlock; then sleep GAP_NS outside the lock (Patros' localCounter++).
 * Every lock is acquired the same number of times (GROUP * ITERS). (In Patros' listing
 * each thread goes through all three locks in turn; with the threads queued on the 64 ms
 * lock the two others are then almost never contended. A group per lock keeps the same
 * acquisition counts and makes each lock's own contention measurable.)
 *
 * Each function is both the victim (it waits in pthread_mutex_lock for its own lock) and the
 * culprit (its unlock ends the other waiters' waits) for its lock.
 *
 * Usage: patros_three [scale=1.0]   (scale 1.0: 8 holds per thread, about 1.6 s)
 *
 * Truth (truth_log.h / obj_truth.h): every wait [lock called, returned] and hold
 * [returned, unlock called], CLOCK_MONOTONIC; blame.mutex of a function = the overlap of all
 * waits on its lock with its holds; idleness.mutex = its contended waits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_4, F_16, F_64, NFUNC };
static const char *const FNAME[NFUNC] = {"cs_4ms", "cs_16ms", "cs_64ms"};
static const uint64_t HOLD_NS[NFUNC] = {4000000ull, 16000000ull, 64000000ull};

#define GROUP 3
#define GAP_NS 100000ull

static pthread_mutex_t locks[NFUNC] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                       PTHREAD_MUTEX_INITIALIZER};
static volatile uint64_t counters[NFUNC];
static int iters;

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {
    }
}

static inline __attribute__((always_inline)) void critical(tlog_t *l, int fn) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&locks[fn]);
    uint64_t h0 = now_ns();
    counters[fn]++;
    sleep_ns(HOLD_NS[fn]);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&locks[fn]);
    ob_hold(l, fn, fn, w0, h0, h1);
}

NOINL void cs_4ms(tlog_t *l) { critical(l, F_4); }
NOINL void cs_16ms(tlog_t *l) { critical(l, F_16); }
NOINL void cs_64ms(tlog_t *l) { critical(l, F_64); }

static void *group_thread(void *arg) {
    tlog_t *l = arg;
    int fn = l->index / GROUP;
    for (int i = 0; i < iters; i++) {
        if (fn == F_4)
            cs_4ms(l);
        else if (fn == F_16)
            cs_16ms(l);
        else
            cs_64ms(l);
        sleep_ns(GAP_NS); /* Patros' localCounter++, and keeps the calls out of tail position */
    }
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "patros_three");
    iters = (int)(8 * scale + 0.5);
    if (iters < 1)
        iters = 1;
    int nthreads = NFUNC * GROUP;
    uint64_t wall;
    tlog_t *logs = wl_run_logged(nthreads, group_thread, (size_t)iters + 10, &wall);
    if (!logs)
        return 2;

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, contended[NFUNC] = {0};
    if (ob_mutex_truth(logs, nthreads, NFUNC, "patros_three", blame, idle, contended))
        return 2;
    printf("patros_three: %.2f s, %d threads per lock, %d holds per thread\n", wall / 1e9, GROUP,
           iters);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-8s holds=%d contended_waits=%llu waited=%.3f s blame=%.3f s\n", FNAME[f],
               GROUP * iters, (unsigned long long)contended[f], idle[f] / 1e9, blame[f] / 1e9);
    wl_truth_pairs("mutex", FNAME, NFUNC, blame, idle);
    wl_truth_end("cs_64ms", "cs_4ms,cs_16ms,cs_64ms", (uint64_t)NFUNC * GROUP * iters);
    return 0;
}
