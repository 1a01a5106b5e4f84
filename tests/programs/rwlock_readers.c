/* rwlock_readers: readers holding a pthread rwlock keep a writer waiting; the writer's
 * waiting is split among the readers' unlocks in turn.
 *
 * `scan_short` holds the read lock for SHORT_MS, `scan_long` for LONG_MS (each in its own
 * thread, sleeping while it holds, then about GAP_MS between reads), so their holds overlap.
 * `update_config` takes the write lock for a moment every WRITER_GAP_MS or so. The gaps are
 * pseudo-random (+-50%), so the threads do not lock into one phase. The lock prefers
 * writers (PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP): while the writer waits, new
 * readers wait too. While the lock is read-held, waiting accrues to the readers: each
 * reader's unlock takes the waiting since the previous release, so the writer's wait
 * splits between the reader that leaves first and the one that leaves last; the readers
 * that queue behind the writer are then also the writer's doing.
 *
 * Usage: rwlock_readers [seconds=1]
 *
 * Ground truth (CLOCK_MONOTONIC): every lock call [called, returned] is a wait; every unlock
 * is an event of the unlocking function just before the call; each wait's part in
 * (previous unlock, unlock] is that unlock's (see wait_truth.h). Prints
 *   truth wait_writer_ns=.. wait_readers_ns=.. blame_scan_short_ns=.. blame_scan_long_ns=..
 *         blame_update_config_ns=.. writes=.. wall_ns=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_SHORT, F_LONG, F_WRITER, NFUNC };

#define SHORT_MS 3
#define LONG_MS 6
#define GAP_MS 1
#define WRITER_GAP_MS 4

static pthread_rwlock_t rw;
static uint64_t deadline;
static volatile uint64_t config;

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A pseudo-random gap of `avg_ms` +- 50%, in microseconds, so the threads do not lock into
 * one phase. */
static long jitter_us(unsigned *seed, long avg_ms) {
    *seed = *seed * 1103515245u + 12345u;
    return avg_ms * 500 + (long)((*seed >> 8) % (unsigned)(avg_ms * 1000));
}

/* One read hold of `ms` by reader function `fn`. */
static inline __attribute__((always_inline)) uint64_t read_for(tlog_t *l, int fn, long ms) {
    uint64_t a = now_ns();
    pthread_rwlock_rdlock(&rw);
    wt_wait(l, fn, a, now_ns());
    uint64_t v = config;
    sleep_us(ms * 1000);
    wt_event(l, fn, now_ns());
    pthread_rwlock_unlock(&rw);
    return v;
}

NOINL uint64_t scan_short(tlog_t *l) { return read_for(l, F_SHORT, SHORT_MS); }
NOINL uint64_t scan_long(tlog_t *l) { return read_for(l, F_LONG, LONG_MS); }

NOINL void update_config(tlog_t *l, unsigned i) {
    uint64_t a = now_ns();
    pthread_rwlock_wrlock(&rw);
    wt_wait(l, F_WRITER, a, now_ns());
    config = i;
    busy_for(200000ull, i);
    wt_event(l, F_WRITER, now_ns());
    pthread_rwlock_unlock(&rw);
}

static void *reader_thread(void *arg) {
    tlog_t *l = arg;
    uint64_t s = 0;
    unsigned seed = (unsigned)l->index * 7919u;
    while (now_ns() < deadline) {
        s += l->index == 1 ? scan_short(l) : scan_long(l);
        sleep_us(jitter_us(&seed, GAP_MS));
    }
    wt_sink[l->index] = s;
    return NULL;
}

static void *writer_thread(void *arg) {
    tlog_t *l = arg;
    unsigned seed = 12345u;
    for (unsigned i = 0; now_ns() < deadline; i++) {
        update_config(l, i);
        sleep_us(jitter_us(&seed, WRITER_GAP_MS));
    }
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    if (secs <= 0) {
        fprintf(stderr, "usage: rwlock_readers [seconds]\n");
        return 2;
    }
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&rw, &a);
    pthread_rwlockattr_destroy(&a);
    tlog_t *logs = truth_alloc_logs(3, (size_t)(secs * 1000) + 100); /* 0 writer, 1-2 readers */
    if (!logs)
        return 2;
    uint64_t t0 = now_ns();
    deadline = t0 + (uint64_t)(secs * 1e9);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&th[i], NULL, i ? reader_thread : writer_thread, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    if (truth_overflowed(logs, 3, "rwlock_readers"))
        return 2;
    uint64_t idle[NFUNC] = {0}, count[NFUNC] = {0}, blame[NFUNC] = {0};
    wt_wait_totals(logs, 3, idle, count);
    wt_event_blame(logs, 3, blame);
    printf("rwlock_readers: %.2f s, %llu writes waited %.3f s, readers waited %.3f s\n",
           wall / 1e9, (unsigned long long)count[F_WRITER], idle[F_WRITER] / 1e9,
           (idle[F_SHORT] + idle[F_LONG]) / 1e9);
    printf("truth wait_writer_ns=%llu wait_readers_ns=%llu blame_scan_short_ns=%llu"
           " blame_scan_long_ns=%llu blame_update_config_ns=%llu writes=%llu wall_ns=%llu\n",
           (unsigned long long)idle[F_WRITER],
           (unsigned long long)(idle[F_SHORT] + idle[F_LONG]),
           (unsigned long long)blame[F_SHORT], (unsigned long long)blame[F_LONG],
           (unsigned long long)blame[F_WRITER], (unsigned long long)count[F_WRITER],
           (unsigned long long)wall);
    return 0;
}
