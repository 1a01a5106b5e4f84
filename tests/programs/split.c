/* split: N threads, each alternating calls to hot_a (~70% of CPU) and hot_b (~30%).
 *
 * usage: split [THREADS=4] [CPU_SECONDS_PER_THREAD=2]
 *
 * Ground truth: every call is bracketed with CLOCK_THREAD_CPUTIME_ID and summed over all
 * threads; the last stdout line is
 *   truth threads=N hot_a_ns=A hot_b_ns=B total_cpu_ns=T
 * where T is CLOCK_PROCESS_CPUTIME_ID at the end of main (all threads, including exited ones),
 * followed by wall_ns=W, the run's wall time (CLOCK_MONOTONIC): with T it says how much of
 * the machine the program had (another workload beside it gets the rest).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define UNIT 40000L /* loop iterations per work unit (tens of microseconds) */

static atomic_ullong a_ns, b_ns;
static double cpu_seconds = 2.0;

static unsigned long long clock_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

/* The two bodies differ on purpose, so that identical-code folding cannot merge them. */
__attribute__((noinline, noclone)) void hot_a(long units)
{
    volatile unsigned long x = 0;
    for (long i = 0; i < units * UNIT; i++)
        x += (unsigned long)i;
}

__attribute__((noinline, noclone)) void hot_b(long units)
{
    volatile unsigned long x = 1;
    for (long i = 0; i < units * UNIT; i++)
        x ^= (unsigned long)i * 3UL;
}

__attribute__((noinline)) void *worker(void *arg)
{
    (void)arg;
    unsigned long long budget = (unsigned long long)(cpu_seconds * 1e9);
    unsigned long long start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    unsigned long long my_a = 0, my_b = 0;
    for (;;) {
        unsigned long long t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if (t0 - start >= budget)
            break;
        hot_a(7);
        unsigned long long t1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        hot_b(3);
        unsigned long long t2 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        my_a += t1 - t0;
        my_b += t2 - t1;
    }
    atomic_fetch_add(&a_ns, my_a);
    atomic_fetch_add(&b_ns, my_b);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2)
        cpu_seconds = atof(argv[2]);
    if (threads < 1 || threads > 1024 || cpu_seconds <= 0) {
        fprintf(stderr, "usage: split [THREADS] [CPU_SECONDS_PER_THREAD]\n");
        return 2;
    }
    unsigned long long wall_start = clock_ns(CLOCK_MONOTONIC);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tids[i], NULL, worker, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    printf("truth threads=%d hot_a_ns=%llu hot_b_ns=%llu total_cpu_ns=%llu wall_ns=%llu\n",
           threads, (unsigned long long)atomic_load(&a_ns), (unsigned long long)atomic_load(&b_ns),
           clock_ns(CLOCK_PROCESS_CPUTIME_ID), clock_ns(CLOCK_MONOTONIC) - wall_start);
    return 0;
}
