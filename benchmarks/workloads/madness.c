/* madness: the MADNESS shape of Tallent et al. (PPoPP'10, section 5.1): a dynamic task
 * scheduler with ONE central task queue protected by a pthread spin lock. Worker threads
 * create tasks (futures) and push them on the queue, and pop tasks from it to run them.
 * Futures are created through several distinct call paths that meet in the same queue code:
 *     future_a -> submit -> enqueue      (67% of the submissions)
 *     future_b -> submit -> enqueue      (33%)
 *     worker loop       -> dequeue
 * `enqueue` keeps the queue ordered by priority under the lock, a long critical section
 * (ENQ_HOLD_NS, ~80 us); `dequeue` just takes the head (~1 us). So the queue's contention
 * is `enqueue`'s fault, and the paper's question "which future paths cause it" is answered
 * by the blame under future_a vs future_b.
 *
 * Usage: madness [scale=1.0]   (THREADS workers, ROUNDS x scale tasks each; ~1.5 s at 1.0
 * on 2 CPUs)
 *
 * Ground truth (the blameprof definition for spin locks, docs/lock-blame.md): idleness is
 * the wall time spent spinning, at the spinner (a spinner descheduled while it waits is
 * still waiting: its CPU time would miss that on a loaded machine); the holder is blamed
 * for the waiting during its hold (spinners x duration, as for mutexes). Measured by the
 * program into preallocated per-thread logs (tests/programs/truth_log.h): every wait
 * [pthread_spin_lock called, returned] (CLOCK_MONOTONIC), tagged with the waiting function
 * and path; every hold [lock returned, unlock called], tagged with the holder. A holder's
 * blame is the overlap of its holds with every wait, as tests/programs/task_queue.c does.
 * Prints (benchmarks/README.md contract):
 *   truth blame.spin enqueue|dequeue|future_a|future_b <ns>
 *   truth idleness.spin enqueue|dequeue|future_a|future_b <ns>
 *   truth culprit enqueue
 *   truth candidates enqueue,dequeue
 * (future_a / future_b: inclusive, i.e. the enqueue holds and waits on that path.)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OBJ_TRUTH_NO_WAIT_TRUTH /* madness has a busy_for of its own */
#include "obj_truth.h"

#define NOINL __attribute__((noinline, noclone))

enum { T_ENQ_A, T_ENQ_B, T_DEQ, NTAG };

#define THREADS 2
#define ROUNDS 7500            /* tasks per worker at scale 1.0 */
#ifndef ENQ_HOLD_NS /* -D for experiments */
#define ENQ_HOLD_NS 80000ull /* priority insertion under the lock */
#endif
#define DEQ_HOLD_NS 1000ull    /* take the head */
#define RUN_TASK_NS 40000ull   /* run the task, no lock */
#define QCAP 8192

static pthread_spinlock_t qlock;
static uint64_t queue[QCAP];
static unsigned qhead, qtail;
static volatile uint64_t sink[64];
static int rounds;

static uint64_t busy_for(uint64_t ns, uint64_t x) {
    uint64_t end = now_ns() + ns;
    x |= 1;
    do {
        for (int i = 0; i < 32; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            sink[x >> 58] += x;
        }
    } while (now_ns() < end);
    return x;
}

static inline __attribute__((always_inline)) uint64_t qlock_acquire(tlog_t *l, int tag) {
    uint64_t w0 = now_ns();
    pthread_spin_lock(&qlock);
    uint64_t h0 = now_ns();
    if (l->nwaits < l->cap)
        l->waits[l->nwaits++] = (ival_t){w0, h0, 0, tag};
    else
        l->overflow = 1;
    return h0;
}

static inline __attribute__((always_inline)) void qlock_release(tlog_t *l, uint64_t h0, int tag) {
    uint64_t h1 = now_ns();
    pthread_spin_unlock(&qlock);
    if (l->nholds < l->cap)
        l->holds[l->nholds++] = (ival_t){h0, h1, 0, tag};
    else
        l->overflow = 1;
}

NOINL int enqueue(tlog_t *l, uint64_t task, int tag) {
    uint64_t h0 = qlock_acquire(l, tag);
    task = busy_for(ENQ_HOLD_NS, task); /* keep the queue ordered by priority */
    int ok = qtail - qhead < QCAP;
    if (ok)
        queue[qtail++ % QCAP] = task;
    qlock_release(l, h0, tag);
    return ok;
}

