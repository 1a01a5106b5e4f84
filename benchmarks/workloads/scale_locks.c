/* scale_locks: the scoreboard's scale workload (benchmarks/scoreboard, section "Scale"). It has
 * no truth lines: it measures what blameprof costs as threads and distinct locks grow.
 *
 * Usage: scale_locks threads distinct_locks live_locks ops
 *
 * A pool of min(live_locks, distinct_locks) pthread mutexes is shared by `threads` threads.
 * The run is cut into rounds of ceil(distinct_locks / pool) ; between two barriers at the
 * start of every round after the first, the threads destroy and re-create the pool's mutexes
 * (pthread_mutex_destroy + pthread_mutex_init, each thread its share), so `distinct_locks`
 * distinct mutexes pass in total while at most `pool` exist at once. In a round each thread
 * does its share of `ops` lock/increment/unlock operations, sweeping the pool from its own
 * starting point, so every mutex of a round is locked (when ops >= distinct_locks) and threads
 * meet on the same mutex only when the pool is small.
 *
 * Prints "scale_locks: ..." and "truth ops <n>" (the operations done); exit status 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    pthread_mutex_t m;
    uint64_t count;
    char pad[64 - sizeof(pthread_mutex_t) % 64 - sizeof(uint64_t)];
} slot_t;

static slot_t *pool;
static uint64_t pool_size, rounds, ops_per_round;
static int nthreads;
static pthread_barrier_t barrier;

static void *worker(void *arg) {
    uint64_t t = (uint64_t)(uintptr_t)arg;
    uint64_t start = pool_size * t / (uint64_t)nthreads;
    uint64_t mine = ops_per_round / (uint64_t)nthreads + (t < ops_per_round % (uint64_t)nthreads);
    for (uint64_t r = 0; r < rounds; r++) {
        if (r > 0) {
            pthread_barrier_wait(&barrier);
            for (uint64_t i = t; i < pool_size; i += (uint64_t)nthreads) {
                pthread_mutex_destroy(&pool[i].m);
                pthread_mutex_init(&pool[i].m, NULL);
            }
            pthread_barrier_wait(&barrier);
        }
        uint64_t i = start;
        for (uint64_t k = 0; k < mine; k++) {
            pthread_mutex_lock(&pool[i].m);
            pool[i].count++;
            pthread_mutex_unlock(&pool[i].m);
            if (++i == pool_size)
                i = 0;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: scale_locks threads distinct_locks live_locks ops\n");
        return 2;
    }
    nthreads = atoi(argv[1]);
    uint64_t distinct = strtoull(argv[2], NULL, 10), live = strtoull(argv[3], NULL, 10);
    uint64_t ops = strtoull(argv[4], NULL, 10);
    if (nthreads < 1 || nthreads > 1024 || distinct < 1 || live < 1 || ops < 1) {
        fprintf(stderr, "scale_locks: bad arguments\n");
        return 2;
    }
    pool_size = live < distinct ? live : distinct;
    rounds = (distinct + pool_size - 1) / pool_size;
    ops_per_round = ops / rounds;
    pool = aligned_alloc(64, pool_size * sizeof(slot_t));
    if (!pool) {
        perror("aligned_alloc");
        return 2;
    }
    for (uint64_t i = 0; i < pool_size; i++) {
        pthread_mutex_init(&pool[i].m, NULL);
        pool[i].count = 0;
    }
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    pthread_t th[1024];
    for (int t = 0; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t)) {
            perror("pthread_create");
            return 2;
        }
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    uint64_t done = 0;
    for (uint64_t i = 0; i < pool_size; i++) {
        done += pool[i].count;
        pthread_mutex_destroy(&pool[i].m);
    }
    printf("scale_locks: %d threads, %llu distinct locks (%llu live, %llu rounds), %llu ops\n",
           nthreads, (unsigned long long)distinct, (unsigned long long)pool_size,
           (unsigned long long)rounds, (unsigned long long)done);
    printf("truth ops %llu\n", (unsigned long long)done);
    free(pool);
    return done == ops_per_round * rounds ? 0 : 1;
}
