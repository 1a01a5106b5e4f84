/* syncperf_trybarrier: a hand-made barrier that busy-waits with pthread_mutex_trylock, with
 * one straggler (SyncPerf, Alam et al., "Improper Primitives" / "Extensive Try-lock
 * Failures": PARSEC fluidanimate and streamcluster "implement a custom barrier by doing a
 * busy wait with a try-lock"; PARSEC's parsec_barrier with spinning enabled spins, then
 * takes its mutex with a trylock loop, then sleeps on a condition variable).
 *
 * `spin_barrier_wait`: take the barrier's mutex by spinning on pthread_mutex_trylock, count
 * the arrival; the last to arrive starts the next generation, broadcasts the condition
 * variable and leaves. The others release the mutex, spin up to SPIN_NS watching the
 * generation, spin on trylock to retake the mutex, and if the generation has still not
 * changed sleep in pthread_cond_wait until the broadcast.
 *
 * QUICK threads compute QUICK_NS per round in `quick_step`, one straggler computes SLOW_NS
 * in `straggler_step`; each step ends at the barrier. ROUNDS rounds.
 *
 * What blameprof sees (docs/lock-blame.md): a pthread_mutex_trylock never waits, so the
 * trylock loops and the bounded spin are CPU time, `work` at spin_barrier_wait (under
 * quick_step), with no idleness and nobody blamed. Only the blocking part is a wait: the
 * pthread_cond_wait after the spin is idleness.condvar at quick_step, blamed on the
 * broadcast of the last arrival, the straggler (straggler_step -> spin_barrier_wait ->
 * pthread_cond_broadcast). Retaking the mutex inside pthread_cond_wait after the wake is
 * idleness.mutex (microseconds; not in the truth). The truth follows that: the truth
 * lines cover the condition-variable waits only; the spinning is printed apart as CPU time.
 * A user sees the straggler on top of the blame, and the quick threads' spin as work in
 * spin_barrier_wait: the trylock busy-wait is visible only as CPU burnt in the barrier.
 *
 * Usage: syncperf_trybarrier [scale=1.0]   (scale 1.0: 350 rounds, about 1.2-1.7 s)
 *
 * Truth (obj_truth.h): every pthread_cond_wait [called, returned] is a wait of the step
 * that called the barrier; each broadcast an event of the last arriver's step;
 * blame.condvar = the waiting in (previous broadcast, its broadcast]; idleness.condvar =
 * the waits until the broadcast that ended them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_QUICK, F_SLOW, NFUNC };
static const char *const FNAME[NFUNC] = {"quick_step", "straggler_step"};

#define QUICK 2
#define QUICK_NS 500000ull
#define SLOW_NS 3000000ull
#define SPIN_NS 100000ull

typedef struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int n, count;
    volatile int gen;
} spin_barrier_t;

static spin_barrier_t bar;
static int rounds;
static uint64_t spin_cpu_ns[QUICK + 1];
static uint64_t trylock_fails[QUICK + 1];

static inline void trylock_spin(pthread_mutex_t *m, int self) {
    while (pthread_mutex_trylock(m) == EBUSY)
        trylock_fails[self]++;
}

/* Returns 1 for the last arrival. */
NOINL int spin_barrier_wait(spin_barrier_t *b, tlog_t *l, int fn) {
    uint64_t c0 = cpu_ns();
    trylock_spin(&b->m, l->index);
    int gen = b->gen;
    if (++b->count == b->n) {
        b->count = 0;
        __atomic_store_n(&b->gen, gen + 1, __ATOMIC_RELEASE);
        ob_event(l, fn, 0, now_ns());
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->m);
        spin_cpu_ns[l->index] += cpu_ns() - c0;
        return 1;
    }
    pthread_mutex_unlock(&b->m);
    uint64_t end = now_ns() + SPIN_NS;
    while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen && now_ns() < end) {
    }
    trylock_spin(&b->m, l->index);
    spin_cpu_ns[l->index] += cpu_ns() - c0;
    while (b->gen == gen) {
        uint64_t a = now_ns();
        pthread_cond_wait(&b->cv, &b->m);
        ob_wait(l, fn, 0, a, now_ns());
    }
    pthread_mutex_unlock(&b->m);
    return 0;
}

NOINL void quick_step(tlog_t *l, int round) {
    busy_for(QUICK_NS, (unsigned)round);
    spin_barrier_wait(&bar, l, F_QUICK);
    wt_sink[l->index]++;
}

NOINL void straggler_step(tlog_t *l, int round) {
    busy_for(SLOW_NS, (unsigned)round);
    spin_barrier_wait(&bar, l, F_SLOW);
    wt_sink[l->index]++;
}

static void *thread_main(void *arg) {
    tlog_t *l = arg;
    for (int r = 0; r < rounds; r++) {
        if (l->index == 0)
            straggler_step(l, r);
        else
            quick_step(l, r);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "syncperf_trybarrier");
    rounds = (int)(350 * scale + 0.5);
    if (rounds < 10)
        rounds = 10;
    int nthreads = QUICK + 1;
    pthread_mutex_init(&bar.m, NULL);
    pthread_cond_init(&bar.cv, NULL);
    bar.n = nthreads;
    uint64_t wall;
    tlog_t *logs = wl_run_logged(nthreads, thread_main, (size_t)rounds * 2 + 10, &wall);
    if (!logs)
        return 2;

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0};
    uint64_t after = ob_event_truth(logs, nthreads, 1, "syncperf_trybarrier", blame, idle);
    if (after == UINT64_MAX)
        return 2;
    uint64_t spin_quick = 0, fails = 0;
    for (int i = 1; i < nthreads; i++)
        spin_quick += spin_cpu_ns[i];
    for (int i = 0; i < nthreads; i++)
        fails += trylock_fails[i];
    printf("syncperf_trybarrier: %.2f s, %d rounds, %d quick threads + 1 straggler;"
           " quick threads spun %.3f s of CPU in the barrier (work, not idleness),"
           " %llu trylock failures; after the broadcast %.3f ms\n",
           wall / 1e9, rounds, QUICK, spin_quick / 1e9, (unsigned long long)fails, after / 1e6);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-14s cond-waited=%.3f s blame=%.3f s\n", FNAME[f], idle[f] / 1e9,
               blame[f] / 1e9);
    wl_truth_pairs("condvar", FNAME, NFUNC, blame, idle);
    wl_truth_end("straggler_step", "quick_step,straggler_step", (uint64_t)rounds);
    return 0;
}
