/* lock_chain: a chain of waits. `lookup` threads wait for `table_lock`, held by `insert`,
 * which inside that hold waits for `log_lock`, held by `flush` computing flush_ms.
 *
 * The lookups' waiting is blamed on insert (it holds table_lock: the first hop), but while
 * insert itself waits for log_lock, what keeps the lookups waiting is flush: their waiting
 * in those stretches passes along the chain to flush (its root cause, issue 41), with
 * insert's own wait for log_lock.
 *
 * Usage: lock_chain [seconds=1.5] [lookups=2] [flush_ms=30]
 *
 * Ground truth (CLOCK_MONOTONIC, per-thread preallocated logs, no locks taken for logging):
 * every lookup's wait for table_lock; every insert's hold of table_lock and its wait for
 * log_lock inside it. Prints
 *   truth blame_insert_ns=<the lookups' waiting during insert's holds: insert's blame>
 *         insert_wait_ns=<insert's waiting for log_lock: flush's blame>
 *         passed_ns=<the lookups' waiting while insert waited for log_lock inside its hold>
 *         root_flush_ns=<insert_wait_ns + passed_ns> root_insert_ns=<blame_insert_ns -
 *         passed_ns> lookup_wait_ns=.. inserts=.. wall_ns=..
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

#define INSERT_WORK_NS 1000000ull
#define APPEND_NS 200000ull
#define INSERT_GAP_NS 4000000ull
#define LOOKUP_HOLD_NS 50000ull
#define LOOKUP_GAP_NS 1000000ull
#define FLUSH_GAP_NS 10000000ull
#define MAX_LOG 100000

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline, flush_ns = 30000000ull;
static volatile int stop;

typedef struct {
    uint64_t a, b;
} span_t;

typedef struct {
    span_t *v;
    size_t n;
    int overflow;
} spans_t;

static void add(spans_t *s, uint64_t a, uint64_t b) {
    if (s->n >= MAX_LOG) {
        s->overflow = 1;
        return;
    }
    s->v[s->n++] = (span_t){a, b};
}

static spans_t insert_holds, insert_waits, lookup_waits[8];

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
}

NOINL void flush_log(unsigned round) {
    pthread_mutex_lock(&log_lock);
    busy_for(flush_ns, round); /* write the log out */
    pthread_mutex_unlock(&log_lock);
}

NOINL void append_log(unsigned key) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&log_lock);
    add(&insert_waits, w0, now_ns());
    busy_for(APPEND_NS, key);
    pthread_mutex_unlock(&log_lock);
}

NOINL void insert(unsigned key) {
    pthread_mutex_lock(&table_lock);
    uint64_t h0 = now_ns();
    busy_for(INSERT_WORK_NS, key); /* update the table */
    append_log(key);
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&table_lock);
    add(&insert_holds, h0, h1);
}

NOINL void lookup(spans_t *log, unsigned key) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&table_lock);
    add(log, w0, now_ns());
    busy_for(LOOKUP_HOLD_NS, key);
    pthread_mutex_unlock(&table_lock);
}

static void *flusher(void *arg) {
    (void)arg;
    for (unsigned r = 0; now_ns() < deadline; r++) {
        flush_log(r);
        sleep_ns(FLUSH_GAP_NS);
    }
    return NULL;
}

static void *inserter(void *arg) {
    (void)arg;
    for (unsigned k = 0; now_ns() < deadline; k++) {
        insert(k);
        sleep_ns(INSERT_GAP_NS);
    }
    return NULL;
}

static void *looker(void *arg) {
    spans_t *log = arg;
    for (unsigned k = 0; now_ns() < deadline; k++) {
        lookup(log, k);
        sleep_ns(LOOKUP_GAP_NS);
    }
    return NULL;
}

/* The part of [a, b] inside [c, d]. */
static uint64_t overlap(span_t x, span_t y) {
    uint64_t lo = x.a > y.a ? x.a : y.a, hi = x.b < y.b ? x.b : y.b;
    return hi > lo ? hi - lo : 0;
}

/* Sum over all pairs of the overlaps of `x`'s spans with `y`'s (both sorted by start). */
static uint64_t overlaps(const spans_t *x, const spans_t *y) {
    uint64_t sum = 0;
    size_t j0 = 0;
    for (size_t i = 0; i < x->n; i++) {
        while (j0 < y->n && y->v[j0].b <= x->v[i].a)
            j0++;
        for (size_t j = j0; j < y->n && y->v[j].a < x->v[i].b; j++)
            sum += overlap(x->v[i], y->v[j]);
    }
    return sum;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.5;
    int lookups = argc > 2 ? atoi(argv[2]) : 2;
    double fms = argc > 3 ? atof(argv[3]) : 30.0;
    if (seconds <= 0 || lookups < 1 || lookups > 8 || fms <= 0) {
        fprintf(stderr, "usage: lock_chain [seconds] [lookups] [flush_ms]\n");
        return 2;
    }
    flush_ns = (uint64_t)(fms * 1e6);
    spans_t *all[] = {&insert_holds, &insert_waits};
    for (int i = 0; i < 2; i++)
        all[i]->v = calloc(MAX_LOG, sizeof(span_t));
    for (int i = 0; i < lookups; i++)
        lookup_waits[i].v = calloc(MAX_LOG, sizeof(span_t));
    uint64_t t0 = now_ns();
    deadline = t0 + (uint64_t)(seconds * 1e9);
    pthread_t th[10];
    int n = 0;
    pthread_create(&th[n++], NULL, flusher, NULL);
    pthread_create(&th[n++], NULL, inserter, NULL);
    for (int i = 0; i < lookups; i++)
        pthread_create(&th[n++], NULL, looker, &lookup_waits[i]);
    /* Joined after the deadline, so that the joins' waiting (blamed on the joined threads'
     * work meanwhile) stays small beside the chain's. */
    sleep_ns(deadline - t0);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;

    int overflow = insert_holds.overflow | insert_waits.overflow;
    uint64_t blame_insert = 0, passed = 0, lookup_wait = 0, insert_wait = 0;
    for (size_t i = 0; i < insert_waits.n; i++)
        insert_wait += insert_waits.v[i].b - insert_waits.v[i].a;
    for (int i = 0; i < lookups; i++) {
        spans_t *w = &lookup_waits[i];
        overflow |= w->overflow;
        for (size_t j = 0; j < w->n; j++)
            lookup_wait += w->v[j].b - w->v[j].a;
        blame_insert += overlaps(w, &insert_holds);
        passed += overlaps(w, &insert_waits);
    }
    if (overflow) {
        fprintf(stderr, "lock_chain: logs overflowed\n");
        return 2;
    }
    printf("truth blame_insert_ns=%llu insert_wait_ns=%llu passed_ns=%llu root_flush_ns=%llu "
           "root_insert_ns=%llu lookup_wait_ns=%llu inserts=%zu wall_ns=%llu\n",
           (unsigned long long)blame_insert, (unsigned long long)insert_wait,
           (unsigned long long)passed, (unsigned long long)(insert_wait + passed),
           (unsigned long long)(blame_insert - passed), (unsigned long long)lookup_wait,
           insert_holds.n, (unsigned long long)wall);
    return 0;
}
