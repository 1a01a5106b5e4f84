/* omp_regions: OpenMP (gcc -fopenmp) workloads that measure their own waiting.
 *
 * Usage: omp_regions MODE [rounds=40] [slow_ms=20] [quick_ms=2]
 *
 * Two threads (num_threads(2)) in every mode; every step computes (busy_for: wall-clock CPU
 * burning) in a function of its own.
 *   region    each round is a parallel region: one thread runs `slow_step` (slow_ms), the
 *             other `quick_step` (quick_ms), and they meet at the region's end. The slow
 *             thread is the worker in even rounds and the initial thread in odd ones, so
 *             both a worker and the initial thread wait.
 *   barrier   one parallel region; each round the same imbalance ends at an explicit
 *             `#pragma omp barrier`, then both threads run `even_step` (quick_ms).
 *   critical  one parallel region; each thread enters `#pragma omp critical` rounds times:
 *             thread 0 holds it for slow_ms in `slow_holder`, thread 1 for quick_ms / 10 in
 *             `quick_holder`, with quick_ms of `between` outside.
 *   named     the same with `#pragma omp critical(ledger)`.
 *   tasks     one parallel region; one thread creates `rounds` tasks of quick_ms in
 *             `task_step` (`single nowait`), and both meet at `#pragma omp barrier`, where
 *             they run the tasks.
 *   serial    each round a parallel region where both threads run `even_step` (quick_ms),
 *             then the initial thread alone runs `serial_step` (slow_ms).
 *   entries   every combined construct's entry point once (loops of each schedule but
 *             static, which GCC inlines, and sections), and a loop and sections inside a
 *             region, printing their sum.
 *   balanced  each round a parallel region where both threads run `even_step` (quick_ms).
 *
 * Ground truth (CLOCK_MONOTONIC):
 *   region, barrier, balanced: a thread's wait is from its arrival (its step returned) to
 *     the last arrival of the round (wait_ns), charged to the last thread's step (in
 *     balanced, to neither: blame_quick_ns); wait_upper_ns adds what the machine added,
 *     the time to leave: in barrier the threads' own measure around `#pragma omp barrier`,
 *     in region and balanced up to the initial thread's return from the region.
 *   serial: the worker waits in its thread pool while the initial thread runs its serial
 *     step (wait_ns = blame_slow_ns: the serial steps' time, but the last one's), and at
 *     most from the end of its step in one region to the start of its step in the next
 *     (wait_upper_ns).
 *   tasks: the time the threads spent in the barrier less the tasks' (wall) time in it
 *     (wait_ns = wait_upper_ns); work_ns: the tasks' CPU time.
 *   critical, named: a wait is from the call to entering the critical section, charged to the
 *     holds it overlaps (truth_log.h's rule for mutexes); wait_upper_ns = wait_ns.
 * Prints "truth wait_ns=.. wait_upper_ns=.. blame_slow_ns=.. blame_quick_ns=.. slow_last=..
 * rounds=.." (blame_slow_ns: the waiting charged to slow_step / slow_holder).
 */
#define _GNU_SOURCE
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

static uint64_t slow_ns, quick_ns;

/* Each step a function of its own: no_icf keeps GCC from folding identical ones into one. */
#define STEP NOINL __attribute__((no_icf)) void

STEP slow_step(unsigned seed) { busy_for(slow_ns, seed); }
STEP quick_step(unsigned seed) { busy_for(quick_ns, seed); }
STEP even_step(unsigned seed) { busy_for(quick_ns, seed); }
STEP slow_holder(unsigned seed) { busy_for(slow_ns, seed); }
STEP quick_holder(unsigned seed) { busy_for(quick_ns / 10, seed); }
STEP between(unsigned seed) { busy_for(quick_ns, seed); }
STEP task_step(unsigned seed) { busy_for(quick_ns, seed); }
STEP serial_step(unsigned seed) { busy_for(slow_ns, seed); }

static uint64_t wait_ns, wait_upper_ns, blame_slow_ns, blame_quick_ns, work_ns;
static int slow_last;

/* One round's arrivals of the two threads; `slow` is the slow thread's number. */
static void settle(const uint64_t arrive[2], int slow) {
    int last = arrive[1] > arrive[0];
    uint64_t w = arrive[last] - arrive[!last];
    wait_ns += w;
    if (last == slow) {
        blame_slow_ns += w;
        slow_last++;
    } else {
        blame_quick_ns += w;
    }
}

