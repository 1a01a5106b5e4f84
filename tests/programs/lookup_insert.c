/* lookup_insert: a table under one pthread mutex. LOOKUPS threads call a short `lookup`
 * (about 20 us under the lock) in a loop; one thread calls a rare, long `insert` (5 ms under
 * the lock every 20 ms). The lookups are the victims (they wait), insert is the perpetrator.
 *
 * Usage: lookup_insert [seconds=1.5] [lookups=3] [lookup_hold_us=20] [lookup_gap_us=40]
 *                      [direct|wrapped]
 * (holds of a few µs with no gap: the lookups queue on the lock, and every unlock has
 * microseconds of waiting to blame; `wrapped`: both lock and unlock through the program's
 * own helpers, `lock_measured` and `unlock_measured`, as real code wraps its locks)
 *
 * Ground truth, measured by the program itself with CLOCK_MONOTONIC into preallocated
 * per-thread arrays (no locks taken for logging):
 *   - every hold interval [lock returned, unlock called] per holder function;
 *   - every wait interval [pthread_mutex_lock called, returned] per waiter function.
 * At the end, for each holder function, the sum over all waits of overlap(wait, hold) is the
 * waiter time during its holds (blame truth), and the total wait time per waiter function is
 * the idleness truth. Nothing is subtracted. Prints
 *   truth blame_insert_ns=.. blame_lookup_ns=.. idle_lookup_ns=.. idle_insert_ns=.. ...
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_LOOKUP, F_INSERT, NFUNC };
static const char *const FNAME[NFUNC] = {"lookup", "insert"};

static uint64_t lookup_hold_ns = 20000, lookup_gap_ns = 40000;
#define INSERT_HOLD_NS 5000000ull
#define INSERT_PERIOD_NS 20000000ull

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline;
static int wrapped;

/* The program's own lock helpers, which both callers share. */
NOINL void lock_measured(pthread_mutex_t *m) { pthread_mutex_lock(m); }
NOINL void unlock_measured(pthread_mutex_t *m) { pthread_mutex_unlock(m); }

/* Macros, not functions: an inlined helper is a frame of its own in the debug info (and,
 * shared by both callers, a wrapper the profile names). */
#define TAKE(m) (wrapped ? lock_measured(m) : (void)pthread_mutex_lock(m))
#define GIVE(m) (wrapped ? unlock_measured(m) : (void)pthread_mutex_unlock(m))

NOINL void lookup(tlog_t *l, unsigned key) {
    uint64_t w0 = now_ns();
    TAKE(&table_lock);
    uint64_t h0 = now_ns();
    busy_for(lookup_hold_ns, key); /* search the table */
    uint64_t h1 = now_ns();
    GIVE(&table_lock);
    log_iv(l, F_LOOKUP, w0, h0, h1);
}

NOINL void insert(tlog_t *l, unsigned key) {
    uint64_t w0 = now_ns();
    TAKE(&table_lock);
    uint64_t h0 = now_ns();
    busy_for(INSERT_HOLD_NS, key); /* rebuild the table */
    uint64_t h1 = now_ns();
    GIVE(&table_lock);
    log_iv(l, F_INSERT, w0, h0, h1);
}

static void *lookup_thread(void *arg) {
    tlog_t *l = arg;
    unsigned key = (unsigned)(uintptr_t)l;
    while (now_ns() < deadline) {
        lookup(l, key++);
        if (lookup_gap_ns)
            busy_for(lookup_gap_ns, key); /* use the result */
    }
    return NULL;
}

static void *insert_thread(void *arg) {
    tlog_t *l = arg;
    unsigned key = 7;
    uint64_t next = now_ns() + INSERT_PERIOD_NS;
    while (next < deadline) {
        struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        insert(l, key++);
        next += INSERT_PERIOD_NS;
    }
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.5;
    int nlookup = argc > 2 ? atoi(argv[2]) : 3;
    if (argc > 3)
        lookup_hold_ns = (uint64_t)(atof(argv[3]) * 1000);
    if (argc > 4)
        lookup_gap_ns = (uint64_t)(atof(argv[4]) * 1000);
    if (argc > 5)
        wrapped = strcmp(argv[5], "wrapped") == 0;
    if (secs <= 0 || nlookup < 1 || nlookup > 64 || lookup_hold_ns == 0 ||
        (argc > 5 && !wrapped && strcmp(argv[5], "direct") != 0)) {
        fprintf(stderr, "usage: lookup_insert [seconds] [lookup-threads] [hold-us] [gap-us] "
                        "[direct|wrapped]\n");
        return 2;
    }
    int nthreads = nlookup + 1;
    /* One log entry per lookup: at most one per hold + gap of wall time. */
    size_t cap = (size_t)(secs * 1e9 / (double)(lookup_hold_ns + lookup_gap_ns)) + 1000;
    tlog_t *logs = truth_alloc_logs(nthreads, cap);
    if (!logs)
        return 2;
    uint64_t t_start = now_ns();
    deadline = t_start + (uint64_t)(secs * 1e9);
    pthread_t th[65];
    for (int i = 0; i < nthreads; i++) {
        void *(*fn)(void *) = i < nlookup ? lookup_thread : insert_thread;
        if (pthread_create(&th[i], NULL, fn, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);

    /* The holds never overlap (one mutex): merged and sorted by start, then met by the waits. */
    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, nhold[NFUNC] = {0};
    uint64_t contended[NFUNC] = {0};
    if (truth_mutex_totals(logs, nthreads, "lookup_insert", blame, idle, held, nhold, contended))
        return 2;
    /* The truth's spread (truth_log.h): how far a sampled estimate of it may fall. */
    uint64_t wait_sq[NFUNC], hold_sq[NFUNC], idle_sq;
    if (truth_mutex_spread(logs, nthreads, NFUNC, wait_sq, hold_sq, &idle_sq))
        return 2;
    uint64_t wall = now_ns() - t_start;
    printf("lookup_insert: %.2f s, %d lookup threads + 1 insert thread\n", wall / 1e9, nlookup);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-7s holds=%llu held=%.3f s contended_waits=%llu waited=%.3f s blame=%.3f s\n",
               FNAME[f], (unsigned long long)nhold[f], held[f] / 1e9,
               (unsigned long long)contended[f], idle[f] / 1e9, blame[f] / 1e9);
    printf("truth blame_insert_ns=%llu blame_lookup_ns=%llu idle_lookup_ns=%llu idle_insert_ns=%llu"
           " holds_insert=%llu holds_lookup=%llu held_insert_ns=%llu held_lookup_ns=%llu"
           " wall_ns=%llu wait_sq_lookup_us2=%llu hold_sq_lookup_us2=%llu"
           " wait_sq_insert_us2=%llu hold_sq_insert_us2=%llu idle_sq_us2=%llu\n",
           (unsigned long long)blame[F_INSERT], (unsigned long long)blame[F_LOOKUP],
           (unsigned long long)idle[F_LOOKUP], (unsigned long long)idle[F_INSERT],
           (unsigned long long)nhold[F_INSERT], (unsigned long long)nhold[F_LOOKUP],
           (unsigned long long)held[F_INSERT], (unsigned long long)held[F_LOOKUP],
           (unsigned long long)wall, (unsigned long long)wait_sq[F_LOOKUP],
           (unsigned long long)hold_sq[F_LOOKUP], (unsigned long long)wait_sq[F_INSERT],
           (unsigned long long)hold_sq[F_INSERT], (unsigned long long)idle_sq);
    return 0;
}
