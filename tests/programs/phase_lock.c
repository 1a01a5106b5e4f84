/* phase_lock: one lock whose contention changes half-way through the run, for a per-lock
 * timeline with phases. THREADS workers share the global mutex `phase_lock`:
 *   - first half (until switch_ns, fixed before the threads start): each worker loops
 *     { `hot_phase_update`: lock phase_lock, compute HOT_HOLD_NS, unlock; compute HOT_GAP_NS
 *     outside }, so the lock is held nearly all the time and almost every acquisition waits;
 *   - second half (until end): each worker loops on its own work in `quiet_phase_work`:
 *     compute QUIET_WORK_NS outside any lock, then take phase_lock for QUIET_HOLD_NS, so the
 *     lock is taken about once per millisecond per thread and nearly never waited for.
 * A worker starts a first-half iteration only before switch_ns; one that started just before
 * it may end (and its wait may last) a few milliseconds after it.
 *
 * Usage: phase_lock [seconds=2]
 * Every acquisition first tries pthread_mutex_trylock; when that fails the acquisition is
 * contended and the pthread_mutex_lock call that follows is timed as its wait. Prints one line
 *   truth start_ns=.. switch_ns=.. end_ns=.. wait_first_ns=.. wait_second_ns=.. acq_first=..
 *         acq_second=.. threads=4
 * where start_ns, switch_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, the
 * switch of phases, the end of the work: all workers joined), wait_first_ns / wait_second_ns
 * the waits for phase_lock summed over threads in the first / second half's iterations, and
 * acq_first / acq_second the acquisitions of phase_lock in each half.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define THREADS 4
#define HOT_HOLD_NS 1000000ull
#define HOT_GAP_NS 100000ull
#define QUIET_WORK_NS 1000000ull
#define QUIET_HOLD_NS 1000ull

pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t switch_ns, deadline;

struct worker {
    unsigned index;
    uint64_t wait_ns[2], acq[2];
};

/* Takes phase_lock for phase `p` of worker `w`: a macro, so that the lock calls are made
 * from the named functions themselves. */
#define TAKE_PHASE_LOCK(w, p)                                                                 \
    do {                                                                                      \
        if (pthread_mutex_trylock(&phase_lock) != 0) {                                        \
            uint64_t w0 = now_ns();                                                           \
            pthread_mutex_lock(&phase_lock);                                                  \
            (w)->wait_ns[p] += now_ns() - w0;                                                 \
        }                                                                                     \
        (w)->acq[p]++;                                                                        \
    } while (0)

NOINL void hot_phase_update(struct worker *w) {
    TAKE_PHASE_LOCK(w, 0);
    busy_for(HOT_HOLD_NS, w->index);
    pthread_mutex_unlock(&phase_lock);
}

NOINL void quiet_phase_work(struct worker *w) {
    busy_for(QUIET_WORK_NS, w->index);
    TAKE_PHASE_LOCK(w, 1);
    busy_for(QUIET_HOLD_NS, w->index);
    pthread_mutex_unlock(&phase_lock);
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    while (now_ns() < switch_ns) {
        hot_phase_update(w);
        busy_for(HOT_GAP_NS, w->index);
    }
    while (now_ns() < deadline)
        quiet_phase_work(w);
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: phase_lock [seconds]\n");
        return 2;
    }
    static struct worker workers[THREADS];
    pthread_t t[THREADS];
    uint64_t start = now_ns();
    switch_ns = start + (uint64_t)(seconds * 5e8);
    deadline = start + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < THREADS; i++) {
        workers[i].index = (unsigned)i;
        if (pthread_create(&t[i], NULL, run_worker, &workers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t end = now_ns();
    uint64_t wait[2] = {0, 0}, acq[2] = {0, 0};
    for (int i = 0; i < THREADS; i++)
        for (int p = 0; p < 2; p++) {
            wait[p] += workers[i].wait_ns[p];
            acq[p] += workers[i].acq[p];
        }
    printf("truth start_ns=%llu switch_ns=%llu end_ns=%llu wait_first_ns=%llu wait_second_ns=%llu"
           " acq_first=%llu acq_second=%llu threads=%d\n",
           (unsigned long long)start, (unsigned long long)switch_ns, (unsigned long long)end,
           (unsigned long long)wait[0], (unsigned long long)wait[1], (unsigned long long)acq[0],
           (unsigned long long)acq[1], THREADS);
    return 0;
}
