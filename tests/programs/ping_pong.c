/* ping_pong: threads take one mutex in turn: after its hold, a thread waits (spinning,
 * outside the lock) until another thread has taken the lock, then asks for it again, so
 * that it waits for the other's whole hold. With 2 threads, about half of their running
 * time is waiting for the lock (critical section pressure 50%, less the hand-overs); with
 * 1, none.
 *
 * Usage: ping_pong [threads=2] [seconds=1]
 * Prints the program's own measure, summed over threads:
 *   truth wait_ns=.. life_ns=.. acquisitions=..
 * where wait_ns is the time spent inside pthread_mutex_lock calls and life_ns the time
 * from each thread's start to its end.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "truth_log.h" /* now_ns() */

#define MAXT 16
#define HOLD_NS 20000000ull

pthread_mutex_t ball = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline;
static volatile uint64_t sink;
static volatile int owner = -1;
static int threads = 2;

struct counts {
    uint64_t wait_ns, life_ns, acquisitions;
    int id;
};

__attribute__((noinline)) void rally(struct counts *k) {
    uint64_t t0 = now_ns();
    pthread_mutex_lock(&ball);
    k->wait_ns += now_ns() - t0;
    k->acquisitions++;
    owner = k->id;
    /* Hold it for HOLD_NS of computing: long beside the hand-over (a wake-up, which a busy
     * virtual machine can take milliseconds to deliver). */
    uint64_t x = sink, end = now_ns() + HOLD_NS;
    while (now_ns() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
    pthread_mutex_unlock(&ball);
    /* Hand the ball over: wait for another thread to take it (until the deadline). */
    while (threads > 1 && owner == k->id && now_ns() < deadline)
        ;
}

static void *player(void *arg) {
    struct counts *k = arg;
    uint64_t start = now_ns();
    while (now_ns() < deadline)
        rally(k);
    k->life_ns = now_ns() - start;
    return NULL;
}

int main(int argc, char **argv) {
    threads = argc > 1 ? atoi(argv[1]) : 2;
    double seconds = argc > 2 ? atof(argv[2]) : 1.0;
    if (threads < 1 || threads > MAXT)
        return 2;
    deadline = now_ns() + (uint64_t)(seconds * 1e9);
    static struct counts counts[MAXT];
    pthread_t t[MAXT];
    for (int i = 0; i < threads; i++) {
        counts[i].id = i;
        pthread_create(&t[i], NULL, player, &counts[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    struct counts s = {0};
    for (int i = 0; i < threads; i++) {
        s.wait_ns += counts[i].wait_ns;
        s.life_ns += counts[i].life_ns;
        s.acquisitions += counts[i].acquisitions;
    }
    printf("truth wait_ns=%llu life_ns=%llu acquisitions=%llu\n", (unsigned long long)s.wait_ns,
           (unsigned long long)s.life_ns, (unsigned long long)s.acquisitions);
    return 0;
}
