/* lockheavy: millions of uncontended lock operations per second per thread (SyncPerf's Q4
 * quadrant: "locks that are acquired excessively may cause significant performance
 * problems, even if they are barely contended"). Nothing ever waits: this workload measures
 * the profiler's cost on the uncontended fast paths, and that it invents no waiting.
 *
 * THREADS threads, each with its own pthread mutex and its own pthread spin lock (nobody
 * else touches them), each doing OPS iterations of `mutex_ops` (lock, a counter update,
 * unlock) and `spin_ops` (the same under the spin lock).
 *
 * Usage: lockheavy [scale=1.0]   (scale 1.0: 2 threads x 2 x 4M lock/unlock pairs with about
 * 150 ns of work between them: several million pairs per second per thread, about 1.5 s)
 *
 * Truth: no lock is ever shared, so every blame and idleness is 0; `truth ops` is the number
 * of lock/unlock pairs; there is no culprit.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

#define THREADS 2
/* Multiply-adds between two lock operations. */
#define WORK 128

typedef struct {
    pthread_mutex_t m;
    pthread_spinlock_t s;
    uint64_t a, b;
    char pad[64];
} own_t;

static own_t own[THREADS];
static long ops;

/* Work between lock operations, as in real code (about 150 ns): the "millions of
 * operations per second per thread", not a loop of nothing but locking (benchmarks/locks.sh
 * measures that extreme). */
static inline uint64_t between(uint64_t x) {
    for (int k = 0; k < WORK; k++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

NOINL void mutex_ops(own_t *o, long n) {
    uint64_t x = o->a;
    for (long i = 0; i < n; i++) {
        x = between(x);
        pthread_mutex_lock(&o->m);
        o->a += x;
        pthread_mutex_unlock(&o->m);
    }
}

NOINL void spin_ops(own_t *o, long n) {
    uint64_t x = o->b;
    for (long i = 0; i < n; i++) {
        x = between(x);
        pthread_spin_lock(&o->s);
        o->b += x;
        pthread_spin_unlock(&o->s);
    }
}

static void *worker(void *arg) {
    own_t *o = arg;
    for (long done = 0; done < ops; done += 1000) {
        mutex_ops(o, 1000);
        spin_ops(o, 1000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "lockheavy");
    ops = ((long)(4e6 * scale) + 999) / 1000 * 1000;
    if (ops < 1000)
        ops = 1000;
    for (int i = 0; i < THREADS; i++) {
        pthread_mutex_init(&own[i].m, NULL);
        pthread_spin_init(&own[i].s, PTHREAD_PROCESS_PRIVATE);
    }
    uint64_t wall;
    if (wl_run_threads(THREADS, worker, own, sizeof *own, &wall))
        return 2;
    uint64_t total = (uint64_t)ops * 2 * THREADS;
    int ok = 1;
    for (int i = 0; i < THREADS; i++)
        ok &= own[i].a == own[i].b;
    printf("lockheavy: %.2f s, %d threads, %llu lock/unlock pairs (%.1f M/s per thread)\n",
           wall / 1e9, THREADS, (unsigned long long)total,
           total / (double)THREADS / (wall / 1e9) / 1e6);
    truth_ns("blame.mutex", "mutex_ops", 0);
    truth_ns("idleness.mutex", "mutex_ops", 0);
    truth_ns("blame.spin", "spin_ops", 0);
    truth_ns("idleness.spin", "spin_ops", 0);
    wl_truth_end("none", "mutex_ops,spin_ops", total);
    return ok ? 0 : 1;
}
