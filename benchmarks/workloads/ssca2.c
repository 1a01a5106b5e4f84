/* ssca2: the SSCA#2 shape of Tallent et al. (PPoPP'10, section 5.3; Bader and Madduri's
 * Pthreads SSCA#2). Two phases:
 *   1. graph construction: every thread generates edges (`generate_edges`, CPU work outside
 *      any lock) and inserts each one with `add_edge`, which takes ONE graph-wide mutex and
 *      does the insert under it (appends to the vertex's adjacency and updates the weight
 *      index: ADD_HOLD_NS). Every 256 edges a thread also reports progress under the same
 *      mutex (`note_progress`, a short hold). The coarse-grained lock serialises the phase:
 *      that is the contention, and `add_edge` the culprit;
 *   2. after a barrier, the analysis kernel (`compute_kernel`: degree and two-hop weight
 *      sums over each thread's vertices) reads the graph lock-free: no contention at all.
 *
 * Usage: ssca2 [scale=1.0]   (THREADS threads, EDGES x scale edges; ~1.5 s at 1.0 on 2 CPUs)
 *
 * Ground truth (blameprof's definition for mutexes, docs/lock-blame.md: for each hold of a
 * function, the overlap of every wait with it; idleness = the wait, at the waiter), measured
 * into preallocated per-thread logs with CLOCK_MONOTONIC (tests/programs/truth_log.h): every
 * contended acquisition [pthread_mutex_lock called after a failed trylock, returned] and
 * every hold [acquired, pthread_mutex_unlock called]. Prints
 *   truth blame.mutex add_edge|note_progress <ns>
 *   truth idleness.mutex add_edge|note_progress <ns>   (at the function that locks)
 *   truth idleness.mutex generate_edges <ns>           (their caller: the sum)
 *   truth culprit add_edge
 *   truth candidates add_edge,note_progress,compute_kernel
 * (not generate_edges among the candidates: it holds nothing itself, and its inclusive blame
 * is add_edge's; a line only for a function with at least 2% of that metric's total).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_ADD, F_PROGRESS, NFUNC };
static const char *const FNAME[NFUNC] = {"add_edge", "note_progress"};

#define THREADS 3
#define EDGES 90000           /* at scale 1.0, all threads together */
#define VERTICES 4096
#define GEN_NS 4000ull        /* generating one edge, no lock */
#define ADD_HOLD_NS 5000ull   /* inserting it, under the graph lock */
#define PROGRESS_EVERY 256
#define KERNEL_PASSES 500     /* phase 2 work, at scale 1.0 */

typedef struct {
    uint32_t to, w;
} edge_t;

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t phase_barrier;
static edge_t *adj[VERTICES];
static uint32_t deg[VERTICES], cap[VERTICES];
static uint64_t weight_index[256];
static long edges_done;
static int nedges_per_thread, kernel_passes;
static volatile uint64_t sink[64];
static uint64_t result[THREADS];

static inline __attribute__((always_inline)) uint64_t g_lock(tlog_t *l, int fn) {
    uint64_t w0 = now_ns();
    if (pthread_mutex_trylock(&graph_lock) == 0)
        return w0; /* uncontended: no wait */
    pthread_mutex_lock(&graph_lock);
    uint64_t h0 = now_ns();
    wt_wait(l, fn, w0, h0);
    return h0;
}

static inline __attribute__((always_inline)) void g_unlock(tlog_t *l, int fn, uint64_t h0) {
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&graph_lock);
    if (l->nholds < l->cap)
        l->holds[l->nholds++] = (ival_t){h0, h1, 0, fn};
    else
        l->overflow = 1;
}

/* Inserts u -> v with weight w under the graph-wide lock. */
NOINL void add_edge(tlog_t *l, uint32_t u, uint32_t v, uint32_t w) {
    uint64_t h0 = g_lock(l, F_ADD);
    if (deg[u] == cap[u]) {
        uint32_t nc = cap[u] ? cap[u] * 2 : 16;
        edge_t *na = realloc(adj[u], nc * sizeof *na);
        if (!na)
            abort();
        adj[u] = na;
        cap[u] = nc;
    }
    adj[u][deg[u]++] = (edge_t){v, w};
    busy_for(ADD_HOLD_NS, u ^ v); /* keep the weight index up to date */
    weight_index[w & 255] += w;
    g_unlock(l, F_ADD, h0);
}

