/* syncperf_canneal: one long critical section among short ones (SyncPerf, Alam et al.,
 * "Improper Granularity", PARSEC canneal: the seed lock's critical section contains the
 * whole random number generator, although only the seed is shared; "only less than 1%
 * instructions access the shared memory"). Few acquisitions, high contention.
 *
 * THREADS annealing threads each make STEPS steps. A step evaluates a move outside any lock
 * (`evaluate_move`, EVAL_NS of computing), then reads the shared netlist under the lock in
 * `get_location` (SHORT_NS of computing); every SWAP_EVERY-th step it calls `swap_elements`,
 * which takes the same lock and, while holding it, draws its random numbers (LONG_NS of
 * computing: the generator that should be outside) before swapping two elements. Both
 * functions wait on the lock (idleness); swap_elements' long holds cause most of it (blame).
 *
 * Usage: syncperf_canneal [scale=1.0]   (scale 1.0: about 1.3 s on 2 CPUs)
 *
 * Truth (obj_truth.h): every wait [lock called, returned] and hold [returned, unlock
 * called], CLOCK_MONOTONIC; blame.mutex of a function = the overlap of all waits with its
 * holds; idleness.mutex = its contended waits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_SWAP, F_GET, NFUNC };
static const char *const FNAME[NFUNC] = {"swap_elements", "get_location"};

#define THREADS 3
#define EVAL_NS 150000ull
#define SHORT_NS 5000ull
#define LONG_NS 1500000ull
#define SWAP_EVERY 8
#define NELEM 4096

static pthread_mutex_t seed_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t netlist[NELEM];
static uint64_t seed = 12345;
static int steps;

NOINL uint64_t evaluate_move(unsigned step, unsigned seed0) {
    busy_for(EVAL_NS, step * 31u + seed0);
    return wt_sink[step & 1023];
}

NOINL uint64_t get_location(tlog_t *l, unsigned idx) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&seed_lock);
    uint64_t h0 = now_ns();
    busy_for(SHORT_NS, idx);
    uint64_t v = netlist[idx % NELEM];
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&seed_lock);
    ob_hold(l, F_GET, 0, w0, h0, h1);
    return v;
}

NOINL void swap_elements(tlog_t *l, unsigned a) {
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&seed_lock);
    uint64_t h0 = now_ns();
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    busy_for(LONG_NS, (unsigned)(seed >> 33)); /* the random generator, inside the lock */
    unsigned b = (unsigned)(seed >> 40) % NELEM;
    uint64_t t = netlist[a % NELEM];
    netlist[a % NELEM] = netlist[b];
    netlist[b] = t;
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&seed_lock);
    ob_hold(l, F_SWAP, 0, w0, h0, h1);
}

static void *anneal_thread(void *arg) {
    tlog_t *l = arg;
    uint64_t sum = 0;
    for (int s = 0; s < steps; s++) {
        sum += evaluate_move((unsigned)s, (unsigned)l->index);
        sum += get_location(l, (unsigned)(s * 7 + l->index));
        if ((s + l->index * 3) % SWAP_EVERY == 0)
            swap_elements(l, (unsigned)sum);
    }
    wt_sink[l->index] += sum;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "syncperf_canneal");
    steps = (int)(1600 * scale + 0.5);
    if (steps < 8)
        steps = 8;
    for (int i = 0; i < NELEM; i++)
        netlist[i] = (uint64_t)i;
    uint64_t wall;
    tlog_t *logs = wl_run_logged(THREADS, anneal_thread, (size_t)steps * 2 + 10, &wall);
    if (!logs)
        return 2;

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, contended[NFUNC] = {0};
    if (ob_mutex_truth(logs, THREADS, 1, "syncperf_canneal", blame, idle, contended))
        return 2;
    printf("syncperf_canneal: %.2f s, %d threads, %d steps each\n", wall / 1e9, THREADS, steps);
    ob_mutex_lines(FNAME, NFUNC, contended, idle, blame, 0);
    wl_truth_pairs("mutex", FNAME, NFUNC, blame, idle);
    wl_truth_end("swap_elements", "swap_elements,get_location,evaluate_move",
                 (uint64_t)THREADS * steps);
    return 0;
}
