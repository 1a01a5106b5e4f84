/* uts: the UTS shape of Tallent et al. (PPoPP'10, section 5.2): an unbalanced tree search
 * with work stealing. Each worker owns a deque with two parts: a local stack it uses
 * without locks, and a shared part, protected by the worker's pthread mutex, from which
 * others steal. When its local stack is deep, a worker moves a chunk of nodes to its shared
 * part (`push_shared`); when its local stack is empty it takes a chunk back from its own
 * shared part (`pop_shared`) or steals one from another worker's (`steal`). As in the paper,
 * the contention is for the privilege of providing or extracting work.
 *
 * The tree: a node's children are decided by a hash of its id (a UTS binomial tree with
 * hubs: a node has HUB children with probability HUB_PERMILLE, M with Q_PERMILLE, else
 * none; the root has ROOT_KIDS x scale children), so the tree is deterministic but
 * unpredictable: most subtrees are a few nodes, a hub's has thousands. A worker that meets
 * a hub releases its surplus in a burst of pushes while the others, out of work, steal. Visiting a node costs VISIT_NS of CPU work.
 *
 * Culprit by design: `push_shared` prepares every node it makes stealable *while holding the
 * lock* (it computes each node's descriptor, PREP_NS per node, a chunk of CHUNK nodes:
 * ~60 us per hold), where `steal` and `pop_shared` hold the lock only to copy a chunk
 * (about a microsecond). Thieves that come to a busy worker's deque therefore wait behind
 * `push_shared`, and `push_shared` is blamed for most of the waiting.
 *
 * Usage: uts [scale=1.0]   (THREADS workers; ~1.5 s at 1.0 on 2 CPUs)
 *
 * Ground truth (blameprof's definition for mutexes, docs/lock-blame.md: a holder is blamed,
 * for each of its holds, with the overlap of every wait with that hold; idleness is the
 * wait, at the waiter). Measured into preallocated per-thread logs (tests/programs/
 * truth_log.h), CLOCK_MONOTONIC: every contended wait [pthread_mutex_lock called (after a
 * failed trylock), returned] and every hold
 * [returned, pthread_mutex_unlock called], tagged with the function and the deque's index.
 * Per deque, each wait is met with the holds of that deque's mutex. Prints
 *   truth blame.mutex push_shared|pop_shared|steal <ns>
 *   truth idleness.mutex push_shared|pop_shared|steal <ns>
 * (a line only for a function with at least 2% of that metric's total: the rest are a few
 * ms, below any tolerance's resolution), and
 *   truth culprit push_shared
 *   truth candidates push_shared,pop_shared,steal
 *   truth ops <nodes visited>
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_PUSH, F_POP, F_STEAL, NFUNC };
static const char *const FNAME[NFUNC] = {"push_shared", "pop_shared", "steal"};

#define THREADS 3
#define ROOT_KIDS 22000 /* at scale 1.0 */
#define M 4             /* children of an ordinary non-leaf */
#define Q_PERMILLE 80   /* probability of being an ordinary non-leaf */
#define HUB 200         /* children of a hub */
#define HUB_PERMILLE 3  /* probability of being a hub: mean children 0.32 + 0.6 = 0.92 */
#define VISIT_NS 4000ull
#define PREP_NS 5000ull /* per node made stealable, under the lock */
#define CHUNK 8
#define LOCAL_CAP (1 << 16)
#define SHARED_CAP (1 << 16)

typedef struct {
    uint64_t id;
    int depth;
} node_t;

typedef struct {
    pthread_mutex_t m;
    node_t shared[SHARED_CAP]; /* [head, tail) */
    unsigned head, tail;
    _Atomic unsigned avail; /* tail - head, read without the lock by thieves */
    char pad[64];
} deque_t;

static deque_t deques[THREADS];
static _Atomic long outstanding; /* nodes created and not yet visited */
static _Atomic long visited;
static volatile uint64_t sink[64];

/* Wall-clock-bounded CPU work on `x` (the SHA-1 rounds of UTS). */
static inline __attribute__((always_inline)) uint64_t crunch(uint64_t ns, uint64_t x) {
    uint64_t end = now_ns() + ns;
    do {
        for (int i = 0; i < 16; i++)
            x = wl_mix(x + (uint64_t)i);
    } while (now_ns() < end);
    return x;
}

