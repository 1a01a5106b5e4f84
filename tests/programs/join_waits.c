/* join_waits: the main thread waits in pthread_join for threads that run long.
 *
 * Part 1: `await_long_task` creates a thread whose start routine `long_task` computes for
 * task_ms and returns, and joins it. Part 2: `await_exit_task` creates a thread running
 * `exit_task`, which calls `finish_and_exit`: it computes for task_ms and calls pthread_exit.
 * The main thread's waiting is idleness at `await_* -> pthread_join`; the blame belongs to the
 * joined thread: at `start_thread -> long_task` (its routine returned) and at
 * `finish_and_exit -> pthread_exit`.
 *
 * Usage: join_waits [task_ms=300]
 *
 * Ground truth (CLOCK_MONOTONIC): each pthread_join call [called, returned]. Prints
 *   truth wait_long_ns=.. wait_exit_ns=.. values_ok=<1 if both joins returned 0 and the
 *         thread's value> wall_ns=..
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

static uint64_t task_ns = 300000000ull;

NOINL void *long_task(void *arg) {
    busy_for(task_ns, 1);
    wt_sink[1]++;
    return arg;
}

NOINL void finish_and_exit(void *value) {
    busy_for(task_ns, 2);
    wt_sink[2]++;
    pthread_exit(value);
}

NOINL void *exit_task(void *arg) {
    finish_and_exit(arg);
    return NULL;
}

/* Creates a thread running `routine`, joins it; the join's wait in *wait, 1 if ok. */
static inline __attribute__((always_inline)) int spawn_and_join(void *(*routine)(void *),
                                                                 void *value, uint64_t *wait) {
    pthread_t t;
    if (pthread_create(&t, NULL, routine, value) != 0) {
        perror("pthread_create");
        exit(2);
    }
    void *got = NULL;
    uint64_t a = now_ns();
    int r = pthread_join(t, &got);
    *wait = now_ns() - a;
    return r == 0 && got == value;
}

NOINL int await_long_task(uint64_t *wait) {
    int ok = spawn_and_join(long_task, (void *)0x1234, wait);
    wt_sink[3]++;
    return ok;
}

NOINL int await_exit_task(uint64_t *wait) {
    int ok = spawn_and_join(exit_task, (void *)0x5678, wait);
    wt_sink[4]++;
    return ok;
}

int main(int argc, char **argv) {
    double tms = argc > 1 ? atof(argv[1]) : 300.0;
    if (tms <= 0) {
        fprintf(stderr, "usage: join_waits [task_ms]\n");
        return 2;
    }
    task_ns = (uint64_t)(tms * 1e6);
    uint64_t t0 = now_ns(), wl = 0, we = 0;
    int ok = await_long_task(&wl);
    ok &= await_exit_task(&we);
    uint64_t wall = now_ns() - t0;
    printf("join_waits: %.2f s, joined long_task after %.3f s, exit_task after %.3f s\n",
           wall / 1e9, wl / 1e9, we / 1e9);
    printf("truth wait_long_ns=%llu wait_exit_ns=%llu values_ok=%d wall_ns=%llu\n",
           (unsigned long long)wl, (unsigned long long)we, ok, (unsigned long long)wall);
    return ok ? 0 : 1;
}