static void regions(int rounds) {
    for (int r = 0; r < rounds; r++) {
        uint64_t arrive[2] = {0, 0};
        int slow = r % 2 == 0;
#pragma omp parallel num_threads(2)
        {
            int me = omp_get_thread_num();
            if (me == slow)
                slow_step((unsigned)r);
            else
                quick_step((unsigned)r);
            arrive[me] = now_ns();
        }
        /* No thread can still wait once the region has returned to its initial thread. */
        uint64_t end = now_ns();
        wait_upper_ns += end - arrive[0] + end - arrive[1];
        settle(arrive, slow);
        wt_sink[r & 1023] += (uint64_t)r;
    }
}

static void barriers(int rounds) {
    uint64_t(*arrive)[2] = calloc((size_t)rounds, sizeof *arrive);
    uint64_t waited[2] = {0, 0};
    if (!arrive)
        exit(1);
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        for (int r = 0; r < rounds; r++) {
            int slow = r % 2 == 0;
            if (me == slow)
                slow_step((unsigned)r);
            else
                quick_step((unsigned)r);
            uint64_t t = now_ns();
            arrive[r][me] = t;
#pragma omp barrier
            waited[me] += now_ns() - t;
            even_step((unsigned)r);
        }
    }
    for (int r = 0; r < rounds; r++)
        settle(arrive[r], r % 2 == 0);
    /* What the threads measured around the barrier, wake-ups included. */
    wait_upper_ns = waited[0] + waited[1];
    free(arrive);
}

/* One hold of the critical section by thread `me`, which started waiting at w0. */
static inline void hold(tlog_t *l, int me, int r, uint64_t w0) {
    uint64_t h0 = now_ns();
    if (me == 0)
        slow_holder((unsigned)r);
    else
        quick_holder((unsigned)r);
    log_iv(l, me, w0, h0, now_ns());
}

static void criticals(int rounds, int named) {
    tlog_t *logs = truth_alloc_logs(2, (size_t)rounds + 1);
    if (!logs)
        exit(1);
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        tlog_t *l = &logs[me];
        for (int r = 0; r < rounds; r++) {
            between((unsigned)r);
            uint64_t w0 = now_ns();
            if (named) {
#pragma omp critical(ledger)
                hold(l, me, r, w0);
            } else {
#pragma omp critical
                hold(l, me, r, w0);
            }
        }
    }
    if (truth_overflowed(logs, 2, "omp_regions"))
        exit(1);
    size_t nh = 0;
    ival_t *holds = truth_merge_holds(logs, 2, &nh);
    uint64_t blame[2] = {0, 0}, idle[2] = {0, 0};
    truth_wait_blame(logs, 2, holds, nh, blame, idle, NULL);
    wait_ns = wait_upper_ns = idle[0] + idle[1];
    blame_slow_ns = blame[0];
    blame_quick_ns = blame[1];
}

static long entry_sum;

#define SUM_LOOP(SCHEDULE)                                                                     \
    do {                                                                                       \
        _Pragma(SCHEDULE) for (int i = 0; i < 1000; i++) {                                     \
            _Pragma("omp atomic") entry_sum += i;                                              \
        }                                                                                      \
    } while (0)

/* Every combined construct GCC starts a team for, each summing 0..999 (or 1 + 2). */
static void entries(void) {
    SUM_LOOP("omp parallel for schedule(monotonic: dynamic, 4) num_threads(2)");
    SUM_LOOP("omp parallel for schedule(nonmonotonic: dynamic, 4) num_threads(2)");
    SUM_LOOP("omp parallel for schedule(monotonic: guided, 4) num_threads(2)");
    SUM_LOOP("omp parallel for schedule(nonmonotonic: guided, 4) num_threads(2)");
    SUM_LOOP("omp parallel for schedule(monotonic: runtime) num_threads(2)");
    SUM_LOOP("omp parallel for schedule(nonmonotonic: runtime) num_threads(2)");
    SUM_LOOP("omp parallel for schedule(runtime) num_threads(2)");
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        {
#pragma omp atomic
            entry_sum += 1;
        }
#pragma omp section
        {
#pragma omp atomic
            entry_sum += 2;
        }
    }
    /* Worksharing inside a region: a loop and sections ending in their team barriers. */
#pragma omp parallel num_threads(2)
    {
#pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < 1000; i++) {
#pragma omp atomic
            entry_sum += i;
        }
