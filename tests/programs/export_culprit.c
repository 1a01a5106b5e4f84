/* export_culprit: a workload with a known culprit, for the export tests (tests/exports.rs).
 *
 * One thread named "rebuilder" calls rebuild_index(), which holds the mutex `index_lock` for
 * 4 ms every 16 ms; READERS threads named "reader-1", "reader-2", ... call read_index() (20 us
 * under the lock, then a 100 us sleep) in a loop, and queue behind every rebuild.
 * The readers are the victims, rebuild_index() is the culprit.
 *
 * Usage: export_culprit [seconds=1.5] [readers=2]
 *
 * Ground truth as in lookup_insert.c (truth_log.h): every wait [pthread_mutex_lock called,
 * returned] and hold [returned, unlock called] is logged with CLOCK_MONOTONIC into per-thread
 * arrays; the blame of a holder function is the sum over all waits of their overlap with its
 * holds. Also per thread: its tid and its total wait. Prints one line:
 *   truth blame_rebuild_ns=.. blame_read_ns=.. idle_read_ns=.. idle_rebuild_ns=.. readers=N
 *         tid_rebuilder=.. idle_rebuilder_ns=.. tid_reader_1=.. idle_reader_1_ns=.. ...
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wait_truth.h"

enum { F_READ, F_REBUILD, NFUNC };

#define READ_HOLD_NS 20000ull
#define READ_GAP_NS 100000ull
#define REBUILD_HOLD_NS 4000000ull
#define REBUILD_PERIOD_NS 16000000ull
#define MAX_READERS 16

pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline;

/* One thread: its log, its name and, once it runs, its tid. */
struct worker {
    tlog_t *log;
    char name[16];
    long tid;
};

NOINL void read_index(tlog_t *l, unsigned key) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&index_lock);
    uint64_t h0 = now_ns();
    busy_for(READ_HOLD_NS, key); /* look the key up */
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&index_lock);
    log_iv(l, F_READ, w0, h0, h1);
}

NOINL void rebuild_index(tlog_t *l, unsigned key) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&index_lock);
    uint64_t h0 = now_ns();
    busy_for(REBUILD_HOLD_NS, key); /* rebuild the whole index */
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&index_lock);
    log_iv(l, F_REBUILD, w0, h0, h1);
}

/* Sleeps `ns` (CLOCK_MONOTONIC). */
static void pause_for(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

static void start(struct worker *w) {
    w->tid = (long)syscall(SYS_gettid);
    pthread_setname_np(pthread_self(), w->name);
}

static void *reader(void *arg) {
    struct worker *w = arg;
    start(w);
    unsigned key = (unsigned)w->tid;
    while (now_ns() < deadline) {
        read_index(w->log, key++);
        pause_for(READ_GAP_NS); /* wait for the next request */
    }
    return NULL;
}

static void *rebuilder(void *arg) {
    struct worker *w = arg;
    start(w);
    unsigned key = 7;
    uint64_t next = now_ns() + REBUILD_PERIOD_NS;
    while (next < deadline) {
        struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        rebuild_index(w->log, key++);
        next += REBUILD_PERIOD_NS;
    }
    return NULL;
}

static uint64_t waited(const tlog_t *l) {
    uint64_t sum = 0;
    for (size_t i = 0; i < l->nwaits; i++)
        sum += l->waits[i].b - l->waits[i].a;
    return sum;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.5;
    int nreaders = argc > 2 ? atoi(argv[2]) : 2;
    if (secs <= 0 || nreaders < 1 || nreaders > MAX_READERS) {
        fprintf(stderr, "usage: export_culprit [seconds] [readers, 1 to %d]\n", MAX_READERS);
        return 2;
    }
    int nthreads = nreaders + 1;
    size_t cap = (size_t)(secs * 1e9 / (double)(READ_HOLD_NS + READ_GAP_NS)) + 1000;
    tlog_t *logs = truth_alloc_logs(nthreads, cap);
    if (!logs)
        return 2;
    struct worker workers[MAX_READERS + 1];
    deadline = now_ns() + (uint64_t)(secs * 1e9);
    pthread_t th[MAX_READERS + 1];
    for (int i = 0; i < nthreads; i++) {
        struct worker *w = &workers[i];
        w->log = &logs[i];
        w->tid = 0;
        if (i < nreaders)
            snprintf(w->name, sizeof w->name, "reader-%d", i + 1);
        else
            snprintf(w->name, sizeof w->name, "rebuilder");
        if (pthread_create(&th[i], NULL, i < nreaders ? reader : rebuilder, w) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, nhold[NFUNC] = {0};
    if (truth_mutex_totals(logs, nthreads, "export_culprit", blame, idle, held, nhold, NULL))
        return 2;
    printf("truth blame_rebuild_ns=%llu blame_read_ns=%llu idle_read_ns=%llu idle_rebuild_ns=%llu"
           " readers=%d",
           (unsigned long long)blame[F_REBUILD], (unsigned long long)blame[F_READ],
           (unsigned long long)idle[F_READ], (unsigned long long)idle[F_REBUILD], nreaders);
    for (int i = 0; i < nthreads; i++) {
        char key[16];
        snprintf(key, sizeof key, "%s", workers[i].name);
        for (char *c = key; *c; c++)
            if (*c == '-')
                *c = '_';
        printf(" tid_%s=%ld idle_%s_ns=%llu", key, workers[i].tid, key,
               (unsigned long long)waited(&logs[i]));
    }
    printf("\n");
    return 0;
}