/* The logged lock of deque `d` by function `fn`; returns the hold start. Only a contended
 * acquisition is a wait (the trylock costs what an uncontended lock does; without it the
 * truth would count every lock call's ~50 ns of clock reads as waiting). */
static inline __attribute__((always_inline)) uint64_t dq_lock(tlog_t *l, int d, int fn) {
    uint64_t w0 = now_ns();
    if (pthread_mutex_trylock(&deques[d].m) == 0)
        return w0;
    pthread_mutex_lock(&deques[d].m);
    uint64_t h0 = now_ns();
    if (l->nwaits < l->cap)
        l->waits[l->nwaits++] = (ival_t){w0, h0, (uint64_t)d, fn};
    else
        l->overflow = 1;
    return h0;
}

static inline __attribute__((always_inline)) void dq_unlock(tlog_t *l, int d, int fn,
                                                          uint64_t h0) {
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&deques[d].m);
    if (l->nholds < l->cap)
        l->holds[l->nholds++] = (ival_t){h0, h1, (uint64_t)d, fn};
    else
        l->overflow = 1;
}

/* Moves CHUNK nodes from the bottom of the local stack to the shared part, preparing each
 * one's descriptor under the lock (the design's mistake: that work needs no lock). */
NOINL void push_shared(tlog_t *l, int me, node_t *local, int *nlocal) {
    deque_t *q = &deques[me];
    uint64_t h0 = dq_lock(l, me, F_PUSH);
    for (int i = 0; i < CHUNK; i++) {
        node_t n = local[i];
        sink[i] += crunch(PREP_NS, n.id); /* the node's stealable descriptor */
        q->shared[q->tail++ % SHARED_CAP] = n;
    }
    atomic_store(&q->avail, q->tail - q->head);
    dq_unlock(l, me, F_PUSH, h0);
    memmove(local, local + CHUNK, (size_t)(*nlocal - CHUNK) * sizeof *local);
    *nlocal -= CHUNK;
}

/* Takes up to CHUNK nodes from deque `d`'s shared part into the local stack (short hold). */
static inline __attribute__((always_inline)) int take_chunk(tlog_t *l, int d, int fn,
                                                           node_t *local, int *nlocal) {
    deque_t *q = &deques[d];
    uint64_t h0 = dq_lock(l, d, fn);
    int got = 0;
    while (got < CHUNK && q->head != q->tail) {
        local[(*nlocal)++] = q->shared[q->head++ % SHARED_CAP];
        got++;
    }
    atomic_store(&q->avail, q->tail - q->head);
    dq_unlock(l, d, fn, h0);
    return got;
}

NOINL int pop_shared(tlog_t *l, int me, node_t *local, int *nlocal) {
    return take_chunk(l, me, F_POP, local, nlocal);
}

/* Steals a chunk from the first other deque that has work (checked without the lock). */
NOINL int steal(tlog_t *l, int me, node_t *local, int *nlocal) {
    for (int k = 1; k < THREADS; k++) {
        int v = (me + k) % THREADS;
        if (atomic_load(&deques[v].avail) == 0)
            continue;
        int got = take_chunk(l, v, F_STEAL, local, nlocal);
        if (got)
            return got;
    }
    return 0;
}

/* Visits one node: its work, then its children onto the local stack. */
NOINL void visit(node_t n, node_t *local, int *nlocal) {
    sink[32 + n.depth % 16] += crunch(VISIT_NS, n.id);
    uint64_t h = wl_mix(n.id); /* the tree's shape does not depend on timing */
    int kids = 0;
    if (n.depth == 0)
        kids = (int)(sink[63] + 0); /* the root's count is set by main */
    else if ((h % 1000) < HUB_PERMILLE)
        kids = HUB;
    else if ((h % 1000) < HUB_PERMILLE + Q_PERMILLE)
        kids = M;
    for (int i = 0; i < kids && *nlocal < LOCAL_CAP; i++)
        local[(*nlocal)++] = (node_t){wl_mix(h + (uint64_t)i + 1), n.depth + 1};
    atomic_fetch_add(&outstanding, kids - 1);
    atomic_fetch_add(&visited, 1);
}

