/* condvar_pc: a slow producer and two consumers on a pthread condition variable.
 *
 * The producer computes each item for produce_ms outside any lock (produce_item), then
 * `publish` locks the queue mutex, pushes, calls pthread_cond_signal and unlocks. Consumers
 * (`take_item`) lock, wait in pthread_cond_wait while the queue is empty, pop, unlock and
 * spend CONSUME_NS on the item, sleeping (they need little CPU: on 2 CPUs, a woken consumer
 * finds a free processor at once). At the end `close_queue` sets `done` and broadcasts.
 * So the consumers spend most of the run in pthread_cond_wait, and that waiting is the
 * producer's fault: its signals come from `publish` (and the last one from `close_queue`).
 *
 * Usage: condvar_pc [seconds=1] [produce_ms=5] [consumers=2]
 *
 * Ground truth (CLOCK_MONOTONIC): every pthread_cond_wait call [called, returned] of the
 * consumers is a wait; every signal / broadcast is a wake event just before the call. Prints
 *   truth wait_consumer_ns=<total time in pthread_cond_wait> waits=<calls>
 *         blame_publish_ns=.. blame_close_queue_ns=.. (event truth, see wait_truth.h)
 *         after_signal_ns=<waiting after the last signal: re-acquiring the mutex>
 *         items=.. wall_ns=..
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_CONSUME, F_PUBLISH, F_CLOSE, NFUNC };

#define CONSUME_NS 500000ull

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int queued, done;
static long consumed;
static uint64_t produce_ns = 5000000ull;

NOINL void produce_item(unsigned i) { busy_for(produce_ns, i); }

NOINL void publish(tlog_t *l) {
    pthread_mutex_lock(&m);
    queued++;
    wt_event(l, F_PUBLISH, now_ns());
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
}

NOINL void close_queue(tlog_t *l) {
    pthread_mutex_lock(&m);
    done = 1;
    wt_event(l, F_CLOSE, now_ns());
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
}

/* Takes one item; 0 when the queue is closed and empty. */
NOINL int take_item(tlog_t *l) {
    pthread_mutex_lock(&m);
    while (!queued && !done) {
        uint64_t a = now_ns();
        pthread_cond_wait(&cv, &m);
        wt_wait(l, F_CONSUME, a, now_ns());
    }
    int got = queued > 0;
    if (got) {
        queued--;
        consumed++;
    }
    pthread_mutex_unlock(&m);
    return got;
}

NOINL void consume_loop(tlog_t *l) {
    while (take_item(l)) {
        struct timespec ts = {0, (long)CONSUME_NS};
        nanosleep(&ts, NULL);
    }
}

static void *consumer_thread(void *arg) {
    consume_loop(arg);
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    double pms = argc > 2 ? atof(argv[2]) : 5.0;
    int ncons = argc > 3 ? atoi(argv[3]) : 2;
    if (secs <= 0 || pms <= 0 || ncons < 1 || ncons > 16) {
        fprintf(stderr, "usage: condvar_pc [seconds] [produce_ms] [consumers]\n");
        return 2;
    }
    produce_ns = (uint64_t)(pms * 1e6);
    size_t cap = (size_t)(secs * 1e9 / (double)produce_ns) * 4 + 1000;
    /* log 0: the producer (main thread); 1..ncons: consumers */
    tlog_t *logs = truth_alloc_logs(ncons + 1, cap);
    if (!logs)
        return 2;
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(secs * 1e9);
    pthread_t th[16];
    for (int i = 0; i < ncons; i++)
        if (pthread_create(&th[i], NULL, consumer_thread, &logs[i + 1]) != 0) {
            perror("pthread_create");
            return 2;
        }
    unsigned items = 0;
    while (now_ns() < deadline) {
        produce_item(items);
        publish(&logs[0]);
        items++;
    }
    close_queue(&logs[0]);
    for (int i = 0; i < ncons; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    if (truth_overflowed(logs, ncons + 1, "condvar_pc"))
        return 2;
    uint64_t idle[NFUNC] = {0}, count[NFUNC] = {0}, blame[NFUNC] = {0};
    wt_wait_totals(logs, ncons + 1, idle, count);
    uint64_t after = wt_event_blame(logs, ncons + 1, blame);
    if (consumed != (long)items) {
        fprintf(stderr, "condvar_pc: produced %u, consumed %ld\n", items, consumed);
        return 1;
    }
    printf("condvar_pc: %.2f s, %u items, %d consumers waited %.3f s in %llu waits\n",
           wall / 1e9, items, ncons, idle[F_CONSUME] / 1e9, (unsigned long long)count[F_CONSUME]);
    printf("truth wait_consumer_ns=%llu waits=%llu blame_publish_ns=%llu blame_close_queue_ns=%llu"
           " after_signal_ns=%llu items=%u wall_ns=%llu\n",
           (unsigned long long)idle[F_CONSUME], (unsigned long long)count[F_CONSUME],
           (unsigned long long)blame[F_PUBLISH], (unsigned long long)blame[F_CLOSE],
           (unsigned long long)after, items, (unsigned long long)wall);
    return 0;
}
