/* syncperf_pipeline: an imbalanced three-stage pipeline (SyncPerf, Alam et al., "Load
 * Imbalance", PARSEC dedup/ferret: stages connected by queues, "the waiting and computation
 * time of different groups of threads has a big difference").
 *
 * `fragment_stage` cuts ITEMS items (FRAG_NS of computing each) into queue q1,
 * `compress_stage` takes them from q1, compresses each (COMP_NS: the slow stage) and puts it
 * into q2, `write_stage` takes them from q2 and writes them (WRITE_NS). Each queue holds
 * QCAP items under a mutex, with condition variables `not_empty` and `not_full`
 * (`queue_put`/`queue_get`, signalling under the mutex). The slow middle stage makes both
 * neighbours wait: fragment_stage on q1.not_full until compress_stage's queue_get signals
 * it, write_stage on q2.not_empty until compress_stage's queue_put signals it. Waits are
 * idleness.condvar at the waiting stage; their blame goes to compress_stage's signals.
 *
 * Usage: syncperf_pipeline [scale=1.0]   (scale 1.0: 1200 items, about 1.3 s)
 *
 * Truth (obj_truth.h, per condition variable): every pthread_cond_wait [called, returned]
 * is a wait of the stage that made it; every pthread_cond_signal is an event of the stage
 * that made it; blame.condvar of a stage = the waiting on each condition variable in
 * (previous signal, its signal]; idleness.condvar = the waits until the signal that woke
 * them. The rest of a wait, retaking the mutex the signaller still holds and being
 * scheduled, is printed apart: blameprof shows the mutex part as idleness.mutex (and it
 * grows under the profiler, whose signaller records its blame before it unlocks).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_FRAG, F_COMP, F_WRITE, NFUNC };
static const char *const FNAME[NFUNC] = {"fragment_stage", "compress_stage", "write_stage"};

#define QCAP 4
#define FRAG_NS 150000ull
#define COMP_NS 1000000ull
#define WRITE_NS 150000ull

typedef struct {
    pthread_mutex_t m;
    pthread_cond_t not_empty, not_full;
    int64_t items[QCAP];
    int head, count;
    int obj_not_empty, obj_not_full; /* truth object ids */
} queue_t;

static queue_t q1, q2;
static int nitems;

static void queue_init(queue_t *q, int id) {
    pthread_mutex_init(&q->m, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->head = q->count = 0;
    q->obj_not_empty = 2 * id;
    q->obj_not_full = 2 * id + 1;
}

NOINL void queue_put(queue_t *q, int64_t item, tlog_t *l, int fn) {
    pthread_mutex_lock(&q->m);
    while (q->count == QCAP) {
        uint64_t a = now_ns();
        pthread_cond_wait(&q->not_full, &q->m);
        ob_wait(l, fn, q->obj_not_full, a, now_ns());
    }
    q->items[(q->head + q->count) % QCAP] = item;
    q->count++;
    ob_event(l, fn, q->obj_not_empty, now_ns());
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->m);
}

NOINL int64_t queue_get(queue_t *q, tlog_t *l, int fn) {
    pthread_mutex_lock(&q->m);
    while (q->count == 0) {
        uint64_t a = now_ns();
        pthread_cond_wait(&q->not_empty, &q->m);
        ob_wait(l, fn, q->obj_not_empty, a, now_ns());
    }
    int64_t item = q->items[q->head];
    q->head = (q->head + 1) % QCAP;
    q->count--;
    ob_event(l, fn, q->obj_not_full, now_ns());
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->m);
    return item;
}

NOINL void fragment_stage(tlog_t *l) {
    for (int i = 0; i < nitems; i++) {
        busy_for(FRAG_NS, (unsigned)i);
        queue_put(&q1, i, l, F_FRAG);
    }
    queue_put(&q1, -1, l, F_FRAG);
}

NOINL void compress_stage(tlog_t *l) {
    for (;;) {
        int64_t item = queue_get(&q1, l, F_COMP);
        if (item >= 0)
            busy_for(COMP_NS, (unsigned)item);
        queue_put(&q2, item, l, F_COMP);
        if (item < 0)
            return;
    }
}

NOINL void write_stage(tlog_t *l) {
    int64_t sum = 0;
    for (;;) {
        int64_t item = queue_get(&q2, l, F_WRITE);
        if (item < 0)
            break;
        busy_for(WRITE_NS, (unsigned)item);
        sum += item;
    }
    wt_sink[0] += (uint64_t)sum;
}

/* The start routine: the stages are functions of their own, so that the joins' blame
 * (charged to the start routine when it returns) stays off them. */
static void *stage_thread(void *arg) {
    tlog_t *l = arg;
    if (l->index == F_FRAG)
        fragment_stage(l);
    else if (l->index == F_COMP)
        compress_stage(l);
    else
        write_stage(l);
    wt_sink[1 + l->index]++;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "syncperf_pipeline");
    nitems = (int)(1200 * scale + 0.5);
    if (nitems < 10)
        nitems = 10;
    queue_init(&q1, 0);
    queue_init(&q2, 1);
    uint64_t wall;
    tlog_t *logs = wl_run_logged(NFUNC, stage_thread, (size_t)nitems * 3 + 20, &wall);
    if (!logs)
        return 2;

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0};
    uint64_t nobody = ob_event_truth(logs, NFUNC, 4, "syncperf_pipeline", blame, idle);
    if (nobody == UINT64_MAX)
        return 2;
    printf("syncperf_pipeline: %.2f s, %d items, after the last signal (mutex retake,"
           " scheduling) %.3f ms\n",
           wall / 1e9, nitems, nobody / 1e6);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-14s waited=%.3f s blame=%.3f s\n", FNAME[f], idle[f] / 1e9, blame[f] / 1e9);
    wl_truth_pairs("condvar", FNAME, NFUNC, blame, idle);
    wl_truth_end("compress_stage", "fragment_stage,compress_stage,write_stage", (uint64_t)nitems);
    return 0;
}
