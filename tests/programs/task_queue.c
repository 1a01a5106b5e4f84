/* task_queue: a central task queue protected by one pthread_spinlock_t. `enqueue` holds it
 * long (about 60 us of CPU work inside), `dequeue` short. enqueue is reached from two call
 * paths, future_a -> submit -> enqueue and future_b -> submit -> enqueue, in a known
 * proportion (SHARE_A percent of the submissions go through future_a). THREADS threads each
 * submit a task and take one from the queue, in a loop, so they spin-contend.
 *
 * Usage: task_queue [seconds=1.5] [threads=3] [share_a_percent=67]
 *
 * Ground truth, measured by the program itself into preallocated per-thread arrays:
 *   - every hold [pthread_spin_lock returned, pthread_spin_unlock called] (CLOCK_MONOTONIC),
 *     tagged with its holder: enqueue via future_a, enqueue via future_b, or dequeue;
 *   - every wait [pthread_spin_lock called, returned] (CLOCK_MONOTONIC), with the waiter's
 *     CPU time over it (CLOCK_THREAD_CPUTIME_ID): the idleness is the waits' wall time
 *     (blameprof times each spin), their CPU time is printed too.
 * A holder is to blame for the waiting during its holds (as for mutexes): the sum, over its
 * holds, of their overlap with every wait is the blame truth per holder tag.
 * Prints
 *   truth blame_enqueue_a_ns=.. blame_enqueue_b_ns=.. blame_dequeue_ns=.. spin_cpu_ns=..
 *         spin_wall_ns=.. idle_enqueue_a_ns=.. idle_enqueue_b_ns=.. idle_dequeue_ns=.. ...
 * (idle_*: spinning CPU time per waiter; spin_wall_ns: all waits' wall time)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "truth_log.h"

#define NOINL __attribute__((noinline, noclone))

enum { T_ENQ_A, T_ENQ_B, T_DEQ, NTAG };
static const char *const TNAME[NTAG] = {"enqueue(future_a)", "enqueue(future_b)", "dequeue"};

#ifndef ENQUEUE_WORK_NS /* -D for experiments */
#define ENQUEUE_WORK_NS 60000ull
#endif
#ifndef DEQUEUE_WORK_NS
#define DEQUEUE_WORK_NS 500ull
#endif
#ifndef OUTSIDE_WORK_NS
#define OUTSIDE_WORK_NS 20000ull
#endif
#define QCAP 4096

static pthread_spinlock_t qlock;
static uint64_t queue[QCAP];
static unsigned qhead, qtail;
static volatile uint64_t sink[1024];
static uint64_t deadline;
static int share_a = 67;

static uint64_t busy_for(uint64_t ns, uint64_t x) {
    uint64_t end = now_ns() + ns;
    x |= 1;
    do {
        for (int i = 0; i < 32; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            sink[x >> 54] += x;
        }
    } while (now_ns() < end);
    return x;
}

/* Acquire with the wait logged (with the spinning CPU time in `cpu`); returns the hold start. */
static inline __attribute__((always_inline)) uint64_t qlock_acquire(tlog_t *l, int tag) {
    uint64_t c0 = cpu_ns(), w0 = now_ns();
    pthread_spin_lock(&qlock);
    uint64_t h0 = now_ns(), c1 = cpu_ns();
    if (l->nwaits < l->cap)
        l->waits[l->nwaits++] = (ival_t){w0, h0, c1 - c0, tag};
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
    /* keep the queue sorted by priority: the expensive part */
    task = busy_for(ENQUEUE_WORK_NS, task);
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
    task = busy_for(DEQUEUE_WORK_NS, task);
    qlock_release(l, h0, T_DEQ);
    return task;
}

NOINL int submit(tlog_t *l, uint64_t task, int tag) {
    int ok = enqueue(l, task, tag);
    sink[tag] += (uint64_t)ok; /* no tail call: submit stays on the stack */
    return ok;
}

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

