/* trylock_spin: threads that wait for a lock by spinning on pthread_mutex_trylock, never
 * blocking in pthread_mutex_lock. One thread, `holder`, loops { `fill_slot`: lock the
 * global mutex `slot_lock`, compute FILL_NS, unlock; compute HOLDER_GAP_NS outside }.
 * POLLERS threads loop { `poll_for_slot`: spin on pthread_mutex_trylock(&slot_lock) until it
 * succeeds (no sleep, no pthread_mutex_lock), hold it for POLL_HOLD_NS, unlock; compute
 * POLL_GAP_NS outside }. So the pollers burn their time in failed trylocks while `holder`
 * holds the lock.
 *
 * Usage: trylock_spin [seconds=2]
 * Prints one line
 *   truth start_ns=.. end_ns=.. try_attempts=.. try_failed=.. poll_acquired=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, and its end: all
 * threads joined), and, summed over the pollers (exact counts): the pthread_mutex_trylock
 * calls, those that failed with EBUSY, and the acquisitions (successful trylocks).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define POLLERS 2
#define FILL_NS 2000000ull
#define HOLDER_GAP_NS 500000ull
#define POLL_HOLD_NS 20000ull
#define POLL_GAP_NS 200000ull

pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline;

struct poller {
    unsigned index;
    uint64_t attempts, failed, acquired;
};

NOINL void fill_slot(void) {
    pthread_mutex_lock(&slot_lock);
    busy_for(FILL_NS, 1);
    pthread_mutex_unlock(&slot_lock);
}

NOINL void *holder(void *arg) {
    (void)arg;
    while (now_ns() < deadline) {
        fill_slot();
        busy_for(HOLDER_GAP_NS, 2);
    }
    return NULL;
}

NOINL void poll_for_slot(struct poller *p) {
    uint64_t attempts = 1, failed = 0;
    while (pthread_mutex_trylock(&slot_lock) == EBUSY) {
        /* spin, no sleep */
        attempts++;
        failed++;
    }
    busy_for(POLL_HOLD_NS, p->index);
    pthread_mutex_unlock(&slot_lock);
    p->attempts += attempts;
    p->failed += failed;
    p->acquired++;
}

static void *run_poller(void *arg) {
    struct poller *p = arg;
    while (now_ns() < deadline) {
        poll_for_slot(p);
        busy_for(POLL_GAP_NS, p->index + 100);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: trylock_spin [seconds]\n");
        return 2;
    }
    static struct poller pollers[POLLERS];
    pthread_t th, t[POLLERS];
    uint64_t start = now_ns();
    deadline = start + (uint64_t)(seconds * 1e9);
    if (pthread_create(&th, NULL, holder, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    for (int i = 0; i < POLLERS; i++) {
        pollers[i].index = (unsigned)i + 10;
        if (pthread_create(&t[i], NULL, run_poller, &pollers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    pthread_join(th, NULL);
    for (int i = 0; i < POLLERS; i++)
        pthread_join(t[i], NULL);
    uint64_t end = now_ns();
    struct poller s = {0};
    for (int i = 0; i < POLLERS; i++) {
        s.attempts += pollers[i].attempts;
        s.failed += pollers[i].failed;
        s.acquired += pollers[i].acquired;
    }
    printf("truth start_ns=%llu end_ns=%llu try_attempts=%llu try_failed=%llu poll_acquired=%llu\n",
           (unsigned long long)start, (unsigned long long)end, (unsigned long long)s.attempts,
           (unsigned long long)s.failed, (unsigned long long)s.acquired);
    return 0;
}
