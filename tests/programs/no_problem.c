/* no_problem: a program without lock problems. THREADS workers, each with its own data and
 * its own private mutex, do the same fixed number of iterations of { `crunch`: CRUNCH_NS of
 * work on the thread's data; take the thread's private mutex for a tiny update }, the
 * iterations chosen so that the run lasts about `seconds`; main joins them at the end. No
 * lock is shared (none is ever contended), there are no condition variables, and the locks
 * are taken at most THREADS * 1e9 / CRUNCH_NS = 400 times a second in all.
 *
 * Usage: no_problem [seconds=2]
 * Prints one line
 *   truth start_ns=.. end_ns=.. acquisitions=.. work_ns=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, and its end: all
 * workers joined), acquisitions the acquisitions of the private mutexes summed over threads,
 * and work_ns the time spent in crunch summed over threads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define THREADS 4
#define CRUNCH_NS 10000000ull

struct worker {
    unsigned index;
    pthread_mutex_t lock;
    uint64_t data, acquisitions, work_ns;
};

static long iterations;

NOINL void crunch(struct worker *w) {
    uint64_t t0 = now_ns();
    busy_for(CRUNCH_NS, w->index);
    w->work_ns += now_ns() - t0;
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    for (long i = 0; i < iterations; i++) {
        crunch(w);
        pthread_mutex_lock(&w->lock);
        w->data += (uint64_t)i;
        w->acquisitions++;
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: no_problem [seconds]\n");
        return 2;
    }
    iterations = (long)(seconds * 1e9 / (double)CRUNCH_NS);
    if (iterations < 1)
        iterations = 1;
    static struct worker workers[THREADS];
    pthread_t t[THREADS];
    uint64_t start = now_ns();
    for (int i = 0; i < THREADS; i++) {
        workers[i].index = (unsigned)i;
        pthread_mutex_init(&workers[i].lock, NULL);
        if (pthread_create(&t[i], NULL, run_worker, &workers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t end = now_ns();
    uint64_t acquisitions = 0, work = 0;
    for (int i = 0; i < THREADS; i++) {
        acquisitions += workers[i].acquisitions;
        work += workers[i].work_ns;
    }
    printf("truth start_ns=%llu end_ns=%llu acquisitions=%llu work_ns=%llu\n",
           (unsigned long long)start, (unsigned long long)end, (unsigned long long)acquisitions,
           (unsigned long long)work);
    return 0;
}