static void *worker(void *arg) {
    tlog_t *l = arg;
    int me = l->index;
    node_t *local = malloc(LOCAL_CAP * sizeof *local);
    int nlocal = 0;
    if (!local)
        abort();
    if (me == 0)
        local[nlocal++] = (node_t){12345, 0};
    for (;;) {
        if (nlocal > 0) {
            node_t n = local[--nlocal];
            visit(n, local, &nlocal);
            /* release surplus work to thieves (UTS: local depth >= 2 chunks) */
            if (nlocal >= 2 * CHUNK)
                push_shared(l, me, local, &nlocal);
            continue;
        }
        if (atomic_load(&deques[me].avail) && pop_shared(l, me, local, &nlocal))
            continue;
        if (steal(l, me, local, &nlocal))
            continue;
        if (atomic_load(&outstanding) == 0)
            break;
        struct timespec ts = {0, 20000}; /* nothing to steal: back off */
        nanosleep(&ts, NULL);
    }
    free(local);
    return NULL;
}

/* Per deque: blame[holder fn] += overlap of each wait with each hold of that deque's
 * mutex; idle[waiter fn] += wait. */
static int truth(tlog_t *logs, uint64_t *blame, uint64_t *idle, uint64_t *held,
                 uint64_t *count) {
    size_t nh;
    ival_t *all = truth_merge_holds(logs, THREADS, &nh);
    if (!all)
        return -1;
    ival_t *mine = malloc((nh + 1) * sizeof *mine);
    if (!mine)
        return -1;
    truth_hold_totals(all, nh, held, count);
    for (int d = 0; d < THREADS; d++) {
        size_t k = 0;
        for (size_t h = 0; h < nh; h++) /* still sorted by start */
            if (all[h].cpu == (uint64_t)d)
                mine[k++] = all[h];
        for (int i = 0; i < THREADS; i++)
            for (size_t j = 0; j < logs[i].nwaits; j++) {
                ival_t w = logs[i].waits[j];
                if (w.cpu != (uint64_t)d)
                    continue;
                idle[w.fn] += w.b - w.a;
                for (size_t h = truth_first_hold(mine, k, w.a); h < k && mine[h].a < w.b; h++)
                    blame[mine[h].fn] += truth_overlap(&mine[h], &w);
            }
    }
    free(mine);
    free(all);
    return 0;
}

int main(int argc, char **argv) {
    double scale = wl_scale_max(argc, argv, "uts", 100);
    int root_kids = (int)(ROOT_KIDS * scale);
    if (root_kids < 1)
        root_kids = 1;
    sink[63] = (uint64_t)root_kids;
    atomic_store(&outstanding, 1);
    for (int d = 0; d < THREADS; d++)
        pthread_mutex_init(&deques[d].m, NULL);
    uint64_t wall;
    tlog_t *logs = wl_run_logged(THREADS, worker, (size_t)(400000 * scale) + 10000, &wall);
    if (!logs)
        return 2;
    if (truth_overflowed(logs, THREADS, "uts"))
        return 2;
    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, held[NFUNC] = {0}, count[NFUNC] = {0};
    if (truth(logs, blame, idle, held, count))
        return 2;
    printf("uts: %.2f s, %d workers, %ld nodes (root has %d children)\n", wall / 1e9, THREADS,
           (long)atomic_load(&visited), root_kids);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-11s holds=%llu held=%.3f s waited=%.3f s blame=%.3f s\n", FNAME[f],
               (unsigned long long)count[f], held[f] / 1e9, idle[f] / 1e9, blame[f] / 1e9);
    /* Truth lines for the functions that carry at least 2% of the kind's total (the others
     * are a few ms or less: noise at any tolerance); the ranking covers all three. */
    wl_truth_major("blame.mutex", FNAME, NFUNC, blame);
    wl_truth_major("idleness.mutex", FNAME, NFUNC, idle);
    wl_truth_end("push_shared", "push_shared,pop_shared,steal", (uint64_t)atomic_load(&visited));
    return atomic_load(&outstanding) == 0 ? 0 : 1;
}
