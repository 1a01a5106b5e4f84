/* lockbench: the cost of lock operations, for benchmarks/locks.sh.
 *
 *   lockbench pairs spin|mutex|rdlock|wrlock|sem|signal N
 *       N uncontended pairs in one thread: lock+unlock of a spin lock, mutex, or rwlock
 *       (read or write), sem_post+sem_wait on a semaphore, or pthread_cond_signal+broadcast
 *       of a condition variable nobody waits on; prints
 *       "ns_per_pair=X elapsed_ns=Y" (the loop only, timed with CLOCK_MONOTONIC).
 *   lockbench ops THREADS N
 *       THREADS threads, each doing N lock+unlock pairs on its own 8 locks (4 spin locks,
 *       4 mutexes, round robin), with a little work inside and some more between pairs;
 *       every 4096th pair takes a lock shared by all threads instead (the only contention).
 *       Prints
 *       "ops_per_sec_per_thread=X elapsed_ns=Y".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

static int pairs(const char *kind, long n) {
    pthread_spinlock_t s;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    sem_t sem;
    pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE);
    sem_init(&sem, 0, 0);
    uint64_t t0 = now_ns();
    if (strcmp(kind, "spin") == 0) {
        for (long i = 0; i < n; i++) {
            pthread_spin_lock(&s);
            pthread_spin_unlock(&s);
        }
    } else if (strcmp(kind, "mutex") == 0) {
        for (long i = 0; i < n; i++) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
        }
    } else if (strcmp(kind, "rdlock") == 0) {
        for (long i = 0; i < n; i++) {
            pthread_rwlock_rdlock(&rw);
            pthread_rwlock_unlock(&rw);
        }
    } else if (strcmp(kind, "wrlock") == 0) {
        for (long i = 0; i < n; i++) {
            pthread_rwlock_wrlock(&rw);
            pthread_rwlock_unlock(&rw);
        }
    } else if (strcmp(kind, "sem") == 0) { /* post then wait: the count never blocks */
        for (long i = 0; i < n; i++) {
            sem_post(&sem);
            sem_wait(&sem);
        }
    } else if (strcmp(kind, "signal") == 0) { /* signal + broadcast with nobody waiting */
        for (long i = 0; i < n; i++) {
            pthread_cond_signal(&c);
            pthread_cond_broadcast(&c);
        }
    } else {
        fprintf(stderr, "lockbench: pairs spin|mutex|rdlock|wrlock|sem|signal N\n");
        return 2;
    }
    uint64_t dt = now_ns() - t0;
    printf("ns_per_pair=%.3f elapsed_ns=%llu\n", (double)dt / (double)n, (unsigned long long)dt);
    pthread_spin_destroy(&s);
    sem_destroy(&sem);
    return 0;
}

static long ops_n;
static int ops_work = 24; /* multiply-adds between lock operations */
static pthread_mutex_t shared_m = PTHREAD_MUTEX_INITIALIZER;

static void *ops_thread(void *arg) {
    (void)arg;
    pthread_spinlock_t s[4];
    pthread_mutex_t m[4];
    for (int i = 0; i < 4; i++) {
        pthread_spin_init(&s[i], PTHREAD_PROCESS_PRIVATE);
        pthread_mutex_init(&m[i], NULL);
    }
    uint64_t x = (uint64_t)(uintptr_t)&x;
    for (long i = 0; i < ops_n; i++) {
        for (int k = 0; k < ops_work; k++) /* work between lock operations */
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        if ((i & 4095) == 4095) {
            pthread_mutex_lock(&shared_m);
            x = x * 6364136223846793005ull + 1;
            pthread_mutex_unlock(&shared_m);
        } else if (i & 1) {
            pthread_spin_lock(&s[(i >> 1) & 3]);
            x = x * 6364136223846793005ull + 1;
            pthread_spin_unlock(&s[(i >> 1) & 3]);
        } else {
            pthread_mutex_lock(&m[(i >> 1) & 3]);
            x = x * 6364136223846793005ull + 1;
            pthread_mutex_unlock(&m[(i >> 1) & 3]);
        }
    }
    sink += x;
    for (int i = 0; i < 4; i++) {
        pthread_spin_destroy(&s[i]);
        pthread_mutex_destroy(&m[i]);
    }
    return NULL;
}

static int ops(int nthreads, long n) {
    ops_n = n;
    pthread_t th[64];
    uint64_t t0 = now_ns();
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, ops_thread, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    uint64_t dt = now_ns() - t0;
    printf("ops_per_sec_per_thread=%.0f elapsed_ns=%llu\n", (double)n * 1e9 / (double)dt,
           (unsigned long long)dt);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "pairs") == 0)
        return pairs(argv[2], atol(argv[3]));
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "ops") == 0) {
        if (argc == 5)
            ops_work = atoi(argv[4]);
        int t = atoi(argv[2]);
        if (t < 1 || t > 64)
            return 2;
        return ops(t, atol(argv[3]));
    }
    fprintf(stderr, "usage: lockbench pairs spin|mutex|rdlock|wrlock|sem|signal N | lockbench ops THREADS N [WORK]\n");
    return 2;
}
