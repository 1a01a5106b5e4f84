/* coarse_lock: many short critical sections on one coarse lock, often contended. THREADS
 * workers share the global mutex `stats_lock` and loop { `update_stats`: lock stats_lock,
 * compute HOLD_NS of the thread's CPU time and sleep SLEEP_NS, unlock; compute GAP_NS of CPU
 * time outside any lock and sleep SLEEP_NS }. Most of each thread's loop is spent holding the lock or waiting
 * for it, so acquisitions are both frequent (tens of thousands a second, far over the
 * findings' 1000) and mostly contended.
 *
 * The holder sleeps inside its hold (a few microseconds: its timer slack is set to 1 ns) so
 * that the others run meanwhile and find the lock held whether or not a CPU is free for two
 * workers at once: holds that only computed 500 ns were contended 75% of the time on an idle
 * 2-CPU machine but 1-2% beside two CPU hogs, where the workers seldom run at the same time.
 * The releaser sleeps too before it tries again, so a waiter woken by its release takes the
 * lock: with a gap of computing only, on an idle machine the releaser took it back before
 * the woken waiter ran, over and over, and only 1-12% of the acquisitions were contended.
 * And a try that fails finds a sleeping holder, so its lock call waits: the program's
 * contended acquisitions are the ones that waited, those the runtime counts (with holds of
 * computing only, 40 to 60% of the failed tries found the lock free again by their lock call).
 *
 * stats_lock is an adaptive mutex (PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP: glibc spins a
 * while before it sleeps).
 *
 * Usage: coarse_lock [seconds=2]
 * Every acquisition first tries pthread_mutex_trylock; when that fails the acquisition is
 * contended and the pthread_mutex_lock call that follows is timed as its wait. Prints one line
 *   truth start_ns=.. end_ns=.. acquisitions=.. contended=.. wait_ns=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, and its end: all
 * workers joined), and, summed over threads: acquisitions of stats_lock, the contended ones,
 * and their wait.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define THREADS 4
#define HOLD_NS 500ull
#define SLEEP_NS 40000ull
#define GAP_NS 500ull

pthread_mutex_t stats_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static uint64_t deadline;

struct worker {
    unsigned index;
    uint64_t acquisitions, contended, wait_ns, hold_cpu_ns;
};

/* Burns `ns` of the calling thread's CPU time. */
static NOINL void busy_cpu(uint64_t ns, unsigned seed) {
    uint64_t end = cpu_ns() + ns;
    unsigned x = seed | 1;
    do {
        for (int i = 0; i < 16; i++) {
            x = x * 1103515245u + 12345u;
            wt_sink[x & 1023] += x;
        }
    } while (cpu_ns() < end);
}

NOINL void update_stats(struct worker *w) {
    if (pthread_mutex_trylock(&stats_lock) != 0) {
        uint64_t w0 = now_ns();
        pthread_mutex_lock(&stats_lock);
        w->wait_ns += now_ns() - w0;
        w->contended++;
    }
    w->acquisitions++;
    uint64_t c0 = cpu_ns();
    busy_cpu(HOLD_NS, w->index);
    struct timespec nap = {0, (long)SLEEP_NS};
    nanosleep(&nap, NULL);
    w->hold_cpu_ns += cpu_ns() - c0;
    pthread_mutex_unlock(&stats_lock);
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    while (now_ns() < deadline) {
        update_stats(w);
        busy_cpu(GAP_NS, w->index + 100);
        struct timespec rest = {0, (long)SLEEP_NS};
        nanosleep(&rest, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: coarse_lock [seconds]\n");
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
        s.hold_cpu_ns += workers[i].hold_cpu_ns;
    }
    printf("truth start_ns=%llu end_ns=%llu acquisitions=%llu contended=%llu wait_ns=%llu"
           " hold_cpu_ns=%llu\n",
           (unsigned long long)start, (unsigned long long)end,
           (unsigned long long)s.acquisitions, (unsigned long long)s.contended,
           (unsigned long long)s.wait_ns, (unsigned long long)s.hold_cpu_ns);
    return 0;
}