#pragma omp sections
        {
#pragma omp section
            {
#pragma omp atomic
                entry_sum += 1;
            }
#pragma omp section
            {
#pragma omp atomic
                entry_sum += 2;
            }
        }
        /* Work after the sections keeps their barrier (GCC drops it at a region's end). */
        wt_sink[omp_get_thread_num()] += 1;
    }
    /* 8 loops of 499500, and two sections' 3. */
    printf("entries sum=%ld expected=%ld\n", entry_sum, 8 * 499500L + 6);
}

/* Task times by the thread that ran them. */
static uint64_t task_wall[2], task_cpu[2];

static void tasks(int rounds) {
    uint64_t enter[2], leave[2];
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
#pragma omp single nowait
        for (int i = 0; i < rounds; i++) {
#pragma omp task firstprivate(i)
            {
                uint64_t w0 = now_ns(), c0 = cpu_ns();
                task_step((unsigned)i);
                int t = omp_get_thread_num();
                __atomic_fetch_add(&task_wall[t], now_ns() - w0, __ATOMIC_RELAXED);
                __atomic_fetch_add(&task_cpu[t], cpu_ns() - c0, __ATOMIC_RELAXED);
            }
        }
        enter[me] = now_ns();
#pragma omp barrier
        leave[me] = now_ns();
    }
    uint64_t in_barrier = leave[0] - enter[0] + leave[1] - enter[1];
    uint64_t ran = task_wall[0] + task_wall[1];
    wait_ns = wait_upper_ns = in_barrier > ran ? in_barrier - ran : 0;
    work_ns = task_cpu[0] + task_cpu[1];
}

static void serials(int rounds) {
    uint64_t arrived = 0;
    for (int r = 0; r < rounds; r++) {
        uint64_t started = 0, left = 0;
#pragma omp parallel num_threads(2)
        {
            int worker = omp_get_thread_num() == 1;
            if (worker)
                started = now_ns();
            even_step((unsigned)r);
            if (worker)
                left = now_ns();
        }
        if (r > 0)
            wait_upper_ns += started - arrived;
        arrived = left;
        uint64_t s0 = now_ns();
        serial_step((unsigned)r);
        if (r + 1 < rounds)
            wait_ns += now_ns() - s0;
    }
    blame_slow_ns = wait_ns;
}

static void balanced(int rounds) {
    for (int r = 0; r < rounds; r++) {
        uint64_t arrive[2] = {0, 0};
#pragma omp parallel num_threads(2)
        {
            even_step((unsigned)r);
            arrive[omp_get_thread_num()] = now_ns();
        }
        uint64_t end = now_ns();
        wait_upper_ns += end - arrive[0] + end - arrive[1];
        settle(arrive, 2);
        wt_sink[r & 1023] += (uint64_t)r;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: omp_regions region|barrier|critical|named|tasks|serial|entries|balanced [rounds] "
                        "[slow_ms] [quick_ms]\n");
        return 2;
    }
    const char *mode = argv[1];
    int rounds = argc > 2 ? atoi(argv[2]) : 40;
    slow_ns = (uint64_t)((argc > 3 ? atof(argv[3]) : 20.0) * 1e6);
    quick_ns = (uint64_t)((argc > 4 ? atof(argv[4]) : 2.0) * 1e6);
    uint64_t t0 = now_ns();
    if (!strcmp(mode, "region"))
        regions(rounds);
    else if (!strcmp(mode, "barrier"))
        barriers(rounds);
    else if (!strcmp(mode, "critical"))
        criticals(rounds, 0);
    else if (!strcmp(mode, "named"))
        criticals(rounds, 1);
    else if (!strcmp(mode, "entries"))
        entries();
    else if (!strcmp(mode, "serial"))
        serials(rounds);
    else if (!strcmp(mode, "tasks"))
        tasks(rounds);
    else if (!strcmp(mode, "balanced"))
        balanced(rounds);
    else {
        fprintf(stderr, "omp_regions: unknown mode %s\n", mode);
        return 2;
    }
    printf("truth wait_ns=%llu wait_upper_ns=%llu blame_slow_ns=%llu blame_quick_ns=%llu "
           "slow_last=%d rounds=%d work_ns=%llu wall_ns=%llu\n",
           (unsigned long long)wait_ns, (unsigned long long)wait_upper_ns,
           (unsigned long long)blame_slow_ns,
           (unsigned long long)blame_quick_ns, slow_last, rounds, (unsigned long long)work_ns,
           (unsigned long long)(now_ns() - t0));
    return 0;
}
