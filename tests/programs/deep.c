/* deep: a deep call chain built WITHOUT frame pointers, for checking complete call paths.
 *
 * Build: gcc -O1 -g -fomit-frame-pointer -fno-inline -pthread deep.c
 * usage: deep [CPU_SECONDS_PER_THREAD=1]
 *
 *   main -> level1 -> level2 -> level3 -> level4 -> hot_leaf
 *   worker_main (pthread start routine) -> w_level1 -> w_level2 -> hot_leaf
 *
 * Every level keeps a volatile local array (so the stack pointer moves and a frame-pointer
 * walk would go astray) and has a compiler barrier after its call (so no tail call can remove
 * a frame). The last stdout line is
 *   truth main_leaf_ns=M worker_leaf_ns=W
 * with the thread CPU time spent below main's and worker_main's calls.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BARRIER() __asm__ volatile("" ::: "memory")
#define NOINLINE __attribute__((noinline, noclone))

static double cpu_seconds = 1.0;

static unsigned long long thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

NOINLINE void hot_leaf(long n)
{
    volatile unsigned long scratch[8];
    scratch[0] = 0;
    for (long i = 0; i < n; i++)
        scratch[i & 7] += (unsigned long)i;
    BARRIER();
}

NOINLINE void level4(long n) { volatile char pad[40]; pad[0] = 4; hot_leaf(n); BARRIER(); pad[1] = pad[0]; }
NOINLINE void level3(long n) { volatile char pad[56]; pad[0] = 3; level4(n); BARRIER(); pad[1] = pad[0]; }
NOINLINE void level2(long n) { volatile char pad[24]; pad[0] = 2; level3(n); BARRIER(); pad[1] = pad[0]; }
NOINLINE void level1(long n) { volatile char pad[72]; pad[0] = 1; level2(n); BARRIER(); pad[1] = pad[0]; }

NOINLINE void w_level2(long n) { volatile char pad[88]; pad[0] = 2; hot_leaf(n); BARRIER(); pad[1] = pad[0]; }
NOINLINE void w_level1(long n) { volatile char pad[16]; pad[0] = 1; w_level2(n); BARRIER(); pad[1] = pad[0]; }

/* Calls `entry` until this thread has used cpu_seconds of CPU; a macro (not a function) so
 * that `entry` is called directly from main / worker_main. */
#define RUN_FOR(entry, spent)                                                                  \
    do {                                                                                       \
        unsigned long long budget_ = (unsigned long long)(cpu_seconds * 1e9);                  \
        while ((spent) < budget_) {                                                            \
            unsigned long long t0_ = thread_cpu_ns();                                          \
            entry(200000);                                                                     \
            BARRIER();                                                                         \
            (spent) += thread_cpu_ns() - t0_;                                                  \
        }                                                                                      \
    } while (0)

static unsigned long long worker_spent;

NOINLINE void *worker_main(void *arg)
{
    (void)arg;
    RUN_FOR(w_level1, worker_spent);
    BARRIER();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cpu_seconds = atof(argv[1]);
    pthread_t t;
    if (pthread_create(&t, NULL, worker_main, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    unsigned long long main_spent = 0;
    RUN_FOR(level1, main_spent);
    pthread_join(t, NULL);
    printf("truth main_leaf_ns=%llu worker_leaf_ns=%llu\n", main_spent, worker_spent);
    return 0;
}
