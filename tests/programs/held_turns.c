/* held_turns: THREADS threads take turns at one mutex, `turn_lock`: each holds it for HOLD_NS
 * of CPU time, computing in take_turn(), then computes a tenth of that outside it, so that
 * another thread waits through almost every hold. What the holders' `held.contended` must
 * show, whatever the hold length and the number of waiters, and what the lock view's
 * acquisitions must count.
 *
 * Each thread counts itself waiting (an atomic) from just before its lock call until it
 * returns; a holder polls that count as it computes and adds the CPU time of each slice to
 * `contended_ns` when someone waited at its start and at its end. It counts its
 * acquisitions exactly.
 *
 * Usage: held_turns [seconds=1] [threads=3] [hold_ns=200000]
 * Prints one line: truth contended_ns=.. inside_ns=.. inside_wall_ns=.. outside_ns=..
 * acquisitions=.. (inside_wall_ns: the holds' wall-clock time; above inside_ns, the holders
 * were descheduled inside their holds: the machine was loaded).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "truth_log.h" /* now_ns(), cpu_ns() */

pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int waiting;
static uint64_t deadline, hold_ns;
static volatile uint64_t sink;

struct turns {
    uint64_t contended_ns, inside_ns, inside_wall_ns, outside_ns, acquisitions;
};

/* Computes for `ns` of CPU time; with `contended`, adds to it the CPU time of the slices
 * during which someone waited (at the slice's start and end). */
static void compute(uint64_t ns, uint64_t *contended) {
    uint64_t x = sink, start = cpu_ns(), t = start;
    while (t - start < ns) {
        int before = atomic_load(&waiting);
        for (int i = 0; i < 300; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t now = cpu_ns();
        if (contended && before > 0 && atomic_load(&waiting) > 0)
            *contended += now - t;
        t = now;
    }
    sink = x;
}

__attribute__((noinline)) void take_turn(struct turns *t) {
    uint64_t t0 = cpu_ns(), w0 = now_ns();
    compute(hold_ns, &t->contended_ns);
    t->inside_ns += cpu_ns() - t0;
    t->inside_wall_ns += now_ns() - w0;
}

__attribute__((noinline)) void between_turns(struct turns *t) {
    uint64_t t0 = cpu_ns();
    compute(hold_ns / 10, NULL);
    t->outside_ns += cpu_ns() - t0;
}

static void *worker(void *arg) {
    struct turns *t = arg;
    while (now_ns() < deadline) {
        atomic_fetch_add(&waiting, 1);
        pthread_mutex_lock(&turn_lock);
        atomic_fetch_sub(&waiting, 1);
        t->acquisitions++;
        take_turn(t);
        pthread_mutex_unlock(&turn_lock);
        between_turns(t);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int threads = argc > 2 ? atoi(argv[2]) : 3;
    hold_ns = argc > 3 ? strtoull(argv[3], NULL, 10) : 200000;
    if (threads < 1 || threads > 64 || hold_ns == 0) {
        fprintf(stderr, "usage: held_turns [seconds] [threads 1-64] [hold_ns]\n");
        return 2;
    }
    deadline = now_ns() + (uint64_t)(seconds * 1e9);
    pthread_t tid[64];
    struct turns t[64] = {{0}};
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, worker, &t[i]);
    struct turns sum = {0};
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        sum.contended_ns += t[i].contended_ns;
        sum.inside_ns += t[i].inside_ns;
        sum.inside_wall_ns += t[i].inside_wall_ns;
        sum.outside_ns += t[i].outside_ns;
        sum.acquisitions += t[i].acquisitions;
    }
    printf("truth contended_ns=%llu inside_ns=%llu inside_wall_ns=%llu outside_ns=%llu "
           "acquisitions=%llu\n",
           (unsigned long long)sum.contended_ns, (unsigned long long)sum.inside_ns,
           (unsigned long long)sum.inside_wall_ns, (unsigned long long)sum.outside_ns,
           (unsigned long long)sum.acquisitions);
    return 0;
}
