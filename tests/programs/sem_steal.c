/* sem_steal: a semaphore post whose token is taken by a thread that never waited, while
 * another thread waits on.
 *
 * Each round: the waiter blocks in sem_wait (`wait_for_token`). After STEAL_MS the main
 * thread's `steal_token` posts and at once takes the token back with sem_trywait: glibc
 * wakes the waiter, which finds no token and blocks again, inside the same sem_wait call.
 * (The waiter runs at SCHED_IDLE on the main thread's CPU, so it cannot run, and take the
 * token, before the main thread has taken it back.) After late_ms more, `late_post` posts
 * the token the waiter gets. The waiter's waiting after the stolen post is `late_post`'s
 * doing: the post that ends the wait takes the waiting accumulated since the previous post.
 *
 * Usage: sem_steal [rounds=3] [late_ms=100]
 *
 * Ground truth (CLOCK_MONOTONIC): every sem_wait [called, returned] is a wait; every post
 * is a wake event just before the call (see wait_truth.h). Prints
 *   truth wait_ns=.. blame_steal_token_ns=.. blame_late_post_ns=.. stolen=<rounds whose
 *         post was taken back> rounds=.. wall_ns=.. starved_ns=..
 * starved_ns: the waiter's time runnable but not running during its waits (the kernel's
 * run_delay, /proc/thread-self/schedstat; 0 where the kernel keeps none). A SCHED_IDLE
 * thread beside busy ones may be starved between its clock read and its sem_wait call,
 * which the wait's truth counts and a profiler inside the call does not: at most this much.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_WAIT, F_STEAL, F_LATE, NFUNC };

#define STEAL_MS 20

static sem_t sem;
static int rounds = 3;
static long late_ms = 100;
static volatile int waiting_round = -1, done_round = -1;
static cpu_set_t one_cpu;

static uint64_t starved_ns;

/* The calling thread's run_delay (ns runnable but not running so far), or 0. */
static uint64_t run_delay_ns(void) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long run = 0, delay = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &run, &delay) != 2)
        delay = 0;
    fclose(f);
    return delay;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

NOINL void wait_for_token(tlog_t *l, int r) {
    uint64_t delay = run_delay_ns();
    waiting_round = r;
    uint64_t a = now_ns();
    while (sem_wait(&sem) != 0)
        if (errno != EINTR) {
            perror("sem_wait");
            exit(1);
        }
    wt_wait(l, F_WAIT, a, now_ns());
    starved_ns += run_delay_ns() - delay;
    done_round = r;
}

static void *waiter_thread(void *arg) {
    struct sched_param sp = {0};
    if (pthread_setaffinity_np(pthread_self(), sizeof one_cpu, &one_cpu) != 0 ||
        sched_setscheduler(0, SCHED_IDLE, &sp) != 0) {
        perror("sem_steal: affinity / SCHED_IDLE");
        exit(2);
    }
    for (int r = 0; r < rounds; r++)
        wait_for_token(arg, r);
    return NULL;
}

/* Posts and takes the token back at once; 1 if it got it back. */
NOINL int steal_token(tlog_t *l) {
    wt_event(l, F_STEAL, now_ns());
    sem_post(&sem);
    return sem_trywait(&sem) == 0;
}

NOINL void late_post(tlog_t *l) {
    wt_event(l, F_LATE, now_ns());
    sem_post(&sem);
    wt_sink[0]++;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 3;
    late_ms = argc > 2 ? atol(argv[2]) : 100;
    if (rounds < 1 || late_ms < 1) {
        fprintf(stderr, "usage: sem_steal [rounds] [late_ms]\n");
        return 2;
    }
    sem_init(&sem, 0, 0);
    tlog_t *logs = truth_alloc_logs(2, (size_t)rounds * 2 + 10); /* 0: main, 1: waiter */
    if (!logs)
        return 2;
    uint64_t t0 = now_ns();
    /* The main thread and the waiter share one CPU. */
    cpu_set_t all;
    CPU_ZERO(&one_cpu);
    if (sched_getaffinity(0, sizeof all, &all) != 0) {
        perror("sched_getaffinity");
        return 2;
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one_cpu);
            break;
        }
    if (pthread_setaffinity_np(pthread_self(), sizeof one_cpu, &one_cpu) != 0) {
        perror("pthread_setaffinity_np");
        return 2;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, waiter_thread, &logs[1]) != 0) {
        perror("pthread_create");
        return 2;
    }
    int stolen = 0;
    for (int r = 0; r < rounds; r++) {
        while (waiting_round < r)
            sleep_ms(1);
        sleep_ms(STEAL_MS);
        if (steal_token(&logs[0])) {
            stolen++;
            sleep_ms(late_ms);
            late_post(&logs[0]);
        }
        /* else the waiter got the token: the round is over */
        while (done_round < r)
            sleep_ms(1);
    }
    pthread_join(th, NULL);
    uint64_t wall = now_ns() - t0;
    sem_destroy(&sem);
    if (truth_overflowed(logs, 2, "sem_steal"))
        return 2;
    uint64_t idle[NFUNC] = {0}, blame[NFUNC] = {0};
    wt_wait_totals(logs, 2, idle, NULL);
    wt_event_blame(logs, 2, blame);
    printf("sem_steal: %d rounds, %d posts taken back, waited %.3f s\n", rounds, stolen,
           idle[F_WAIT] / 1e9);
    printf("truth wait_ns=%llu blame_steal_token_ns=%llu blame_late_post_ns=%llu stolen=%d"
           " rounds=%d wall_ns=%llu starved_ns=%llu\n",
           (unsigned long long)idle[F_WAIT], (unsigned long long)blame[F_STEAL],
           (unsigned long long)blame[F_LATE], stolen, rounds, (unsigned long long)wall,
           (unsigned long long)starved_ns);
    return 0;
}
