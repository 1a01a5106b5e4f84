/* three_holders: successive holders of one pthread mutex must each take the blame for the
 * waiting that happened during their own hold (not "the last holder takes all").
 *
 * HOLDERS threads call hold_1ms, hold_2ms and hold_3ms in rotation; each holds the mutex
 * for its duration while computing. POKERS threads constantly acquire it for a short moment
 * (`poke`), so there are waiters during every hold.
 *
 * Usage: three_holders [seconds=1.5] [holders=3] [pokers=2]
 *
 * Ground truth as in lookup_insert.c: every hold [lock returned, unlock called] and every wait
 * [lock called, returned] is logged with CLOCK_MONOTONIC into per-thread arrays; blame of a
 * holder function = sum over all waits of overlap(wait, its holds). Prints
 *   truth blame_hold_1ms_ns=.. blame_hold_2ms_ns=.. blame_hold_3ms_ns=.. blame_poke_ns=..
 *         idle_hold_ns=.. idle_poke_ns=.. ...
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_H1, F_H2, F_H3, F_POKE, NFUNC };
static const char *const FNAME[NFUNC] = {"hold_1ms", "hold_2ms", "hold_3ms", "poke"};

#define POKE_HOLD_NS 2000ull
#define POKE_GAP_NS 20000ull

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink[1024];
static uint64_t deadline;

/* One critical section of `ns`; the caller's name is what the profile must show. */
static inline __attribute__((always_inline)) void critical(tlog_t *l, int fn, uint64_t ns) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&m);
    uint64_t h0 = now_ns();
    busy_for(ns, (unsigned)fn + 1);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&m);
    log_iv(l, fn, w0, h0, h1);
}

NOINL void hold_1ms(tlog_t *l) { critical(l, F_H1, 1000000ull); }
NOINL void hold_2ms(tlog_t *l) { critical(l, F_H2, 2000000ull); }
NOINL void hold_3ms(tlog_t *l) { critical(l, F_H3, 3000000ull); }
NOINL void poke(tlog_t *l) { critical(l, F_POKE, POKE_HOLD_NS); }

static void *holder_thread(void *arg) {
    tlog_t *l = arg;
    for (unsigned i = (unsigned)l->index; now_ns() < deadline; i++) {
        switch (i % 3) {
        case 0:
            hold_1ms(l);
            break;
        case 1:
            hold_2ms(l);
            break;
        default:
            hold_3ms(l);
            break;
        }
        sink[l->index] += i; /* keeps the calls above out of tail position */
    }
    return NULL;
}

static void *poker_thread(void *arg) {
    tlog_t *l = arg;
    while (now_ns() < deadline) {
        poke(l);
        busy_for(POKE_GAP_NS, (unsigned)l->index);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.5;
    int nhold = argc > 2 ? atoi(argv[2]) : 3;
    int npoke = argc > 3 ? atoi(argv[3]) : 2;
    if (secs <= 0 || nhold < 1 || npoke < 0 || nhold + npoke > 64) {
        fprintf(stderr, "usage: three_holders [seconds] [holders] [pokers]\n");
        return 2;
    }
    int nthreads = nhold + npoke;
    size_t cap = (size_t)(secs * 60000) + 1000;
    tlog_t *logs = truth_alloc_logs(nthreads, cap);
    if (!logs)
        return 2;
    uint64_t t_start = now_ns();
    deadline = t_start + (uint64_t)(secs * 1e9);
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++) {
        void *(*fn)(void *) = i < nhold ? holder_thread : poker_thread;
        if (pthread_create(&th[i], NULL, fn, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, count[NFUNC] = {0};
    if (truth_mutex_totals(logs, nthreads, "three_holders", blame, idle, held, count, NULL))
        return 2;
    uint64_t wall = now_ns() - t_start;
    printf("three_holders: %.2f s, %d holder threads, %d poker threads\n", wall / 1e9, nhold,
           npoke);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-8s holds=%llu held=%.3f s waited=%.3f s blame=%.3f s\n", FNAME[f],
               (unsigned long long)count[f], held[f] / 1e9, idle[f] / 1e9, blame[f] / 1e9);
    printf("truth blame_hold_1ms_ns=%llu blame_hold_2ms_ns=%llu blame_hold_3ms_ns=%llu"
           " blame_poke_ns=%llu idle_hold_ns=%llu idle_poke_ns=%llu holds_1ms=%llu"
           " holds_2ms=%llu holds_3ms=%llu holds_poke=%llu wall_ns=%llu\n",
           (unsigned long long)blame[F_H1], (unsigned long long)blame[F_H2],
           (unsigned long long)blame[F_H3], (unsigned long long)blame[F_POKE],
           (unsigned long long)(idle[F_H1] + idle[F_H2] + idle[F_H3]),
           (unsigned long long)idle[F_POKE], (unsigned long long)count[F_H1],
           (unsigned long long)count[F_H2], (unsigned long long)count[F_H3],
           (unsigned long long)count[F_POKE], (unsigned long long)wall);
    return 0;
}
