/* long_cs: few, long critical sections. THREADS workers share the global mutex
 * `config_lock` and loop { `reload_config`: lock config_lock, compute HOLD_NS, unlock;
 * `serve_requests`: compute GAP_NS outside any lock }. The lock is held nearly all the time,
 * so most acquisitions wait, but it is taken at most 1e9 / HOLD_NS times a second (a few
 * hundred at most): a high contention rate with a low acquisition rate.
 *
 * Usage: long_cs [seconds=2]
 * Every acquisition first tries pthread_mutex_trylock; when that fails the acquisition is
 * contended and the pthread_mutex_lock call that follows is timed as its wait. Prints one line
 *   truth start_ns=.. end_ns=.. acquisitions=.. contended=.. wait_ns=.. hold_ns=..
 *         max_hold_ns=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, and its end: all
 * workers joined), and, summed over threads: acquisitions of config_lock, the contended ones,
 * their wait, and the time config_lock was held [lock returned, unlock called]; max_hold_ns
 * the longest of those holds (each computes HOLD_NS of CPU time: at least that long).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define THREADS 4
#define HOLD_NS 5000000ull
#define GAP_NS 1000000ull

pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline;

struct worker {
    unsigned index;
    uint64_t acquisitions, contended, wait_ns, hold_ns, max_hold_ns;
};

NOINL void reload_config(struct worker *w) {
    if (pthread_mutex_trylock(&config_lock) != 0) {
        uint64_t w0 = now_ns();
        pthread_mutex_lock(&config_lock);
        w->wait_ns += now_ns() - w0;
        w->contended++;
    }
    w->acquisitions++;
    uint64_t h0 = now_ns();
    busy_for(HOLD_NS, w->index);
    uint64_t held = now_ns() - h0;
    w->hold_ns += held;
    if (held > w->max_hold_ns)
        w->max_hold_ns = held;
    pthread_mutex_unlock(&config_lock);
}

NOINL void serve_requests(struct worker *w) { busy_for(GAP_NS, w->index + 100); }

static void *run_worker(void *arg) {
    struct worker *w = arg;
    while (now_ns() < deadline) {
        reload_config(w);
        serve_requests(w);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: long_cs [seconds]\n");
        return 2;
    }
    static struct worker workers[THREADS];
    pthread_t t[THREADS];
    uint64_t start = now_ns();
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
    struct worker s = {0};
    for (int i = 0; i < THREADS; i++) {
        s.acquisitions += workers[i].acquisitions;
        s.contended += workers[i].contended;
        s.wait_ns += workers[i].wait_ns;
        s.hold_ns += workers[i].hold_ns;
        if (workers[i].max_hold_ns > s.max_hold_ns)
            s.max_hold_ns = workers[i].max_hold_ns;
    }
    printf("truth start_ns=%llu end_ns=%llu acquisitions=%llu contended=%llu wait_ns=%llu"
           " hold_ns=%llu max_hold_ns=%llu\n",
           (unsigned long long)start, (unsigned long long)end,
           (unsigned long long)s.acquisitions, (unsigned long long)s.contended,
           (unsigned long long)s.wait_ns, (unsigned long long)s.hold_ns,
           (unsigned long long)s.max_hold_ns);
    return 0;
}
