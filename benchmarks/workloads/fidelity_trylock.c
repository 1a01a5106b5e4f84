/* fidelity_trylock: contention fidelity. Threads take one mutex (or, with `spin`, one spin
 * lock) in a loop, each acquisition a trylock first and, only when that fails, the blocking
 * lock: a failed try is a contended acquisition, counted by the program itself. Holds are `hold` multiply-adds of a
 * private generator, the work between them `gap` multiply-adds, so the lock's contention is
 * the program's own (no sleeps, no I/O). A profiler that lengthens critical sections or the
 * path around them makes more acquisitions contended: the fraction, profiled vs unprofiled, is
 * what the scoreboard's "contention fidelity" section compares (benchmarks/scoreboard).
 *
 * Usage: fidelity_trylock threads acquisitions_per_thread [hold] [gap] [mutex|spin]
 *        (defaults 60, 150, mutex)
 *
 * Prints "fidelity: contended <fraction> acquisitions <n> contended_n <m> seconds <s>" and
 * "truth ops <n>"; exit status 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_spinlock_t spin;
static int use_spin;
static volatile uint64_t shared;
static long per_thread;
static int hold_n = 60, gap_n = 150;

static inline uint64_t step(uint64_t x) {
    return x * 6364136223846793005ULL + 1442695040888963407ULL;
}

static void *worker(void *arg) {
    uint64_t x = (uintptr_t)arg, contended = 0;
    for (long i = 0; i < per_thread; i++) {
        if (use_spin) {
            if (pthread_spin_trylock(&spin) != 0) {
                contended++;
                pthread_spin_lock(&spin);
            }
        } else if (pthread_mutex_trylock(&lock) != 0) {
            contended++;
            pthread_mutex_lock(&lock);
        }
        for (int k = 0; k < hold_n; k++)
            x = step(x);
        shared += x;
        if (use_spin)
            pthread_spin_unlock(&spin);
        else
            pthread_mutex_unlock(&lock);
        for (int k = 0; k < gap_n; k++)
            x = step(x);
    }
    return (void *)(uintptr_t)contended;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 6) {
        fprintf(stderr, "usage: fidelity_trylock threads acquisitions_per_thread [hold] [gap] "
                        "[mutex|spin]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    per_thread = atol(argv[2]);
    if (argc > 3)
        hold_n = atoi(argv[3]);
    if (argc > 4)
        gap_n = atoi(argv[4]);
    if (argc > 5) {
        use_spin = strcmp(argv[5], "spin") == 0;
        if (!use_spin && strcmp(argv[5], "mutex") != 0) {
            fprintf(stderr, "fidelity_trylock: the lock is mutex or spin\n");
            return 2;
        }
    }
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    if (n < 1 || n > 256 || per_thread < 1 || hold_n < 0 || gap_n < 0) {
        fprintf(stderr, "fidelity_trylock: bad arguments\n");
        return 2;
    }
    pthread_t t[256];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) != 0) {
            perror("pthread_create");
            return 2;
        }
    uint64_t contended = 0;
    for (int i = 0; i < n; i++) {
        void *r;
        pthread_join(t[i], &r);
        contended += (uintptr_t)r;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t total = (uint64_t)n * (uint64_t)per_thread;
    printf("fidelity: contended %.5f acquisitions %lu contended_n %lu seconds %.3f\n",
           (double)contended / (double)total, (unsigned long)total, (unsigned long)contended,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    printf("truth ops %lu\n", (unsigned long)total);
    return 0;
}
