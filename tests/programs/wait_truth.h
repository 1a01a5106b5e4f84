/* wait_truth.h: ground truth for the wait workloads (condvar_pc.c, rwlock_writer.c,
 * barrier_straggler.c, sem_pc.c, join_waits.c, futex_lock.c, timed_waits.c), on top of
 * truth_log.h. It adds
 *   - NOINL, and busy_for(): wall-clock CPU burning (the "work" of a critical section or a
 *     producer; the lock workloads use it too);
 *   - wt_wait(), wt_event(): logging to one thread's tlog_t (truth_alloc_logs(); check it
 *     with truth_overflowed()) a wait (ival_t: [blocking call made, returned], fn = the
 *     waiter's function) or a wake event (ival_t with a == b: the moment just before a
 *     signal / broadcast / post / FUTEX_WAKE / last barrier arrival, fn = the culprit
 *     function); no locks are taken for logging;
 *   - wt_event_blame(): the blame truth of "each wake takes the waiting accumulated since the
 *     previous one": with all wake events sorted by time, the part of every wait that lies in
 *     (event[i-1], event[i]] is charged to event[i]'s function. What a wait spends after the
 *     last event before it returned (scheduling, re-acquiring a mutex) is nobody's.
 *   - wt_wait_totals(): per waiter function, total waiting and number of waits.
 * Include it after the system headers (and after _GNU_SOURCE).
 */
#ifndef WAIT_TRUTH_H
#define WAIT_TRUTH_H

#include "truth_log.h"

#define NOINL __attribute__((noinline, noclone))

static volatile uint64_t wt_sink[1024];

/* Burns the CPU for `ns` of wall-clock time. */
static NOINL __attribute__((unused)) void busy_for(uint64_t ns, unsigned seed) {
    uint64_t end = now_ns() + ns;
    unsigned x = seed | 1;
    do {
        for (int i = 0; i < 64; i++) {
            x = x * 1103515245u + 12345u;
            wt_sink[x & 1023] += x;
        }
    } while (now_ns() < end);
}

/* Logs the wait [a, b] of waiter function `fn`. */
static inline void wt_wait(tlog_t *l, int fn, uint64_t a, uint64_t b) {
    if (l->nwaits >= l->cap) {
        l->overflow = 1;
        return;
    }
    l->waits[l->nwaits++] = (ival_t){a, b, 0, fn};
}

/* Logs a wake event of culprit function `fn` at time `t`. */
static inline void wt_event(tlog_t *l, int fn, uint64_t t) {
    if (l->nevents >= l->cap) {
        l->overflow = 1;
        return;
    }
    l->events[l->nevents++] = (ival_t){t, t, 0, fn};
}

/* Per waiter function: idle[fn] += wait time, count[fn] += 1 (count may be NULL). */
static inline void wt_wait_totals(const tlog_t *logs, int n, uint64_t *idle, uint64_t *count) {
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            idle[logs[i].waits[j].fn] += logs[i].waits[j].b - logs[i].waits[j].a;
            if (count)
                count[logs[i].waits[j].fn]++;
        }
}

/* Blame truth of the wake events of `n` logs (see the header comment): blame[event fn] +=
 * the waiting in (previous event, event]. Returns the waiting nobody is charged with (after
 * the last event before each wait ended), or UINT64_MAX if memory ran out. */
static inline uint64_t wt_event_blame(const tlog_t *logs, int n, uint64_t *blame) {
    size_t total;
    ival_t *ev = truth_merge_holds(logs, n, &total); /* the events, in the holds' place */
    if (!ev)
        return UINT64_MAX;
    uint64_t nobody = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            uint64_t from = w.a;
            /* from the first event after w.a (events are points: a == b) */
            for (size_t e = truth_first_hold(ev, total, w.a); e < total && ev[e].a <= w.b; e++) {
                blame[ev[e].fn] += ev[e].a - from;
                from = ev[e].a;
            }
            nobody += w.b - from;
        }
    free(ev);
    return nobody;
}

#endif
