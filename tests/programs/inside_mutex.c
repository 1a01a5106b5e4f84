/* inside_mutex: four threads doing two thirds of their work inside one mutex. THREADS
 * workers share the global mutex `table_lock` and loop { `apply_update`: lock table_lock,
 * `rebalance_table` computes INSIDE_NS, unlock; `parse_request`: compute OUTSIDE_NS outside
 * any lock }. Each thread spends two thirds of its computing inside the lock, so the lock is
 * held nearly all the time and serialises the program: tens of thousands of acquisitions a
 * second, most of them contended. The fix is to move work out of the critical section, not
 * to split the lock or to use atomics (nothing in the section is a counter).
 *
 * Usage: inside_mutex [seconds=2]
 * Every acquisition first tries pthread_mutex_trylock; when that fails the acquisition is
 * contended and the pthread_mutex_lock call that follows is timed as its wait. Prints one line
 *   truth start_ns=.. end_ns=.. acquisitions=.. contended=.. wait_ns=.. hold_ns=.. outside_ns=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, and its end: all
 * workers joined), and, summed over threads: acquisitions of table_lock, the contended ones,
 * their wait, the time table_lock was held [lock returned, unlock called], and the time spent
 * in parse_request.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define THREADS 4
#define INSIDE_NS 40000ull
#define OUTSIDE_NS 20000ull

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline;

struct worker {
    unsigned index;
    uint64_t acquisitions, contended, wait_ns, hold_ns, outside_ns;
};

NOINL void rebalance_table(struct worker *w) { busy_for(INSIDE_NS, w->index); }

NOINL void apply_update(struct worker *w) {
    if (pthread_mutex_trylock(&table_lock) != 0) {
        uint64_t w0 = now_ns();
        pthread_mutex_lock(&table_lock);
        w->wait_ns += now_ns() - w0;
        w->contended++;
    }
    w->acquisitions++;
    uint64_t h0 = now_ns();
    rebalance_table(w);
    w->hold_ns += now_ns() - h0;
    pthread_mutex_unlock(&table_lock);
}

NOINL void parse_request(struct worker *w) {
    uint64_t o0 = now_ns();
    busy_for(OUTSIDE_NS, w->index + 100);
    w->outside_ns += now_ns() - o0;
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    while (now_ns() < deadline) {
        apply_update(w);
        parse_request(w);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: inside_mutex [seconds]\n");
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
        s.outside_ns += workers[i].outside_ns;
    }
    printf("truth start_ns=%llu end_ns=%llu acquisitions=%llu contended=%llu wait_ns=%llu"
           " hold_ns=%llu outside_ns=%llu\n",
           (unsigned long long)start, (unsigned long long)end,
           (unsigned long long)s.acquisitions, (unsigned long long)s.contended,
           (unsigned long long)s.wait_ns, (unsigned long long)s.hold_ns,
           (unsigned long long)s.outside_ns);
    return 0;
}
