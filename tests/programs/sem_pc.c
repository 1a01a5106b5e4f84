/* sem_pc: a slow producer posts a semaphore, two consumers wait for it.
 *
 * The producer computes each item for produce_ms in `make_token` (no lock held), then
 * `post_token` calls sem_post. Consumers (`claim_token`) call sem_wait and then spend
 * CONSUME_NS sleeping (they need little CPU). At the end the producer posts once per
 * consumer from `release_all` with `done` set.
 *
 * Usage: sem_pc [seconds=1] [produce_ms=4] [consumers=2]
 *
 * Ground truth (CLOCK_MONOTONIC): every sem_wait call [called, returned] is a wait; every
 * sem_post is a wake event just before the call (see wait_truth.h). Prints
 *   truth wait_claim_ns=<consumers' sem_wait waiting> waits=.. blame_post_token_ns=..
 *         blame_release_all_ns=.. after_post_ns=<waiting after the last post> posts=..
 *         wall_ns=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

enum { F_CLAIM, F_POST, F_RELEASE, NFUNC };

#define CONSUME_NS 300000ull

static sem_t sem;
static volatile int done;
static long claimed;
static uint64_t produce_ns = 4000000ull;

NOINL void make_token(unsigned i) { busy_for(produce_ns, i); }

NOINL void post_token(tlog_t *l) {
    wt_event(l, F_POST, now_ns());
    sem_post(&sem);
    wt_sink[0]++;
}

NOINL void release_all(tlog_t *l, int n) {
    done = 1;
    for (int i = 0; i < n; i++) {
        wt_event(l, F_RELEASE, now_ns());
        sem_post(&sem);
    }
    wt_sink[0]++;
}

/* 1 if a token was claimed, 0 when released at the end. */
NOINL int claim_token(tlog_t *l) {
    uint64_t a = now_ns();
    while (sem_wait(&sem) != 0)
        if (errno != EINTR) {
            perror("sem_wait");
            exit(1);
        }
    wt_wait(l, F_CLAIM, a, now_ns());
    if (done)
        return 0;
    __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED);
    return 1;
}

static void *consumer_thread(void *arg) {
    tlog_t *l = arg;
    while (claim_token(l)) {
        struct timespec ts = {0, (long)CONSUME_NS};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    double pms = argc > 2 ? atof(argv[2]) : 4.0;
    int ncons = argc > 3 ? atoi(argv[3]) : 2;
    if (secs <= 0 || pms <= 0 || ncons < 1 || ncons > 16) {
        fprintf(stderr, "usage: sem_pc [seconds] [produce_ms] [consumers]\n");
        return 2;
    }
    produce_ns = (uint64_t)(pms * 1e6);
    sem_init(&sem, 0, 0);
    size_t cap = (size_t)(secs * 1e9 / (double)produce_ns) * 2 + 1000;
    tlog_t *logs = truth_alloc_logs(ncons + 1, cap); /* 0: the producer */
    if (!logs)
        return 2;
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(secs * 1e9);
    pthread_t th[16];
    for (int i = 0; i < ncons; i++)
        if (pthread_create(&th[i], NULL, consumer_thread, &logs[i + 1]) != 0) {
            perror("pthread_create");
            return 2;
        }
    unsigned posts = 0;
    while (now_ns() < deadline) {
        make_token(posts);
        post_token(&logs[0]);
        posts++;
    }
    /* Let the consumers take the last tokens before the final release. */
    while (__atomic_load_n(&claimed, __ATOMIC_RELAXED) < (long)posts) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    release_all(&logs[0], ncons);
    for (int i = 0; i < ncons; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    sem_destroy(&sem);
    if (truth_overflowed(logs, ncons + 1, "sem_pc"))
        return 2;
    uint64_t idle[NFUNC] = {0}, count[NFUNC] = {0}, blame[NFUNC] = {0};
    wt_wait_totals(logs, ncons + 1, idle, count);
    uint64_t after = wt_event_blame(logs, ncons + 1, blame);
    printf("sem_pc: %.2f s, %u posts, %d consumers waited %.3f s in %llu waits\n", wall / 1e9,
           posts, ncons, idle[F_CLAIM] / 1e9, (unsigned long long)count[F_CLAIM]);
    printf("truth wait_claim_ns=%llu waits=%llu blame_post_token_ns=%llu"
           " blame_release_all_ns=%llu after_post_ns=%llu posts=%u wall_ns=%llu\n",
           (unsigned long long)idle[F_CLAIM], (unsigned long long)count[F_CLAIM],
           (unsigned long long)blame[F_POST], (unsigned long long)blame[F_RELEASE],
           (unsigned long long)after, posts, (unsigned long long)wall);
    return 0;
}
