/* obj_truth.h: ground truth over several lock / wait objects at once, for the scoreboard
 * workloads in benchmarks/workloads/ (patros_*.c, syncperf_*.c, lockheavy.c). Built on
 * tests/programs/truth_log.h and wait_truth.h (compile with -I tests/programs).
 *
 * truth_log.h's helpers assume one object (one mutex, one condition variable). Here every
 * logged interval carries its object in ival_t.cpu (unused by the mutex and event logs), and
 * the truth is computed per object, then summed per function:
 *   - ob_hold():   a wait [lock called, returned] and its hold [returned, unlock called] of
 *                  function `fn` on mutex `obj`;
 *   - ob_wait():   a wait [a, b] of function `fn` on object `obj` (condition variables);
 *   - ob_event():  a wake event (signal, broadcast) of function `fn` on object `obj` at `t`;
 *   - ob_mutex_truth(): per function, blame = sum over the waits on each mutex of their
 *                  overlap with that mutex's holds by the function (blameprof's definition:
 *                  each holder takes the waiter-time of its own hold), idleness = the time of
 *                  the waits that overlap some hold (a wait that overlaps none found the lock
 *                  free: blameprof's trylock succeeded and nothing was measured);
 *   - ob_event_truth(): per function, blame = per object, the part of every wait in
 *                  (previous event, event] charged to the event's function (wait_truth.h's
 *                  rule, per object), idleness = the waits' time until the last event
 *                  before they returned: blameprof's condition-variable idleness ends when
 *                  the waiter is woken; what follows (retaking the mutex the signaller
 *                  holds, being scheduled) is idleness.mutex or nobody's, returned apart.
 *   - wl_scale(), truth_ns(): the `[scale]` argument and one `truth <metric> <fn> <ns>` line.
 * Include it after the system headers (and after _GNU_SOURCE).
 */
#ifndef OBJ_TRUTH_H
#define OBJ_TRUTH_H

#include "wait_truth.h"

/* The workload's `[scale]` argument (default 1.0); exits with status 2 on a bad one. */
static inline double wl_scale(int argc, char **argv, const char *prog) {
    double s = argc > 1 ? atof(argv[1]) : 1.0;
    if (!(s > 0) || s > 1000) {
        fprintf(stderr, "usage: %s [scale]\n", prog);
        exit(2);
    }
    return s;
}

static inline void truth_ns(const char *metric, const char *fn, uint64_t ns) {
    printf("truth %s %s %llu\n", metric, fn, (unsigned long long)ns);
}

static inline void ob_hold(tlog_t *l, int fn, int obj, uint64_t w0, uint64_t h0, uint64_t h1) {
    if (l->nholds >= l->cap || l->nwaits >= l->cap) {
        l->overflow = 1;
        return;
    }
    l->waits[l->nwaits++] = (ival_t){w0, h0, (uint64_t)obj, fn};
    l->holds[l->nholds++] = (ival_t){h0, h1, (uint64_t)obj, fn};
}

static inline void ob_wait(tlog_t *l, int fn, int obj, uint64_t a, uint64_t b) {
    if (l->nwaits >= l->cap) {
        l->overflow = 1;
        return;
    }
    l->waits[l->nwaits++] = (ival_t){a, b, (uint64_t)obj, fn};
}

static inline void ob_event(tlog_t *l, int fn, int obj, uint64_t t) {
    if (l->nevents >= l->cap) {
        l->overflow = 1;
        return;
    }
    l->events[l->nevents++] = (ival_t){t, t, (uint64_t)obj, fn};
}

static inline int ob_by_obj_start(const void *x, const void *y) {
    const ival_t *a = x, *b = y;
    if (a->cpu != b->cpu)
        return (a->cpu > b->cpu) - (a->cpu < b->cpu);
    return (a->a > b->a) - (a->a < b->a);
}

/* All holds (events) of `n` logs sorted by (object, start); first[o]..first[o+1] is object
 * o's range (objects 0..nobj-1). NULL on failure. */
static inline ival_t *ob_sorted(const tlog_t *logs, int n, int nobj, size_t **first_out) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += logs[i].nholds;
    ival_t *all = malloc((total + 1) * sizeof *all);
    size_t *first = calloc((size_t)nobj + 1, sizeof *first);
    if (!all || !first)
        return NULL;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(all + k, logs[i].holds, logs[i].nholds * sizeof *all);
        k += logs[i].nholds;
    }
    qsort(all, total, sizeof *all, ob_by_obj_start);
    size_t j = 0;
    for (int o = 0; o <= nobj; o++) {
        while (j < total && all[j].cpu < (uint64_t)o)
            j++;
        first[o] = j;
    }
    *first_out = first;
    return all;
}

/* Mutex truth (see the header comment); blame and idle are indexed by function. -1 on
 * overflow or lack of memory. `contended` (may be NULL) counts the contended waits. */
static inline int ob_mutex_truth(const tlog_t *logs, int n, int nobj, const char *prog,
                                 uint64_t *blame, uint64_t *idle, uint64_t *contended) {
    if (truth_overflowed(logs, n, prog))
        return -1;
    size_t *first;
    ival_t *holds = ob_sorted(logs, n, nobj, &first);
    if (!holds)
        return -1;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            const ival_t *h0 = holds + first[w.cpu];
            size_t nh = first[w.cpu + 1] - first[w.cpu];
            int any = 0;
            for (size_t h = truth_first_hold(h0, nh, w.a); h < nh && h0[h].a < w.b; h++) {
                uint64_t o = truth_overlap(&h0[h], &w);
                if (o) {
                    blame[h0[h].fn] += o;
                    any = 1;
                }
            }
            if (any) {
                idle[w.fn] += w.b - w.a;
                if (contended)
                    contended[w.fn]++;
            }
        }
    free(holds);
    free(first);
    return 0;
}

/* Event truth (see the header comment). Returns the waiting after the last event before
 * each wait ended (not in idle), UINT64_MAX on overflow or lack of memory. */
static inline uint64_t ob_event_truth(const tlog_t *logs, int n, int nobj, const char *prog,
                                      uint64_t *blame, uint64_t *idle) {
    if (truth_overflowed(logs, n, prog))
        return UINT64_MAX;
    size_t *first;
    ival_t *ev = ob_sorted(logs, n, nobj, &first);
    if (!ev)
        return UINT64_MAX;
    uint64_t nobody = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            const ival_t *e0 = ev + first[w.cpu];
            size_t ne = first[w.cpu + 1] - first[w.cpu];
            uint64_t from = w.a;
            for (size_t e = truth_first_hold(e0, ne, w.a); e < ne && e0[e].a <= w.b; e++) {
                blame[e0[e].fn] += e0[e].a - from;
                from = e0[e].a;
            }
            idle[w.fn] += from - w.a;
            nobody += w.b - from;
        }
    free(ev);
    free(first);
    return nobody;
}

#endif
