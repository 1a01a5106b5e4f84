/* signal_held: woken waiters retaking a condition variable's mutex. `publish_batch` (one
 * thread) locks `queue_lock`, publishes a batch (a new generation), broadcasts `queue_ready`
 * and then, still holding the lock, fills the next batch for HOLD_NS; it unlocks, computes
 * OUTSIDE_NS, and waits for the WAITERS to have taken the batch. Each waiter (`take_batch`)
 * waits in pthread_cond_wait for a new generation: woken by the broadcast, it must retake
 * queue_lock, which the publisher still holds for HOLD_NS; then it computes PROCESS_NS
 * outside any lock. So most of queue_lock's waiting is inside pthread_cond_wait, after the
 * broadcast: the fix is to broadcast after unlocking.
 *
 * Usage: signal_held [rounds=150]
 * Prints one line
 *   truth start_ns=.. end_ns=.. rounds=.. retake_ns=.. hold_after_ns=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns, retake_ns sums over the waiters' woken
 * waits the time from the broadcast to the return of pthread_cond_wait (the wake and the
 * retake of the mutex), and hold_after_ns sums the publisher's holds from the broadcast to
 * its unlock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define WAITERS 3
#define HOLD_NS 2000000ull
#define OUTSIDE_NS 500000ull
#define PROCESS_NS 300000ull

pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t batch_taken = PTHREAD_COND_INITIALIZER;
static unsigned generation, taken, rounds;
static int done;
static uint64_t signalled_at, hold_after_ns;

struct waiter {
    unsigned index;
    uint64_t retake_ns;
};

NOINL void fill_batch(void) { busy_for(HOLD_NS, 7); }

NOINL void publish_batch(void) {
    pthread_mutex_lock(&queue_lock);
    generation++;
    signalled_at = now_ns();
    pthread_cond_broadcast(&queue_ready);
    fill_batch();
    hold_after_ns += now_ns() - signalled_at;
    pthread_mutex_unlock(&queue_lock);
    busy_for(OUTSIDE_NS, 8);
    pthread_mutex_lock(&queue_lock);
    while (taken < WAITERS)
        pthread_cond_wait(&batch_taken, &queue_lock);
    taken = 0;
    pthread_mutex_unlock(&queue_lock);
}

NOINL int take_batch(struct waiter *w, unsigned *seen) {
    pthread_mutex_lock(&queue_lock);
    while (generation == *seen && !done)
        pthread_cond_wait(&queue_ready, &queue_lock);
    if (done) {
        pthread_mutex_unlock(&queue_lock);
        return 0;
    }
    w->retake_ns += now_ns() - signalled_at;
    *seen = generation;
    if (++taken == WAITERS)
        pthread_cond_signal(&batch_taken);
    pthread_mutex_unlock(&queue_lock);
    return 1;
}

NOINL void process_batch(struct waiter *w) { busy_for(PROCESS_NS, w->index); }

static void *run_waiter(void *arg) {
    struct waiter *w = arg;
    unsigned seen = 0;
    while (take_batch(w, &seen))
        process_batch(w);
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 150;
    if (rounds == 0) {
        fprintf(stderr, "usage: signal_held [rounds]\n");
        return 2;
    }
    static struct waiter waiters[WAITERS];
    pthread_t t[WAITERS];
    uint64_t start = now_ns();
    for (int i = 0; i < WAITERS; i++) {
        waiters[i].index = (unsigned)i;
        if (pthread_create(&t[i], NULL, run_waiter, &waiters[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (unsigned r = 0; r < rounds; r++)
        publish_batch();
    pthread_mutex_lock(&queue_lock);
    done = 1;
    pthread_cond_broadcast(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
    uint64_t retake = 0;
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(t[i], NULL);
        retake += waiters[i].retake_ns;
    }
    uint64_t end = now_ns();
    printf("truth start_ns=%llu end_ns=%llu rounds=%u retake_ns=%llu hold_after_ns=%llu\n",
           (unsigned long long)start, (unsigned long long)end, rounds,
           (unsigned long long)retake, (unsigned long long)hold_after_ns);
    return 0;
}
