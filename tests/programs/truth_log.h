/* truth_log.h: the ground-truth lock logging shared by the lock workloads (lookup_insert.c,
 * three_holders.c, recursive_hold.c, task_queue.c), and the base of wait_truth.h. It provides
 *   - ival_t, one logged interval, and tlog_t, one thread's preallocated logs of waits and of
 *     holds (or, for wait_truth.h, of wake events); no locks are taken for logging;
 *   - clock_ns(), now_ns() (CLOCK_MONOTONIC) and cpu_ns() (CLOCK_THREAD_CPUTIME_ID);
 *   - log_iv(), logging one wait [lock called, returned] and its hold [returned, unlock called];
 *   - truth_alloc_logs(), truth_overflowed(), truth_merge_holds() (all holds, sorted by start),
 *     truth_hold_totals(), truth_first_hold() / truth_overlap(), and truth_wait_blame(): per
 *     holder function, the sum over all waits of overlap(wait, hold) (blame truth), and the
 *     wait time per waiter function (idleness truth). Nothing is subtracted.
 *     truth_mutex_totals() does all of it at once.
 * Include it after the system headers (and after _GNU_SOURCE).
 */
#ifndef TRUTH_LOG_H
#define TRUTH_LOG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One interval [a, b] (CLOCK_MONOTONIC ns) of function (or tag) `fn`; `cpu` is the thread
 * CPU time over a wait where the program measures it, else 0. */
typedef struct {
    uint64_t a, b, cpu;
    int fn;
} ival_t;

/* One thread's logs: waits[i] for nwaits entries of `cap`, and holds[i] for nholds (the
 * lock workloads) or, under their other names, wake events[i] for nevents (wait_truth.h). */
typedef struct {
    ival_t *waits;
    union {
        ival_t *holds, *events;
    };
    size_t nwaits;
    union {
        size_t nholds, nevents;
    };
    size_t cap;
    int overflow, index;
} tlog_t;

static inline uint64_t clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static inline uint64_t cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

/* Logs the wait [w0, h0] and the hold [h0, h1] of `fn`. */
static inline void log_iv(tlog_t *l, int fn, uint64_t w0, uint64_t h0, uint64_t h1) {
    if (l->nholds >= l->cap || l->nwaits >= l->cap) {
        l->overflow = 1;
        return;
    }
    l->waits[l->nwaits++] = (ival_t){w0, h0, 0, fn};
    l->holds[l->nholds++] = (ival_t){h0, h1, 0, fn};
}

/* `n` logs of `cap` intervals each, touched now so that page faults do not land inside the
 * measurement; NULL (after perror) on failure. */
static inline tlog_t *truth_alloc_logs(int n, size_t cap) {
    tlog_t *logs = calloc((size_t)n, sizeof *logs);
    if (!logs) {
        perror("calloc");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        logs[i].cap = cap;
        logs[i].index = i;
        logs[i].holds = calloc(cap, sizeof(ival_t));
        logs[i].waits = calloc(cap, sizeof(ival_t));
        if (!logs[i].holds || !logs[i].waits) {
            perror("calloc");
            return NULL;
        }
        memset(logs[i].holds, 0, cap * sizeof(ival_t));
        memset(logs[i].waits, 0, cap * sizeof(ival_t));
    }
    return logs;
}

/* Whether any of `n` logs overflowed (after a message "<prog>: log overflow"). */
static inline int truth_overflowed(const tlog_t *logs, int n, const char *prog) {
    for (int i = 0; i < n; i++)
        if (logs[i].overflow) {
            fprintf(stderr, "%s: log overflow\n", prog);
            return 1;
        }
    return 0;
}

static inline int by_start(const void *x, const void *y) {
    const ival_t *a = x, *b = y;
    return (a->a > b->a) - (a->a < b->a);
}

/* All the holds (wake events) of `n` logs, sorted by start, their number in *nh. NULL if
 * memory ran out. */
static inline ival_t *truth_merge_holds(const tlog_t *logs, int n, size_t *nh) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += logs[i].nholds;
    ival_t *holds = malloc((total + 1) * sizeof *holds);
    if (!holds)
        return NULL;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(holds + k, logs[i].holds, logs[i].nholds * sizeof *holds);
        k += logs[i].nholds;
    }
    qsort(holds, total, sizeof *holds, by_start);
    *nh = total;
    return holds;
}

/* Per function: total hold time (held) and number of holds (count). */
static inline void truth_hold_totals(const ival_t *holds, size_t nh, uint64_t *held,
                                     uint64_t *count) {
    for (size_t h = 0; h < nh; h++) {
        held[holds[h].fn] += holds[h].b - holds[h].a;
        count[holds[h].fn]++;
    }
}

/* Index of the first of the sorted, non-overlapping `holds` that ends after `t` (of sorted
 * wake events: the first one after `t`). */
