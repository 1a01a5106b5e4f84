/* syncperf_fine: very many fine-grained locks, acquired very often, almost never contended
 * (SyncPerf, Alam et al., Q4 locks, "Improper Granularity" / "Improper Primitives": PARSEC
 * fluidanimate has "92K distinct locks" and "acquires more than 1,700M locks during its 40
 * second execution"; one lock per grid cell, each thread working on its own part of the
 * grid, the cells on the border between parts shared). This workload mostly measures the
 * profiler's overhead on tens of millions of lock operations per second; the little
 * contention there is has a known culprit.
 *
 * NCELL cells (64K), each with its own pthread mutex. THREADS threads each own a part of
 * the grid. Each thread makes OPS operations:
 *   - `update_cell`: a random cell of its own part: lock, a few arithmetic updates, unlock
 *     (never contended: nobody else touches the thread's own cells);
 *   - every BORDER_EVERY-th operation, `update_border`: a random one of the NBORDER cells
 *     shared by all threads, held about BORDER_NS;
 *   - every REBUILD_EVERY-th operation, `rebuild_border`: a random border cell held
 *     REBUILD_NS while its neighbour lists are rebuilt: the longest holds on shared cells,
 *     so the other threads' update_border calls wait for it (the culprit by design; the
 *     truth's culprit line names the function with the most measured blame, as a holder
 *     preempted inside update_border on a busy machine can outweigh it).
 *
 * Usage: syncperf_fine [scale=1.0]   (scale 1.0: 2 x 16M lock operations, about 1.5 s)
 *
 * Truth (obj_truth.h): every border-cell wait [lock called, returned] and hold [returned,
 * unlock called], with its cell, CLOCK_MONOTONIC; per cell, blame.mutex of a function = the
 * overlap of the waits on that cell with its holds; idleness.mutex = its contended waits.
 * update_cell's own cells are never contended: its truth is 0. The blame here is tiny (a
 * few ms of µs-long waits), so the profiler's own work inside critical sections weighs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_CELL, F_BORDER, F_REBUILD, NFUNC };
static const char *const FNAME[NFUNC] = {"update_cell", "update_border", "rebuild_border"};

#define THREADS 2
#define NCELL 65536
#define NBORDER 8
#define BORDER_EVERY 256
#define REBUILD_EVERY 2048
#define BORDER_NS 300ull
#define REBUILD_NS 30000ull

typedef struct {
    pthread_mutex_t m;
    double density, pressure;
    uint64_t n;
} cell_t;

static cell_t *cells;
static long ops;

static inline uint64_t xs(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* An interior cell of thread `t`'s part (the border cells, 0..NBORDER-1, excluded). */
NOINL void update_cell(int t, uint64_t r) {
    unsigned part = (NCELL - NBORDER) / THREADS;
    cell_t *c = &cells[NBORDER + (unsigned)t * part + (unsigned)(r % part)];
    pthread_mutex_lock(&c->m);
    c->density += 0.5;
    c->pressure = c->pressure * 0.99 + c->density;
    c->n++;
    pthread_mutex_unlock(&c->m);
}

static inline __attribute__((always_inline)) void border_op(tlog_t *l, int fn, unsigned i,
                                                            uint64_t ns) {
    cell_t *c = &cells[i];
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&c->m);
    uint64_t h0 = now_ns();
    busy_for(ns, i);
    c->density += 1.0;
    c->n++;
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&c->m);
    ob_hold(l, fn, (int)i, w0, h0, h1);
}

NOINL void update_border(tlog_t *l, uint64_t r) {
    border_op(l, F_BORDER, (unsigned)(r % NBORDER), BORDER_NS);
}

NOINL void rebuild_border(tlog_t *l, uint64_t r) {
    border_op(l, F_REBUILD, (unsigned)(r % NBORDER), REBUILD_NS);
}

static void *worker(void *arg) {
    tlog_t *l = arg;
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(l->index + 1);
    for (long i = 1; i <= ops; i++) {
        uint64_t r = xs(&s);
        if (i % REBUILD_EVERY == 0)
            rebuild_border(l, r >> 7);
        else if (i % BORDER_EVERY == 0)
            update_border(l, r >> 7);
        else
            update_cell(l->index, r >> 7);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "syncperf_fine");
    ops = (long)(16e6 * scale);
    if (ops < REBUILD_EVERY * 4)
        ops = REBUILD_EVERY * 4;
    cells = calloc(NCELL, sizeof *cells);
    if (!cells)
        return 2;
    for (int i = 0; i < NCELL; i++)
        pthread_mutex_init(&cells[i].m, NULL);
    uint64_t wall;
    tlog_t *logs = wl_run_logged(THREADS, worker, (size_t)(ops / BORDER_EVERY) + 100, &wall);
    if (!logs)
        return 2;

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, contended[NFUNC] = {0};
    if (ob_mutex_truth(logs, THREADS, NBORDER, "syncperf_fine", blame, idle, contended))
        return 2;
    uint64_t total = (uint64_t)ops * THREADS;
    printf("syncperf_fine: %.2f s, %d threads, %llu lock operations (%.1f M/s) on %d mutexes\n",
           wall / 1e9, THREADS, (unsigned long long)total, total / (wall / 1e9) / 1e6, NCELL);
    ob_mutex_lines(FNAME, NFUNC, contended, idle, blame, 1);
    wl_truth_pairs("mutex", FNAME, NFUNC, blame, idle);
    /* rebuild_border by design; but a thread preempted while it holds a border cell in
     * update_border (the machine is shared) can make update_border the culprit of a run:
     * the culprit is the measured one. */
    wl_truth_end(FNAME[blame[F_BORDER] > blame[F_REBUILD] ? F_BORDER : F_REBUILD],
                 "update_cell,update_border,rebuild_border", total);
    return 0;
}
