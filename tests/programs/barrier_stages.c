/* barrier_stages: two threads meet at a barrier after every stage; one stage is slow.
 *
 * Each round, both threads run `stage`, which calls `slow_stage` (slow_ms of computing) on
 * thread 0 and `fast_stage` (fast_ms) on thread 1, then pthread_barrier_wait from `stage`
 * itself: the barrier call is the same code on both threads, and only the work each did
 * before it tells the late one apart. The fast thread waits while the slow one computes:
 * that waiting is `slow_stage`'s doing (issue 41: late work is a barrier's culprit).
 *
 * Usage: barrier_stages [rounds=40] [slow_ms=10] [fast_ms=2]
 *
 * Ground truth (CLOCK_MONOTONIC and the threads' CPU clocks): each thread's stage
 * [start, end] and barrier call [called, returned]. Prints
 *   truth wait_ns=<both threads' barrier waiting> waiter_wait_ns=<the waiting of the
 *         thread that arrived first each round (the last arriver's call waits for nobody;
 *         on a loaded machine it may be descheduled inside it)> late_slow_ns=<the waiting of the fast
 *         thread that lies inside slow_stage's runs> late_fast_ns=<the slow thread's
 *         waiting inside fast_stage's runs> slow_cpu_permille=<slow_stage's CPU time over
 *         its wall time, x1000: below 1000 when the thread was descheduled> late_rounds=
 *         <rounds the slow thread arrived last> rounds=.. wall_ns=..
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

typedef struct {
    uint64_t stage_start, stage_end, wait_end;
    uint64_t cpu;
} round_t;

static pthread_barrier_t bar;
static int rounds = 40;
static uint64_t slow_ns = 10000000ull, fast_ns = 2000000ull;
static round_t *log_of[2];

NOINL void slow_stage(int round) { busy_for(slow_ns, (unsigned)round); }

NOINL void fast_stage(int round) { busy_for(fast_ns, (unsigned)round + 7u); }

NOINL void stage(int self, int round) {
    round_t *r = &log_of[self][round];
    uint64_t c0 = cpu_ns();
    r->stage_start = now_ns();
    if (self == 0)
        slow_stage(round);
    else
        fast_stage(round);
    r->stage_end = now_ns();
    r->cpu = cpu_ns() - c0;
    pthread_barrier_wait(&bar);
    r->wait_end = now_ns();
}

static void *thread_main(void *arg) {
    int self = (int)(intptr_t)arg;
    for (int r = 0; r < rounds; r++) {
        stage(self, r);
        wt_sink[self] += (uint64_t)r; /* keeps stage out of tail position */
    }
    return NULL;
}

/* The part of [a, b] inside [c, d]. */
static uint64_t overlap(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    uint64_t lo = a > c ? a : c, hi = b < d ? b : d;
    return hi > lo ? hi - lo : 0;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 40;
    double sms = argc > 2 ? atof(argv[2]) : 10.0;
    double fms = argc > 3 ? atof(argv[3]) : 2.0;
    if (rounds < 1 || sms <= 0 || fms <= 0) {
        fprintf(stderr, "usage: barrier_stages [rounds] [slow_ms] [fast_ms]\n");
        return 2;
    }
    slow_ns = (uint64_t)(sms * 1e6);
    fast_ns = (uint64_t)(fms * 1e6);
    for (int i = 0; i < 2; i++)
        if (!(log_of[i] = calloc((size_t)rounds, sizeof(round_t))))
            return 2;
    pthread_barrier_init(&bar, NULL, 2);
    uint64_t t0 = now_ns();
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    pthread_barrier_destroy(&bar);

    uint64_t wait = 0, waiter_wait = 0, late_slow = 0, late_fast = 0, slow_cpu = 0, slow_wall = 0;
    int late_rounds = 0;
    for (int r = 0; r < rounds; r++) {
        round_t *s = &log_of[0][r], *f = &log_of[1][r];
        wait += (s->wait_end - s->stage_end) + (f->wait_end - f->stage_end);
        waiter_wait += s->stage_end > f->stage_end ? f->wait_end - f->stage_end
                                                   : s->wait_end - s->stage_end;
        late_slow += overlap(f->stage_end, f->wait_end, s->stage_start, s->stage_end);
        late_fast += overlap(s->stage_end, s->wait_end, f->stage_start, f->stage_end);
        late_rounds += s->stage_end > f->stage_end;
        slow_cpu += s->cpu;
        slow_wall += s->stage_end - s->stage_start;
    }
    printf("truth wait_ns=%llu waiter_wait_ns=%llu late_slow_ns=%llu late_fast_ns=%llu slow_cpu_permille=%llu "
           "late_rounds=%d rounds=%d wall_ns=%llu\n",
           (unsigned long long)wait, (unsigned long long)waiter_wait,
           (unsigned long long)late_slow,
           (unsigned long long)late_fast,
           (unsigned long long)(slow_wall ? slow_cpu * 1000 / slow_wall : 0), late_rounds,
           rounds, (unsigned long long)wall);
    return 0;
}
