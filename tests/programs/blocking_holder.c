/* blocking_holder: a holder that blocks inside its critical section while others wait.
 *
 * `persist` (one thread) takes state_lock, computes 1 ms (update_state), sleeps sleep_ms in
 * nanosleep (flush_state: as a write to slow storage would) and releases it, then computes
 * 2 ms outside. Two `reader` threads take state_lock, compute 0.1 ms (read_state), release
 * it and compute 0.2 ms outside, in a loop: they come to wait behind persist's holds while
 * it sleeps. So most of their waiting is for a holder off a CPU, in nanosleep.
 *
 * Usage: blocking_holder [seconds=1] [sleep_ms=10]
 *
 * Ground truth (CLOCK_MONOTONIC): persist's time in nanosleep inside its holds, in all
 * (blocked_in_hold_ns) and in the sleeps at whose end a reader was waiting for the lock
 * (blocked_waited_ns: what the profiler counts, a call inside a hold others wait for by the
 * call's end), and the readers' waiting for the lock (wait_ns). Prints
 *   truth blocked_in_hold_ns=.. blocked_waited_ns=.. sleeps=.. waited_sleeps=..
 *         wait_ns=.. wall_ns=..
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int waiting;
static atomic_ullong wait_total;
static volatile int stop;
static uint64_t sleep_ns = 10000000ull;
static uint64_t blocked_ns, blocked_waited_ns;
static long sleeps, waited_sleeps;

NOINL void update_state(unsigned seed) { busy_for(1000000ull, seed); }

NOINL void flush_state(void) {
    struct timespec ts = {(time_t)(sleep_ns / 1000000000ull), (long)(sleep_ns % 1000000000ull)};
    uint64_t a = now_ns();
    nanosleep(&ts, NULL);
    uint64_t b = now_ns();
    blocked_ns += b - a;
    sleeps++;
    if (atomic_load(&waiting) > 0) {
        blocked_waited_ns += b - a;
        waited_sleeps++;
    }
}

NOINL void persist_run(void) {
    for (unsigned i = 0; !stop; i++) {
        pthread_mutex_lock(&state_lock);
        update_state(i);
        flush_state();
        pthread_mutex_unlock(&state_lock);
        busy_for(2000000ull, i);
    }
}

NOINL void read_state(unsigned seed) { busy_for(100000ull, seed); }

NOINL void reader_run(void) {
    for (unsigned i = 0; !stop; i++) {
        atomic_fetch_add(&waiting, 1);
        uint64_t a = now_ns();
        pthread_mutex_lock(&state_lock);
        atomic_fetch_add(&wait_total, now_ns() - a);
        atomic_fetch_sub(&waiting, 1);
        read_state(i);
        pthread_mutex_unlock(&state_lock);
        busy_for(200000ull, i);
    }
}

static void *persist_thread(void *arg) {
    (void)arg;
    persist_run();
    return NULL;
}

static void *reader_thread(void *arg) {
    (void)arg;
    reader_run();
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    double sms = argc > 2 ? atof(argv[2]) : 10.0;
    if (secs <= 0 || sms <= 0) {
        fprintf(stderr, "usage: blocking_holder [seconds] [sleep_ms]\n");
        return 2;
    }
    sleep_ns = (uint64_t)(sms * 1e6);
    uint64_t t0 = now_ns();
    pthread_t th[3];
    if (pthread_create(&th[0], NULL, persist_thread, NULL) != 0 ||
        pthread_create(&th[1], NULL, reader_thread, NULL) != 0 ||
        pthread_create(&th[2], NULL, reader_thread, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    struct timespec run = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&run, NULL);
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    printf("blocking_holder: %.2f s, %ld sleeps holding state_lock (%.3f s), %ld with a reader "
           "waiting\n",
           wall / 1e9, sleeps, blocked_ns / 1e9, waited_sleeps);
    printf("truth blocked_in_hold_ns=%llu blocked_waited_ns=%llu sleeps=%ld waited_sleeps=%ld"
           " wait_ns=%llu wall_ns=%llu\n",
           (unsigned long long)blocked_ns, (unsigned long long)blocked_waited_ns, sleeps,
           waited_sleeps, (unsigned long long)atomic_load(&wait_total),
           (unsigned long long)wall);
    return 0;
}