static void *worker(void *arg) {
    tlog_t *l = arg;
    uint64_t x = (uint64_t)l->index * 7919 + 1;
    for (unsigned i = (unsigned)l->index * 37; now_ns() < deadline; i++) {
        if ((int)(i % 100) < share_a)
            future_a(l, x);
        else
            future_b(l, x);
        x += dequeue(l);
        x = busy_for(OUTSIDE_WORK_NS, x); /* run the task */
    }
    sink[10 + l->index % 16] = x;
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.5;
    int nthreads = argc > 2 ? atoi(argv[2]) : 3;
    share_a = argc > 3 ? atoi(argv[3]) : 67;
    if (secs <= 0 || nthreads < 1 || nthreads > 64 || share_a < 0 || share_a > 100) {
        fprintf(stderr, "usage: task_queue [seconds] [threads] [share_a_percent]\n");
        return 2;
    }
    pthread_spin_init(&qlock, PTHREAD_PROCESS_PRIVATE);
    size_t cap = (size_t)(secs * 100000) + 1000;
    tlog_t *logs = truth_alloc_logs(nthreads, cap);
    if (!logs)
        return 2;
    uint64_t t_start = now_ns();
    deadline = t_start + (uint64_t)(secs * 1e9);
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&th[i], NULL, worker, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);

    if (truth_overflowed(logs, nthreads, "task_queue"))
        return 2;
    size_t nh;
    ival_t *holds = truth_merge_holds(logs, nthreads, &nh);
    if (!holds)
        return 2;

    double blame[NTAG] = {0};
    uint64_t idle[NTAG] = {0}, spin_cpu = 0, spin_wall = 0;
    uint64_t held[NTAG] = {0}, count[NTAG] = {0};
    truth_hold_totals(holds, nh, held, count);
    for (int i = 0; i < nthreads; i++) {
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            spin_cpu += w.cpu;
            spin_wall += w.b - w.a;
            idle[w.fn] += w.cpu;
            if (w.b <= w.a)
                continue;
            for (size_t h = truth_first_hold(holds, nh, w.a); h < nh && holds[h].a < w.b; h++)
                blame[holds[h].fn] += (double)truth_overlap(&holds[h], &w);
        }
    }
    uint64_t wall = now_ns() - t_start;
    printf("task_queue: %.2f s, %d threads, %d%% of submissions via future_a\n", wall / 1e9,
           nthreads, share_a);
    for (int t = 0; t < NTAG; t++)
        printf("  %-18s holds=%llu held=%.3f s blame=%.3f s spun=%.3f s\n", TNAME[t],
               (unsigned long long)count[t], held[t] / 1e9, blame[t] / 1e9, idle[t] / 1e9);
    printf("  spinning: cpu=%.3f s wall=%.3f s\n", spin_cpu / 1e9, spin_wall / 1e9);
    printf("truth blame_enqueue_a_ns=%llu blame_enqueue_b_ns=%llu blame_dequeue_ns=%llu"
           " spin_cpu_ns=%llu spin_wall_ns=%llu holds_enqueue_a=%llu holds_enqueue_b=%llu"
           " holds_dequeue=%llu idle_enqueue_a_ns=%llu idle_enqueue_b_ns=%llu idle_dequeue_ns=%llu"
           " wall_ns=%llu\n",
           (unsigned long long)blame[T_ENQ_A], (unsigned long long)blame[T_ENQ_B],
           (unsigned long long)blame[T_DEQ], (unsigned long long)spin_cpu,
           (unsigned long long)spin_wall, (unsigned long long)count[T_ENQ_A],
           (unsigned long long)count[T_ENQ_B], (unsigned long long)count[T_DEQ],
           (unsigned long long)idle[T_ENQ_A], (unsigned long long)idle[T_ENQ_B],
           (unsigned long long)idle[T_DEQ], (unsigned long long)wall);
    pthread_spin_destroy(&qlock);
    return 0;
}
