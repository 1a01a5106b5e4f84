/* lock_table: three kinds of lock for the lock view (`report --view locks`), each counted by
 * the program itself.
 *   - table_lock, a global mutex: THREADS threads call `lookup` (a short hold) in a loop,
 *     and are contended on it;
 *   - buckets[64], an array of mutexes initialised in a loop by `buckets_init`: every
 *     iteration takes one bucket (rarely contended);
 *   - a mutex in a heap object made by `cache_new`: every iteration tries it with
 *     pthread_mutex_trylock and, when that fails, counts the failure and locks it.
 * With a second argument `destroy`, the main thread destroys the cache and makes it anew
 * (a new lock, from the same init site) every RENEW of its iterations; the others take the
 * cache under renew_lock, so none holds it while it is destroyed.
 *
 * Usage: lock_table [iterations=100000] [destroy]
 * Prints the program's own counts (all exact), summed over threads:
 *   truth table_acq=.. table_wait_ns=.. bucket_acq=.. cache_acq=.. cache_try=..
 *         cache_try_fail=.. cache_wait_ns=.. caches=..
 * where a wait is the time from calling pthread_mutex_lock to its return, counted only
 * for calls that could not take the lock at once (a failed pthread_mutex_trylock first
 * tells; for table_lock, every call is timed: its uncontended calls add nanoseconds).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "truth_log.h" /* now_ns() */

#define THREADS 4
#define NBUCKETS 64
#define CACHE_EVERY 1
#define RENEW 5000
#define NOINL __attribute__((noinline))

struct cache {
    pthread_mutex_t lock;
    uint64_t hits;
};

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t buckets[NBUCKETS];
static struct cache *volatile cache;
static pthread_mutex_t renew_lock = PTHREAD_MUTEX_INITIALIZER;
static long iterations = 100000;
static int destroy;
static volatile uint64_t sink;

struct counts {
    uint64_t table_acq, table_wait_ns, bucket_acq, cache_acq, cache_try, cache_try_fail,
        cache_wait_ns, caches;
};

static NOINL void spin(unsigned n) {
    uint64_t x = sink;
    for (unsigned i = 0; i < n; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

NOINL void buckets_init(void) {
    for (int i = 0; i < NBUCKETS; i++)
        pthread_mutex_init(&buckets[i], NULL);
}

NOINL struct cache *cache_new(void) {
    struct cache *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

NOINL void lookup(struct counts *k) {
    uint64_t t0 = now_ns();
    pthread_mutex_lock(&table_lock);
    k->table_wait_ns += now_ns() - t0;
    k->table_acq++;
    spin(400);
    pthread_mutex_unlock(&table_lock);
}

NOINL void bucket_update(struct counts *k, unsigned key) {
    pthread_mutex_t *b = &buckets[key % NBUCKETS];
    pthread_mutex_lock(b);
    k->bucket_acq++;
    spin(20);
    pthread_mutex_unlock(b);
}

NOINL void cache_touch(struct counts *k, struct cache *c) {
    k->cache_try++;
    if (pthread_mutex_trylock(&c->lock) != 0) {
        k->cache_try_fail++;
        uint64_t t0 = now_ns();
        pthread_mutex_lock(&c->lock);
        k->cache_wait_ns += now_ns() - t0;
    }
    k->cache_acq++;
    c->hits++;
    spin(200);
    pthread_mutex_unlock(&c->lock);
}

/* Replaces the cache (destroy mode). */
static void renew(struct counts *k) {
    pthread_mutex_lock(&renew_lock);
    struct cache *old = cache;
    cache = cache_new();
    pthread_mutex_unlock(&renew_lock);
    pthread_mutex_destroy(&old->lock);
    free(old);
    k->caches++;
}

/* One iteration of a thread's loop; `renews`: the thread that replaces the cache. */
static void iterate(struct counts *k, long i, unsigned *key, int renews) {
    lookup(k);
    *key = *key * 1103515245u + 12345u;
    bucket_update(k, *key >> 8);
    if (i % CACHE_EVERY == 0) {
        if (destroy)
            pthread_mutex_lock(&renew_lock);
        cache_touch(k, cache);
        if (destroy)
            pthread_mutex_unlock(&renew_lock);
    }
    if (renews && destroy && i % RENEW == RENEW - 1)
        renew(k);
    spin(300);
}

static void *worker(void *arg) {
    unsigned key = (unsigned)(uintptr_t)arg * 2654435761u;
    for (long i = 0; i < iterations; i++)
        iterate(arg, i, &key, 0);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        iterations = atol(argv[1]);
    destroy = argc > 2;
    buckets_init();
    cache = cache_new();
    static struct counts counts[THREADS];
    pthread_t t[THREADS];
    for (int i = 1; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, &counts[i]);
    /* Thread 0 is main; in destroy mode it also renews the cache. */
    unsigned key = 7;
    for (long i = 0; i < iterations; i++)
        iterate(&counts[0], i, &key, 1);
    for (int i = 1; i < THREADS; i++)
        pthread_join(t[i], NULL);
    struct counts s = {0};
    for (int i = 0; i < THREADS; i++) {
        s.table_acq += counts[i].table_acq;
        s.table_wait_ns += counts[i].table_wait_ns;
        s.bucket_acq += counts[i].bucket_acq;
        s.cache_acq += counts[i].cache_acq;
        s.cache_try += counts[i].cache_try;
        s.cache_try_fail += counts[i].cache_try_fail;
        s.cache_wait_ns += counts[i].cache_wait_ns;
        s.caches += counts[i].caches;
    }
    printf("truth table_acq=%llu table_wait_ns=%llu bucket_acq=%llu cache_acq=%llu cache_try=%llu "
           "cache_try_fail=%llu cache_wait_ns=%llu caches=%llu\n",
           (unsigned long long)s.table_acq, (unsigned long long)s.table_wait_ns,
           (unsigned long long)s.bucket_acq, (unsigned long long)s.cache_acq,
           (unsigned long long)s.cache_try, (unsigned long long)s.cache_try_fail,
           (unsigned long long)s.cache_wait_ns, (unsigned long long)s.caches + 1);
    return 0;
}
