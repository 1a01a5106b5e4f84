/* obj_truth.h: ground truth over several lock / wait objects at once, for the scoreboard
 * workloads in benchmarks/workloads/ (all the C ones but scale_locks.c). Built on
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
 *   - wl_scale(), wl_scale_max(): the `[scale]` argument;
 *   - wl_run_threads(): starts N threads (thread i given the i-th of an array of arguments,
 *                  e.g. the logs), joins them, and measures the wall time; wl_run_logged():
 *                  the same with N new logs, thread i given &logs[i];
 *   - wl_mix(): a 64-bit mixer, for deterministic pseudo-random numbers;
 *   - truth_ns(): one `truth <metric> <fn> <ns>` line; wl_truth_pairs(): `truth blame.<kind>`
 *                  and `truth idleness.<kind>` of every function; wl_truth_major(): the lines
 *                  of one metric for the functions with at least 2% of its total;
 *                  ob_mutex_lines(): the per-function summary of ob_mutex_truth()'s result;
 *                  wl_truth_end(): the `truth culprit`, `truth candidates` and `truth ops` lines.
 * Include it after the system headers (and after _GNU_SOURCE). It includes wait_truth.h (NOINL,
 * busy_for, wt_sink) unless OBJ_TRUTH_NO_WAIT_TRUTH is defined first (a workload with a
 * busy_for of its own: madness.c), then only truth_log.h.
 */
#ifndef OBJ_TRUTH_H
#define OBJ_TRUTH_H

#ifdef OBJ_TRUTH_NO_WAIT_TRUTH
#include "truth_log.h"
#else
#include "wait_truth.h"
#endif

#include <pthread.h>

/* The workload's `[scale]` argument (default 1.0), in (0, max]; exits with status 2 on a bad
 * one. */
static inline double wl_scale_max(int argc, char **argv, const char *prog, double max) {
    double s = argc > 1 ? atof(argv[1]) : 1.0;
    if (!(s > 0) || s > max) {
        fprintf(stderr, "usage: %s [scale]\n", prog);
        exit(2);
    }
    return s;
}

static inline double wl_scale(int argc, char **argv, const char *prog) {
    return wl_scale_max(argc, argv, prog, 1000);
}

/* Starts `n` threads, thread i running fn(args + i * size) (e.g. `logs, sizeof *logs`: thread
 * i gets &logs[i]), and joins them all; *wall is the time from before the first start to after
 * the last join. -1 (after perror) if a thread could not start: the caller exits. */
static inline int wl_run_threads(int n, void *(*fn)(void *), void *args, size_t size,
                                 uint64_t *wall) {
    pthread_t *th = malloc((size_t)n * sizeof *th);
    if (!th) {
        perror("malloc");
        return -1;
    }
    uint64_t t0 = now_ns();
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, fn, (char *)args + (size_t)i * size) != 0) {
            perror("pthread_create");
            return -1;
        }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    *wall = now_ns() - t0;
    free(th);
    return 0;
}

/* truth_alloc_logs(n, cap), then wl_run_threads() with thread i given &logs[i]: the logs, NULL
 * (after a message) on failure. */
static inline tlog_t *wl_run_logged(int n, void *(*fn)(void *), size_t cap, uint64_t *wall) {
    tlog_t *logs = truth_alloc_logs(n, cap);
    if (!logs || wl_run_threads(n, fn, logs, sizeof *logs, wall))
        return NULL;
    return logs;
}

/* A 64-bit mixer (MurmurHash3's finalizer): the workloads' deterministic pseudo-random
 * numbers. */
static inline uint64_t wl_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline void truth_ns(const char *metric, const char *fn, uint64_t ns) {
    printf("truth %s %s %llu\n", metric, fn, (unsigned long long)ns);
}

/* For each of the `n` functions `fname`: `truth blame.<kind> <fn> <ns>`, then
 * `truth idleness.<kind> <fn> <ns>`. */
static inline void wl_truth_pairs(const char *kind, const char *const *fname, int n,
                                  const uint64_t *blame, const uint64_t *idle) {
    char b[64], i[64];
    snprintf(b, sizeof b, "blame.%s", kind);
    snprintf(i, sizeof i, "idleness.%s", kind);
    for (int f = 0; f < n; f++) {
        truth_ns(b, fname[f], blame[f]);
        truth_ns(i, fname[f], idle[f]);
    }
}

/* `truth <metric> <fn> <ns>` for those of the `n` functions that carry at least 2% of the
 * total of `v` (the others are a few ms or less: noise at any tolerance); returns the total. */
static inline uint64_t wl_truth_major(const char *metric, const char *const *fname, int n,
                                      const uint64_t *v) {
    uint64_t total = 0;
    for (int f = 0; f < n; f++)
        total += v[f];
    for (int f = 0; f < n; f++)
        if (v[f] * 50 >= total)
            truth_ns(metric, fname[f], v[f]);
    return total;
}

/* The lines that end every workload's truth: its culprit, its candidates (comma-separated)
 * and the operations done. */
static inline void wl_truth_end(const char *culprit, const char *candidates, uint64_t ops) {
    printf("truth culprit %s\n", culprit);
    printf("truth candidates %s\n", candidates);
    printf("truth ops %llu\n", (unsigned long long)ops);
}

/* Per function, "  <fn> contended_waits=<n> waited=<t> blame=<t>" (ob_mutex_truth()'s result),
 * the times in ms if `ms`, else in s, the names padded to the longest. */
static inline void ob_mutex_lines(const char *const *fname, int n, const uint64_t *contended,
                                  const uint64_t *idle, const uint64_t *blame, int ms) {
    int width = 0;
    for (int f = 0; f < n; f++)
        if ((int)strlen(fname[f]) > width)
            width = (int)strlen(fname[f]);
    double unit = ms ? 1e6 : 1e9;
    const char *u = ms ? "ms" : "s";
    for (int f = 0; f < n; f++)
        printf("  %-*s contended_waits=%llu waited=%.3f %s blame=%.3f %s\n", width, fname[f],
               (unsigned long long)contended[f], idle[f] / unit, u, blame[f] / unit, u);
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
    size_t total;
    ival_t *all = truth_merge_holds(logs, n, &total); /* sorted by start, */
    size_t *first = calloc((size_t)nobj + 1, sizeof *first);
    if (!all || !first)
        return NULL;
    qsort(all, total, sizeof *all, ob_by_obj_start); /* then by (object, start) */
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
