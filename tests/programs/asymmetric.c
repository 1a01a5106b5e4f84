/* asymmetric: one hot member in a group of locks made at one init site. `buckets_init`
 * initialises the NBUCKETS mutexes of `buckets` in a loop with pthread_mutex_init. THREADS
 * workers loop: pick bucket 0 with probability 1/2, else one of buckets 1..15 uniformly (a
 * per-thread xorshift generator with a fixed seed); { `bucket_update`: lock the bucket,
 * compute HOLD_NS of the thread's CPU time and sleep SLEEP_NS, unlock; compute GAP_NS of CPU
 * time outside any lock }. Bucket 0 takes half of all acquisitions and so is contended far
 * more often than any other bucket (each takes 1/30).
 *
 * The holder sleeps inside its hold so that the others run meanwhile and find the bucket
 * held whether or not they run at the same time as the holder: on a loaded machine, where a
 * CPU is seldom free for a second worker, holds that only computed were hardly ever
 * contended (0.1% of bucket 0's acquisitions with two CPU hogs beside it), and a failed try
 * could find the bucket free again by its lock call. A holder's sleep lasts tens of
 * microseconds (its timer slack is set to 1 ns): the try that failed is followed by a lock
 * call that waits, so the program's contended acquisitions are the ones that waited (those
 * the runtime counts). About 10,000 acquisitions a second of each kind.
 *
 * Usage: asymmetric [seconds=3]
 * Every acquisition first tries pthread_mutex_trylock; when that fails the acquisition is
 * contended (and pthread_mutex_lock follows). Prints one line
 *   truth start_ns=.. end_ns=.. acq_hot=.. contended_hot=.. acq_cold=.. contended_cold=..
 *         max_cold_rate_ppm=.. hot_rate_ppm=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, and its end: all
 * workers joined); acq_hot / contended_hot are the acquisitions of bucket 0 and the
 * contended ones, acq_cold / contended_cold the same summed over buckets 1..15 (all summed
 * over threads); hot_rate_ppm is bucket 0's contention rate (contended / acquisitions) in
 * parts per million, max_cold_rate_ppm the largest contention rate among buckets 1..15.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define THREADS 4
#define NBUCKETS 16
#define HOLD_NS 2000ull
#define SLEEP_NS 10000ull
#define GAP_NS 10000ull

static pthread_mutex_t buckets[NBUCKETS];
static uint64_t deadline;

struct worker {
    unsigned index;
    uint32_t seed;
    uint64_t acq[NBUCKETS], contended[NBUCKETS];
};

static uint32_t xorshift32(uint32_t *s) {
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

NOINL void buckets_init(void) {
    for (int i = 0; i < NBUCKETS; i++)
        pthread_mutex_init(&buckets[i], NULL);
}

/* Burns `ns` of the calling thread's CPU time. */
static NOINL void busy_cpu(uint64_t ns, unsigned seed) {
    uint64_t end = cpu_ns() + ns;
    unsigned x = seed | 1;
    do {
        for (int i = 0; i < 64; i++) {
            x = x * 1103515245u + 12345u;
            wt_sink[x & 1023] += x;
        }
    } while (cpu_ns() < end);
}

NOINL void bucket_update(struct worker *w, unsigned b) {
    if (pthread_mutex_trylock(&buckets[b]) != 0) {
        w->contended[b]++;
        pthread_mutex_lock(&buckets[b]);
    }
    w->acq[b]++;
    busy_cpu(HOLD_NS, w->index);
    struct timespec nap = {0, (long)SLEEP_NS};
    nanosleep(&nap, NULL);
    pthread_mutex_unlock(&buckets[b]);
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    while (now_ns() < deadline) {
        uint32_t r = xorshift32(&w->seed);
        unsigned b = (r & 1) ? 1 + (r >> 1) % (NBUCKETS - 1) : 0;
        bucket_update(w, b);
        busy_cpu(GAP_NS, w->index + 100);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: asymmetric [seconds]\n");
        return 2;
    }
    buckets_init();
    static struct worker workers[THREADS];
    pthread_t t[THREADS];
    uint64_t start = now_ns();
    deadline = start + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < THREADS; i++) {
        workers[i].index = (unsigned)i;
        workers[i].seed = 2463534242u + 7919u * (uint32_t)i;
        if (pthread_create(&t[i], NULL, run_worker, &workers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t end = now_ns();
    uint64_t acq[NBUCKETS] = {0}, contended[NBUCKETS] = {0};
    for (int i = 0; i < THREADS; i++)
        for (int b = 0; b < NBUCKETS; b++) {
            acq[b] += workers[i].acq[b];
            contended[b] += workers[i].contended[b];
        }
    uint64_t acq_cold = 0, contended_cold = 0, max_cold_ppm = 0;
    for (int b = 1; b < NBUCKETS; b++) {
        acq_cold += acq[b];
        contended_cold += contended[b];
        uint64_t ppm = acq[b] ? contended[b] * 1000000ull / acq[b] : 0;
        if (ppm > max_cold_ppm)
            max_cold_ppm = ppm;
    }
    uint64_t hot_ppm = acq[0] ? contended[0] * 1000000ull / acq[0] : 0;
    printf("truth start_ns=%llu end_ns=%llu acq_hot=%llu contended_hot=%llu acq_cold=%llu"
           " contended_cold=%llu max_cold_rate_ppm=%llu hot_rate_ppm=%llu\n",
           (unsigned long long)start, (unsigned long long)end, (unsigned long long)acq[0],
           (unsigned long long)contended[0], (unsigned long long)acq_cold,
           (unsigned long long)contended_cold, (unsigned long long)max_cold_ppm,
           (unsigned long long)hot_ppm);
    return 0;
}
