/* freelunch_forkjoin: the fork-join scenario of the Free Lunch paper (David, Thomas, Lawall,
 * Muller, section 2.3.1, Figure 3): a master distributes work to workers and waits for the
 * result, round after round. Here the master forks the workers of each round with
 * pthread_create and waits for them with pthread_join (`join_all`).
 *
 * Imbalance by design: the data is split in equal blocks (`compute_block`, BLOCKS of them)
 * plus the remainder, which a separate routine handles (`compute_remainder`) and which is
 * REMAINDER_FACTOR times a block. The master joins the block workers first, then the
 * remainder's; its waiting for the remainder is the imbalance, and `compute_remainder` the
 * culprit.
 *
 * Work is counted in iterations, not wall time, so the imbalance is real CPU work: on 2 CPUs
 * three workers share the processors while all run, and the remainder runs alone at the end.
 *
 * Usage: freelunch_forkjoin [scale=1.0]   (ROUNDS x scale rounds; ~1.5 s at 1.0 on 2 CPUs)
 *
 * Ground truth (docs/lock-blame.md: a join's wait is idleness at the joiner, blamed on the
 * joined thread as it ends, at its start routine when that returns), CLOCK_MONOTONIC: each
 * pthread_join call [called, returned] at join_all; each worker logs the moment just before
 * its routine returns. The blame of a join is the part of its wait up to that moment (the
 * rest, the thread's exit, is nobody's). Prints
 *   truth idleness.join join_all <ns>
 *   truth blame.join compute_block|compute_remainder <ns>
 *   truth culprit compute_remainder
 *   truth candidates compute_block,compute_remainder
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

#define ROUNDS 200
#define BLOCKS 2
#define BLOCK_ITERS 200000ull  /* ~1 ms of CPU */
#define REMAINDER_FACTOR 8

typedef struct {
    uint64_t iters, seed, result;
    uint64_t end_ns; /* just before the routine returns */
} job_t;

static inline __attribute__((always_inline)) void crunch(job_t *j) {
    uint64_t x = j->seed;
    for (uint64_t i = 0; i < j->iters; i++)
        x = wl_mix(x + i);
    j->result = x;
    j->end_ns = now_ns();
}

NOINL void *compute_block(void *arg) {
    crunch(arg);
    return arg;
}

NOINL void *compute_remainder(void *arg) {
    crunch(arg);
    return arg;
}

/* Joins the round's workers in order; adds each join's wait to *waited and its blame (the
 * wait up to the worker's end) to blame[worker]. */
NOINL int join_all(pthread_t *th, job_t *jobs, int n, uint64_t *waited, uint64_t *blame) {
    int ok = 1;
    for (int i = 0; i < n; i++) {
        void *ret = NULL;
        uint64_t a = now_ns();
        ok &= pthread_join(th[i], &ret) == 0 && ret == &jobs[i];
        uint64_t b = now_ns();
        *waited += b - a;
        uint64_t e = jobs[i].end_ns;
        if (e > a)
            blame[i] += (e < b ? e : b) - a;
    }
    return ok;
}

int main(int argc, char **argv) {
    double scale = wl_scale_max(argc, argv, "freelunch_forkjoin", 100);
    int rounds = (int)(ROUNDS * scale);
    if (rounds < 1)
        rounds = 1;
    enum { N = BLOCKS + 1 };
    uint64_t waited = 0, blame[N] = {0}, acc = 0;
    int ok = 1;
    uint64_t t0 = now_ns();
    for (int r = 0; r < rounds; r++) {
        job_t jobs[N];
        pthread_t th[N];
        for (int i = 0; i < N; i++) {
            jobs[i] = (job_t){i < BLOCKS ? BLOCK_ITERS : BLOCK_ITERS * REMAINDER_FACTOR,
                              wl_mix((uint64_t)(r * N + i)), 0, 0};
            if (pthread_create(&th[i], NULL, i < BLOCKS ? compute_block : compute_remainder,
                               &jobs[i]) != 0) {
                perror("pthread_create");
                return 2;
            }
        }
        ok &= join_all(th, jobs, N, &waited, blame);
        for (int i = 0; i < N; i++)
            acc ^= jobs[i].result;
    }
    uint64_t wall = now_ns() - t0;
    uint64_t b_block = 0;
    for (int i = 0; i < BLOCKS; i++)
        b_block += blame[i];
    printf("freelunch_forkjoin: %.2f s, %d rounds of %d block workers + 1 remainder worker"
           " (x%d), result %016llx\n",
           wall / 1e9, rounds, BLOCKS, REMAINDER_FACTOR, (unsigned long long)acc);
    printf("  master joined for %.3f s: blame compute_block %.3f s, compute_remainder %.3f s,"
           " thread exits %.3f s\n",
           waited / 1e9, b_block / 1e9, blame[BLOCKS] / 1e9,
           (waited - b_block - blame[BLOCKS]) / 1e9);
    truth_ns("idleness.join", "join_all", waited);
    truth_ns("blame.join", "compute_block", b_block);
    truth_ns("blame.join", "compute_remainder", blame[BLOCKS]);
    wl_truth_end("compute_remainder", "compute_block,compute_remainder", (uint64_t)rounds);
    return ok ? 0 : 1;
}