NOINL uint64_t dequeue(tlog_t *l) {
    uint64_t h0 = qlock_acquire(l, T_DEQ);
    uint64_t task = 0;
    if (qhead != qtail)
        task = queue[qhead++ % QCAP];
    task = busy_for(DEQ_HOLD_NS, task);
    qlock_release(l, h0, T_DEQ);
    return task;
}

NOINL int submit(tlog_t *l, uint64_t task, int tag) {
    int ok = enqueue(l, task, tag);
    sink[tag] += (uint64_t)ok; /* no tail call: submit stays on the stack */
    return ok;
}

/* Two future types (in MADNESS: templates for different argument counts). */
NOINL int future_a(tlog_t *l, uint64_t task) {
    int ok = submit(l, task, T_ENQ_A);
    sink[8] += (uint64_t)ok;
    return ok;
}

NOINL int future_b(tlog_t *l, uint64_t task) {
    int ok = submit(l, task, T_ENQ_B);
    sink[9] += (uint64_t)ok;
    return ok;
}

NOINL uint64_t run_task(uint64_t task) { return busy_for(RUN_TASK_NS, task); }

static void *worker(void *arg) {
    tlog_t *l = arg;
    uint64_t x = (uint64_t)l->index * 7919 + 1;
    for (int i = 0; i < rounds; i++) {
        if ((i + l->index) % 3 != 2)
            future_a(l, x);
        else
            future_b(l, x);
        x = run_task(x + dequeue(l));
    }
    sink[10 + l->index] = x;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale_max(argc, argv, "madness", 100);
    rounds = (int)(ROUNDS * scale);
    if (rounds < 1)
        rounds = 1;
    pthread_spin_init(&qlock, PTHREAD_PROCESS_PRIVATE);
    uint64_t wall;
    tlog_t *logs = wl_run_logged(THREADS, worker, (size_t)rounds * 2 + 16, &wall);
    if (!logs)
        return 2;

    if (truth_overflowed(logs, THREADS, "madness"))
        return 2;
    size_t nh;
    ival_t *holds = truth_merge_holds(logs, THREADS, &nh);
    if (!holds)
        return 2;
    double blame[NTAG] = {0};
    uint64_t idle[NTAG] = {0}, held[NTAG] = {0}, count[NTAG] = {0};
    truth_hold_totals(holds, nh, held, count);
    for (int i = 0; i < THREADS; i++)
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            if (w.b <= w.a)
                continue;
            idle[w.fn] += w.b - w.a;
            for (size_t h = truth_first_hold(holds, nh, w.a); h < nh && holds[h].a < w.b; h++)
                blame[holds[h].fn] += (double)truth_overlap(&holds[h], &w);
        }
    free(holds);

    static const char *const TNAME[NTAG] = {"enqueue via future_a", "enqueue via future_b",
                                            "dequeue"};
    printf("madness: %.2f s, %d workers x %d tasks, one spin-locked queue\n", wall / 1e9, THREADS,
           rounds);
    for (int t = 0; t < NTAG; t++)
        printf("  %-21s holds=%llu held=%.3f s blame=%.3f s spun=%.3f s\n", TNAME[t],
               (unsigned long long)count[t], held[t] / 1e9, blame[t] / 1e9, idle[t] / 1e9);
    unsigned long long b_a = (unsigned long long)blame[T_ENQ_A],
                       b_b = (unsigned long long)blame[T_ENQ_B],
                       b_d = (unsigned long long)blame[T_DEQ];
    printf("truth blame.spin enqueue %llu\n", b_a + b_b);
    printf("truth blame.spin dequeue %llu\n", b_d);
    printf("truth blame.spin future_a %llu\n", b_a);
    printf("truth blame.spin future_b %llu\n", b_b);
    printf("truth idleness.spin enqueue %llu\n",
           (unsigned long long)(idle[T_ENQ_A] + idle[T_ENQ_B]));
    printf("truth idleness.spin dequeue %llu\n", (unsigned long long)idle[T_DEQ]);
    printf("truth idleness.spin future_a %llu\n", (unsigned long long)idle[T_ENQ_A]);
    printf("truth idleness.spin future_b %llu\n", (unsigned long long)idle[T_ENQ_B]);
    wl_truth_end("enqueue", "enqueue,dequeue", (uint64_t)rounds * THREADS);
    pthread_spin_destroy(&qlock);
    return 0;
}