NOINL void note_progress(tlog_t *l, long n) {
    uint64_t h0 = g_lock(l, F_PROGRESS);
    edges_done += n;
    g_unlock(l, F_PROGRESS, h0);
}

/* Phase 1 of one thread: generate its edges (R-MAT-like hashing) and insert them. */
NOINL void generate_edges(tlog_t *l, int me) {
    uint64_t x = wl_mix((uint64_t)me + 1);
    for (int i = 0; i < nedges_per_thread; i++) {
        busy_for(GEN_NS, (unsigned)x); /* pick the edge */
        x = wl_mix(x + (uint64_t)i);
        uint32_t u = (uint32_t)(x % VERTICES), v = (uint32_t)((x >> 20) % VERTICES);
        add_edge(l, u, v, (uint32_t)(x >> 40) & 0xffff);
        if ((i + 1) % PROGRESS_EVERY == 0)
            note_progress(l, PROGRESS_EVERY);
    }
}

/* Phase 2 of one thread: lock-free analysis of its share of the vertices. */
NOINL uint64_t compute_kernel(int me) {
    uint64_t acc = 0;
    for (int pass = 0; pass < kernel_passes; pass++)
        for (uint32_t u = (uint32_t)me; u < VERTICES; u += THREADS) {
            uint64_t two_hop = 0;
            for (uint32_t k = 0; k < deg[u]; k++) {
                uint32_t v = adj[u][k].to;
                two_hop += (uint64_t)adj[u][k].w * (deg[v] + 1);
                for (uint32_t j = 0; j < deg[v] && j < 4; j++)
                    two_hop += adj[v][j].w ^ (uint64_t)pass;
            }
            acc = wl_mix(acc + two_hop + deg[u]);
        }
    return acc;
}

static void *ssca_worker(void *arg) {
    tlog_t *l = arg;
    generate_edges(l, l->index);
    pthread_barrier_wait(&phase_barrier);
    result[l->index] = compute_kernel(l->index);
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale_max(argc, argv, "ssca2", 100);
    nedges_per_thread = (int)(EDGES * scale / THREADS);
    if (nedges_per_thread < PROGRESS_EVERY)
        nedges_per_thread = PROGRESS_EVERY;
    kernel_passes = (int)(KERNEL_PASSES * scale) + 1;
    pthread_barrier_init(&phase_barrier, NULL, THREADS);
    uint64_t wall;
    tlog_t *logs = wl_run_logged(THREADS, ssca_worker, (size_t)nedges_per_thread * 2 + 16, &wall);
    if (!logs)
        return 2;
    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, count[NFUNC] = {0};
    if (truth_mutex_totals(logs, THREADS, "ssca2", blame, idle, held, count, NULL))
        return 2;
    uint64_t r = 0;
    for (int i = 0; i < THREADS; i++)
        r ^= result[i];
    sink[0] = r;
    printf("ssca2: %.2f s, %d threads, %ld edges, %d kernel passes (result %016llx)\n",
           wall / 1e9, THREADS, edges_done, kernel_passes, (unsigned long long)r);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-13s holds=%llu held=%.3f s waited=%.3f s blame=%.3f s\n", FNAME[f],
               (unsigned long long)count[f], held[f] / 1e9, idle[f] / 1e9, blame[f] / 1e9);
    wl_truth_major("blame.mutex", FNAME, NFUNC, blame);
    uint64_t ti = wl_truth_major("idleness.mutex", FNAME, NFUNC, idle);
    truth_ns("idleness.mutex", "generate_edges", ti);
    wl_truth_end("add_edge", "add_edge,note_progress,compute_kernel", (uint64_t)edges_done);
    return edges_done == (long)nedges_per_thread / PROGRESS_EVERY * PROGRESS_EVERY * THREADS ? 0
                                                                                           : 1;
}