static inline size_t truth_first_hold(const ival_t *holds, size_t nh, uint64_t t) {
    size_t lo = 0, hi = nh;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (holds[mid].b <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Length of the overlap of intervals `h` and `w` (0 if none). */
static inline uint64_t truth_overlap(const ival_t *h, const ival_t *w) {
    uint64_t s = h->a > w->a ? h->a : w->a;
    uint64_t e = h->b < w->b ? h->b : w->b;
    return e > s ? e - s : 0;
}

/* Over all waits of `n` logs: idle[waiter fn] += wait time, blame[holder fn] += overlap of the
 * wait with each hold, and (if `contended` is not NULL) contended[waiter fn] counts the waits
 * that overlap some hold. */
static inline void truth_wait_blame(const tlog_t *logs, int n, const ival_t *holds, size_t nh,
                                    uint64_t *blame, uint64_t *idle, uint64_t *contended) {
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            idle[w.fn] += w.b - w.a;
            int any = 0;
            for (size_t h = truth_first_hold(holds, nh, w.a); h < nh && holds[h].a < w.b; h++) {
                uint64_t o = truth_overlap(&holds[h], &w);
                if (o) {
                    blame[holds[h].fn] += o;
                    any = 1;
                }
            }
            if (contended)
                contended[w.fn] += any;
        }
    }
}

/* The spread of the truth, for tests of sampled estimates (a sampler that keeps each wait,
 * or each hold, with probability p and scales it by 1/p has a variance of (1 - p) / p times
 * the sum of the squares of what it keeps). Over the waits of `n` logs and the sorted,
 * non-overlapping `holds`, in us^2, per holder function: wait_sq[fn] = sum over waits of the
 * square of the wait's overlap with that function's holds, hold_sq[fn] = sum over its holds
 * of the square of the waiting each overlapped; and *idle_sq = sum of the squared waits.
 * On a quiet machine these are small; when the machine preempts holders mid-hold, a few
 * long waits dominate them. -1 if memory ran out, else 0. */
static inline int truth_spread(const tlog_t *logs, int n, const ival_t *holds, size_t nh,
                               int nfunc, uint64_t *wait_sq, uint64_t *hold_sq,
                               uint64_t *idle_sq) {
    double *per_hold = calloc(nh + 1, sizeof *per_hold);
    double *per_fn = calloc((size_t)nfunc, sizeof *per_fn);
    if (!per_hold || !per_fn) {
        free(per_hold);
        free(per_fn);
        return -1;
    }
    double idle = 0, *wsq = calloc((size_t)nfunc, sizeof *wsq);
    if (!wsq) {
        free(per_hold);
        free(per_fn);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            double len = (w.b - w.a) / 1e3;
            idle += len * len;
            memset(per_fn, 0, (size_t)nfunc * sizeof *per_fn);
            for (size_t h = truth_first_hold(holds, nh, w.a); h < nh && holds[h].a < w.b; h++) {
                double o = truth_overlap(&holds[h], &w) / 1e3;
                per_fn[holds[h].fn] += o;
                per_hold[h] += o;
            }
            for (int f = 0; f < nfunc; f++)
                wsq[f] += per_fn[f] * per_fn[f];
        }
    }
    for (int f = 0; f < nfunc; f++)
        wait_sq[f] = (uint64_t)wsq[f], hold_sq[f] = 0;
    for (size_t h = 0; h < nh; h++)
        hold_sq[holds[h].fn] += (uint64_t)(per_hold[h] * per_hold[h]);
    *idle_sq = (uint64_t)idle;
    free(per_hold);
    free(per_fn);
    free(wsq);
    return 0;
}

/* truth_spread() of a mutex workload's `n` logs, merging their holds itself. -1 if memory
 * ran out, else 0. */
static inline int truth_mutex_spread(const tlog_t *logs, int n, int nfunc, uint64_t *wait_sq,
                                     uint64_t *hold_sq, uint64_t *idle_sq) {
    size_t nh;
    ival_t *holds = truth_merge_holds(logs, n, &nh);
    if (!holds)
        return -1;
    int rc = truth_spread(logs, n, holds, nh, nfunc, wait_sq, hold_sq, idle_sq);
    free(holds);
    return rc;
}

/* The truth of one mutex workload's `n` logs, all at once, per function: blame, idle (wait
 * time), held (hold time), count (holds) and, if not NULL, contended (waits that overlap a
 * hold); see truth_wait_blame(). -1 (after a message) if a log overflowed, else 0. */
static inline int truth_mutex_totals(const tlog_t *logs, int n, const char *prog, uint64_t *blame,
                                     uint64_t *idle, uint64_t *held, uint64_t *count,
                                     uint64_t *contended) {
    size_t nh;
    if (truth_overflowed(logs, n, prog))
        return -1;
    ival_t *holds = truth_merge_holds(logs, n, &nh);
    if (!holds)
        return -1;
    truth_hold_totals(holds, nh, held, count);
    truth_wait_blame(logs, n, holds, nh, blame, idle, contended);
    free(holds);
    return 0;
}

#endif
