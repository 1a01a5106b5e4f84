/* rwlock_writer: a long writer blocks the readers of a pthread rwlock.
 *
 * The writer (`rewrite_table`) takes the write lock for write_ms of computing, then works
 * gap_ms outside the lock. `readers` threads (`lookup_table`) take the read lock for a few
 * microseconds and sleep READ_GAP_NS between lookups (they use little CPU, so on 2 CPUs
 * nobody waits long for a processor). The lock prefers writers
 * (PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), so the writer is not starved: readers
 * block while it holds the lock or waits for it, and briefly block the writer themselves.
 *
 * Usage: rwlock_writer [seconds=1] [readers=2] [write_ms=4] [gap_ms=1]
 *
 * Ground truth (CLOCK_MONOTONIC): each lock call's wait [called, returned] and each hold
 * [returned, unlock called]. Prints
 *   truth wait_readers_ns=<readers' rdlock waiting> blame_rewrite_ns=<readers' waiting that
 *         overlaps the writer's holds> wait_writer_ns=<writer's wrlock waiting>
 *         held_writer_ns=.. writes=.. reads=.. wall_ns=..
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_WRITER, F_READER, NFUNC };

#define READ_HOLD_NS 3000ull
#define READ_GAP_NS 200000ull

static pthread_rwlock_t rw;
static uint64_t deadline, write_ns = 4000000ull, gap_ns = 1000000ull;
static volatile uint64_t table[64];

/* One write: its hold is logged in `holds` (the writer's log), its wait in `l`. */
NOINL void rewrite_table(tlog_t *l, unsigned i) {
    uint64_t w0 = now_ns();
    pthread_rwlock_wrlock(&rw);
    uint64_t h0 = now_ns();
    busy_for(write_ns, i);
    table[i & 63] = i;
    uint64_t h1 = now_ns();
    pthread_rwlock_unlock(&rw);
    log_iv(l, F_WRITER, w0, h0, h1);
}

NOINL uint64_t lookup_table(tlog_t *l, unsigned i) {
    uint64_t w0 = now_ns();
    pthread_rwlock_rdlock(&rw);
    uint64_t h0 = now_ns();
    busy_for(READ_HOLD_NS, i);
    uint64_t v = table[i & 63];
    uint64_t h1 = now_ns();
    pthread_rwlock_unlock(&rw);
    log_iv(l, F_READER, w0, h0, h1);
    return v;
}

static void *writer_thread(void *arg) {
    tlog_t *l = arg;
    for (unsigned i = 0; now_ns() < deadline; i++) {
        rewrite_table(l, i);
        busy_for(gap_ns, i);
    }
    return NULL;
}

static void *reader_thread(void *arg) {
    tlog_t *l = arg;
    uint64_t sum = 0;
    for (unsigned i = 0; now_ns() < deadline; i++) {
        sum += lookup_table(l, i);
        struct timespec gap = {0, (long)READ_GAP_NS};
        nanosleep(&gap, NULL);
    }
    wt_sink[l->index] = sum;
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int nread = argc > 2 ? atoi(argv[2]) : 2;
    double wms = argc > 3 ? atof(argv[3]) : 4.0;
    double gms = argc > 4 ? atof(argv[4]) : 1.0;
    if (secs <= 0 || nread < 1 || nread > 16 || wms <= 0 || gms < 0) {
        fprintf(stderr, "usage: rwlock_writer [seconds] [readers] [write_ms] [gap_ms]\n");
        return 2;
    }
    write_ns = (uint64_t)(wms * 1e6);
    gap_ns = (uint64_t)(gms * 1e6);
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&rw, &a);
    pthread_rwlockattr_destroy(&a);

    size_t cap = (size_t)(secs * 1e9 / (double)READ_GAP_NS) + 1000;
    tlog_t *logs = truth_alloc_logs(nread + 1, cap); /* 0: writer */
    if (!logs)
        return 2;
    uint64_t t0 = now_ns();
    deadline = t0 + (uint64_t)(secs * 1e9);
    pthread_t th[17];
    for (int i = 0; i <= nread; i++)
        if (pthread_create(&th[i], NULL, i ? reader_thread : writer_thread, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i <= nread; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;

    if (truth_overflowed(logs, nread + 1, "rwlock_writer"))
        return 2;
    /* The writer's holds alone are non-overlapping: the readers' blame truth. */
    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, count[NFUNC] = {0};
    truth_hold_totals(logs[0].holds, logs[0].nholds, held, count);
    for (int i = 1; i <= nread; i++)
        count[F_READER] += logs[i].nholds;
    truth_wait_blame(logs + 1, nread, logs[0].holds, logs[0].nholds, blame, idle, NULL);
    for (size_t j = 0; j < logs[0].nwaits; j++)
        idle[F_WRITER] += logs[0].waits[j].b - logs[0].waits[j].a;
    printf("rwlock_writer: %.2f s, %llu writes (held %.3f s), %llu reads by %d readers"
           " (waited %.3f s, %.3f s of it during writes)\n",
           wall / 1e9, (unsigned long long)count[F_WRITER], held[F_WRITER] / 1e9,
           (unsigned long long)count[F_READER], nread, idle[F_READER] / 1e9,
           blame[F_WRITER] / 1e9);
    printf("truth wait_readers_ns=%llu blame_rewrite_ns=%llu wait_writer_ns=%llu"
           " held_writer_ns=%llu writes=%llu reads=%llu wall_ns=%llu\n",
           (unsigned long long)idle[F_READER], (unsigned long long)blame[F_WRITER],
           (unsigned long long)idle[F_WRITER], (unsigned long long)held[F_WRITER],
           (unsigned long long)count[F_WRITER], (unsigned long long)count[F_READER],
           (unsigned long long)wall);
    return 0;
}
