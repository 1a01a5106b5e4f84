/* patros_ratio: two locks with critical sections of the same length, one acquired three
 * times as often as the other (Patros, "Measuring Java Util Concurrent Parking Contention in
 * the IBM J9 VM", Listing 5.2, "Frequently-Acquired-Lock Bottleneck": S1 = S2 = 32 ms of
 * Thread.sleep, lock 1 chosen with probability 3/4). The frequently acquired lock is the
 * bottleneck.
 *
 * THREADS threads each make OPS acquisitions; of every four, three take lock A through
 * `hot_path` and one, at a random place among the four, takes lock B through `cold_path`
 * (Patros picks with probability 3/4; this keeps the 3:1 ratio exact, from a fixed
 * per-thread random sequence). Each holds its
 * lock for HOLD_NS (sleeping, as the Java listing does), then works outside the lock for a
 * random 0..2*GAP_NS (sleeping). Lock A is busy about 3/4 of the time, lock B about 1/4:
 * both are contended, A far more. The waiting on A is hot_path's doing (the only holder of
 * A), the waiting on B cold_path's.
 *
 * Usage: patros_ratio [scale=1.0]   (scale 1.0: 40 acquisitions per thread, about 1.5 s)
 *
 * Truth (obj_truth.h): every wait [lock called, returned] and hold [returned, unlock
 * called], CLOCK_MONOTONIC; blame.mutex of a function = the overlap of the waits on its lock
 * with its holds; idleness.mutex = its contended waits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_HOT, F_COLD, NFUNC };
static const char *const FNAME[NFUNC] = {"hot_path", "cold_path"};

#define THREADS 4
#define HOLD_NS 8000000ull
#define GAP_NS 24000000ull

static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER, lock_b = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t counter1, counter2;
static int ops;
static int nops[NFUNC];

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {
    }
}

NOINL void hot_path(tlog_t *l) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&lock_a);
    uint64_t h0 = now_ns();
    counter1++;
    sleep_ns(HOLD_NS);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&lock_a);
    ob_hold(l, F_HOT, 0, w0, h0, h1);
}

NOINL void cold_path(tlog_t *l) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&lock_b);
    uint64_t h0 = now_ns();
    counter2++;
    sleep_ns(HOLD_NS);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&lock_b);
    ob_hold(l, F_COLD, 1, w0, h0, h1);
}

static void *worker(void *arg) {
    tlog_t *l = arg;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(l->index + 1);
    int cold_slot = 0;
    for (int i = 0; i < ops; i++) {
        if (i % 4 == 0) { /* which of the next four acquisitions is cold_path's */
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            cold_slot = (int)((x >> 33) % 4);
        }
        if (i % 4 == cold_slot) {
            cold_path(l);
            __atomic_fetch_add(&nops[F_COLD], 1, __ATOMIC_RELAXED);
        } else {
            hot_path(l);
            __atomic_fetch_add(&nops[F_HOT], 1, __ATOMIC_RELAXED);
        }
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        sleep_ns((x >> 33) % (2 * GAP_NS));
    }
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "patros_ratio");
    ops = (int)(40 * scale + 0.5);
    if (ops < 1)
        ops = 1;
    uint64_t wall;
    tlog_t *logs = wl_run_logged(THREADS, worker, (size_t)ops + 10, &wall);
    if (!logs)
        return 2;

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, contended[NFUNC] = {0};
    if (ob_mutex_truth(logs, THREADS, 2, "patros_ratio", blame, idle, contended))
        return 2;
    printf("patros_ratio: %.2f s, %d threads, %d acquisitions each\n", wall / 1e9, THREADS, ops);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-9s holds=%d contended_waits=%llu waited=%.3f s blame=%.3f s\n", FNAME[f],
               nops[f], (unsigned long long)contended[f],
               idle[f] / 1e9, blame[f] / 1e9);
    wl_truth_pairs("mutex", FNAME, NFUNC, blame, idle);
    wl_truth_end("hot_path", "hot_path,cold_path", (uint64_t)THREADS * ops);
    return 0;
}
