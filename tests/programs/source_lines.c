/* source_lines: the workload of tests/source.rs (`blameprof report --source`). One function,
 * crunch(), spends its time on three known source lines, and measures each itself.
 *
 * usage: source_lines [ROUNDS=100]
 *
 * Each round, crunch() (run by the main thread)
 *   - runs loop A (~8 ms of CPU), written on one source line, timed with
 *     CLOCK_THREAD_CPUTIME_ID;
 *   - runs loop B (~4 ms of CPU), on one line, timed likewise;
 *   - asks the holder thread to take the mutex, waits until it holds it (await_held(), a
 *     function of its own), then locks the mutex on one line, timed with CLOCK_MONOTONIC:
 *     it waits while the holder computes ~4 ms of CPU time inside hold_lock(), so the
 *     idleness is at crunch()'s lock line and the blame at hold_lock()'s unlock line. The
 *     part of the wait the hold is to blame for ends when the holder calls unlock (it
 *     notes the time just before): the wake-up after it is not the holder's doing.
 *
 * The lines are printed with __LINE__ written on the same line as the code they name (the
 * lock line is indented by a tab, which the listing must expand). The
 * last stdout line is
 *   truth rounds=R loop_a_line=L loop_a_ns=N loop_b_line=L loop_b_ns=N lock_line=L
 *         wait_ns=N unlock_line=L blamed_ns=N
 * (on one line).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LOOP_A_ITERS 5000000L
#define LOOP_B_ITERS 2500000L
#define HOLD_NS 4000000ULL

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int wanted, held;
static atomic_ullong hold_end;
static volatile unsigned long acc_a, acc_b, acc_hold;
static int line_a, line_b, line_lock, line_unlock;
static uint64_t loop_a_ns, loop_b_ns, wait_ns, blamed_ns;

static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Spins until the holder holds the lock for round `round`. */
__attribute__((noinline)) static void await_held(int round)
{
    while (atomic_load(&held) != round)
        sched_yield();
}

/* The holder's critical section: ~HOLD_NS of CPU time while the main thread waits. */
__attribute__((noinline)) static void hold_lock(int round)
{
    pthread_mutex_lock(&lock);
    atomic_store(&held, round);
    uint64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - start < HOLD_NS)
        acc_hold += 1;
    atomic_store(&hold_end, clock_ns(CLOCK_MONOTONIC));
    pthread_mutex_unlock(&lock); line_unlock = __LINE__;
}

__attribute__((noinline)) static void *holder_thread(void *arg)
{
    int rounds = *(int *)arg;
    for (int r = 1; r <= rounds; r++) {
        while (atomic_load(&wanted) < r)
            usleep(50);
        hold_lock(r);
    }
    return NULL;
}

__attribute__((noinline)) static void crunch(int round)
{
    uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < LOOP_A_ITERS; i++) acc_a += (unsigned long)i; line_a = __LINE__;
    uint64_t c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < LOOP_B_ITERS; i++) acc_b ^= (unsigned long)i * 3UL; line_b = __LINE__;
    uint64_t c2 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    loop_a_ns += c1 - c0;
    loop_b_ns += c2 - c1;

    atomic_store(&wanted, round);
    await_held(round);
    uint64_t w0 = clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&lock); line_lock = __LINE__; /* indented by a tab */
    wait_ns += clock_ns(CLOCK_MONOTONIC) - w0;
    blamed_ns += atomic_load(&hold_end) - w0;
    pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    if (rounds < 1) {
        fprintf(stderr, "usage: source_lines [ROUNDS]\n");
        return 2;
    }
    pthread_t holder;
    if (pthread_create(&holder, NULL, holder_thread, &rounds) != 0) {
        perror("pthread_create");
        return 1;
    }
    for (int r = 1; r <= rounds; r++)
        crunch(r);
    pthread_join(holder, NULL);
    printf("truth rounds=%d loop_a_line=%d loop_a_ns=%llu loop_b_line=%d loop_b_ns=%llu "
           "lock_line=%d wait_ns=%llu unlock_line=%d blamed_ns=%llu\n",
           rounds, line_a, (unsigned long long)loop_a_ns, line_b,
           (unsigned long long)loop_b_ns, line_lock, (unsigned long long)wait_ns, line_unlock,
           (unsigned long long)blamed_ns);
    return 0;
}
