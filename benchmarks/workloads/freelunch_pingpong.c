/* freelunch_pingpong: the ping-pong scenario of the Free Lunch paper (David, Thomas, Lawall,
 * Muller, "Continuously Measuring Critical Section Pressure with the Free Lunch Profiler",
 * section 2.3.1, Figure 2): two threads execute in mutual exclusion; in each iteration a
 * thread acquires the lock, runs its processing function, and releases the lock. Here the
 * turn passes strictly back and forth (a `turn` word and a condition variable under the
 * mutex), so each thread waits for the other's processing in every round.
 *
 * Asymmetric on purpose, so that there is a true culprit: `ping_round` processes for
 * PING_NS (300 us) under the lock, `pong_round` for PONG_NS (100 us). pong's waiting (behind
 * ping's processing) is ~3x ping's.
 *
 * Each round function: lock the mutex; while it is not its turn, pthread_cond_wait; process
 * under the lock; give the turn to the other; pthread_cond_signal; unlock. The waiting thread
 * is normally parked in pthread_cond_wait while the other processes (it relocks right after
 * its own unlock and finds it is not its turn), so the waiting is condition-variable waiting,
 * blamed on the other side's signal. Mutex waiting is the woken thread retaking the mutex
 * (and the rare contended lock at the top of a round); truth lines for it when it is at
 * least 2% of the condition-variable waiting. On 2 CPUs the scheduler often runs the woken
 * thread on the signaller's CPU and preempts the signaller before its unlock: then the
 * signaller's own wait for the other's processing is time off the CPU, not a lock wait
 * (nobody's idleness), and the woken thread's retaking waits for the preempted holder.
 *
 * Usage: freelunch_pingpong [scale=1.0]   (ROUNDS x scale rounds; ~1.5 s at 1.0)
 *
 * Ground truth (docs/lock-blame.md, tests/programs/wait_truth.h), CLOCK_MONOTONIC:
 *   - idleness.condvar: each pthread_cond_wait [called, the signal that woke it], at its
 *     round function; the rest of the call [signal, returned] (retaking the mutex) is mutex
 *     waiting, as blameprof splits it (split_cond_waits());
 *   - blame.condvar: each signal takes the waiting since the previous signal (event truth:
 *     the part of every wait between the previous event and this one), at the signaller;
 *   - idleness.mutex / blame.mutex: contended pthread_mutex_lock calls [called after a failed
 *     trylock, returned] and the retaking part of the condition waits, and their overlap
 *     with each hold [acquired or back from pthread_cond_wait, pthread_cond_wait or
 *     pthread_mutex_unlock called]: a signaller preempted before its unlock is blamed for
 *     the woken thread's retaking.
 * Prints truth idleness.condvar|blame.condvar ping_round|pong_round <ns>, the mutex lines
 * when they matter, truth culprit ping_round, truth candidates ping_round,pong_round.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_PING, F_PONG, NFUNC };
static const char *const FNAME[NFUNC] = {"ping_round", "pong_round"};

#define ROUNDS 3600
#define PING_NS 300000ull
#define PONG_NS 100000ull

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn = F_PING;
static int rounds;
static long hits[NFUNC];

/* Per thread: the condvar waits and signal events (wait_truth.h), and the mutex waits and
 * holds (truth_log.h). */
typedef struct {
    tlog_t cond, mtx;
} plog_t;

static inline void log_hold(tlog_t *l, int fn, uint64_t a, uint64_t b) {
    if (l->nholds >= l->cap) {
        l->overflow = 1;
        return;
    }
    l->holds[l->nholds++] = (ival_t){a, b, 0, fn};
}

/* One round of `me`: wait for the turn, process `ns` under the lock, pass the turn. */
static inline __attribute__((always_inline)) void round_of(plog_t *l, int me, uint64_t ns) {
    uint64_t w0 = now_ns(), h0 = w0;
    if (pthread_mutex_trylock(&m) != 0) {
        pthread_mutex_lock(&m);
        h0 = now_ns();
        wt_wait(&l->mtx, me, w0, h0);
    }
    while (turn != me) {
        uint64_t a = now_ns();
        log_hold(&l->mtx, me, h0, a);
        pthread_cond_wait(&cv, &m);
        h0 = now_ns();
        wt_wait(&l->cond, me, a, h0);
    }
    busy_for(ns, (unsigned)me); /* the processing function, in the critical section */
    hits[me]++;
    turn = 1 - me;
    wt_event(&l->cond, me, now_ns());
    pthread_cond_signal(&cv);
    log_hold(&l->mtx, me, h0, now_ns());
    pthread_mutex_unlock(&m);
}

NOINL void ping_round(plog_t *l) { round_of(l, F_PING, PING_NS); }
NOINL void pong_round(plog_t *l) { round_of(l, F_PONG, PONG_NS); }

static void *ping_thread(void *arg) {
    for (int i = 0; i < rounds; i++)
        ping_round(arg);
    return NULL;
}

static void *pong_thread(void *arg) {
    for (int i = 0; i < rounds; i++)
        pong_round(arg);
    return NULL;
}

/* blameprof splits a pthread_cond_wait in two (docs/lock-blame.md): condition-variable
 * waiting until the signal that woke it, then mutex waiting (retaking the mutex, which the
 * signaller holds until it unlocks). Per waiter: cidle[fn] += [called, last signal before the
 * return]; the rest [last signal, returned] is appended to the waiter's mutex log as a
 * mutex wait (met with the mutex holds for the mutex blame). A wait no signal ended is all
 * condition-variable waiting (nobody's, in the blame). -1 if memory ran out. */
static int split_cond_waits(tlog_t *cl, tlog_t *ml, uint64_t *cidle) {
    size_t ne;
    ival_t *ev = truth_merge_holds(cl, NFUNC, &ne); /* the signal events, sorted */
    if (!ev)
        return -1;
    for (int i = 0; i < NFUNC; i++)
        for (size_t j = 0; j < cl[i].nwaits; j++) {
            ival_t w = cl[i].waits[j];
            uint64_t woken = 0;
            for (size_t e = truth_first_hold(ev, ne, w.a); e < ne && ev[e].a <= w.b; e++)
                woken = ev[e].a;
            if (!woken) {
                cidle[w.fn] += w.b - w.a;
                continue;
            }
            cidle[w.fn] += woken - w.a;
            wt_wait(&ml[i], w.fn, woken, w.b);
        }
    free(ev);
    return 0;
}

int main(int argc, char **argv) {
    double scale = wl_scale_max(argc, argv, "freelunch_pingpong", 100);
    rounds = (int)(ROUNDS * scale);
    if (rounds < 1)
        rounds = 1;
    size_t cap = (size_t)rounds * 3 + 16;
    tlog_t *c = truth_alloc_logs(NFUNC, cap), *x = truth_alloc_logs(NFUNC, cap);
    if (!c || !x)
        return 2;
    plog_t logs[NFUNC] = {{c[0], x[0]}, {c[1], x[1]}};
    uint64_t t0 = now_ns();
    pthread_t th[NFUNC];
    if (pthread_create(&th[F_PING], NULL, ping_thread, &logs[F_PING]) != 0 ||
        pthread_create(&th[F_PONG], NULL, pong_thread, &logs[F_PONG]) != 0) {
        perror("pthread_create");
        return 2;
    }
    for (int i = 0; i < NFUNC; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;

    tlog_t cl[NFUNC] = {logs[0].cond, logs[1].cond}, ml[NFUNC] = {logs[0].mtx, logs[1].mtx};
    if (truth_overflowed(cl, NFUNC, "freelunch_pingpong"))
        return 2;
    uint64_t cwait[NFUNC] = {0}, ccount[NFUNC] = {0}, cblame[NFUNC] = {0}, cidle[NFUNC] = {0};
    wt_wait_totals(cl, NFUNC, cwait, ccount);
    uint64_t after = wt_event_blame(cl, NFUNC, cblame);
    if (after == UINT64_MAX || split_cond_waits(cl, ml, cidle))
        return 2;
    uint64_t mblame[NFUNC] = {0}, midle[NFUNC] = {0}, held[NFUNC] = {0}, nhold[NFUNC] = {0};
    if (truth_mutex_totals(ml, NFUNC, "freelunch_pingpong", mblame, midle, held, nhold, NULL))
        return 2;
    printf("freelunch_pingpong: %.2f s, %d rounds, hits ping=%ld pong=%ld\n", wall / 1e9, rounds,
           hits[F_PING], hits[F_PONG]);
    for (int f = 0; f < NFUNC; f++)
        printf("  %-10s held=%.3f s  condvar: waits=%llu waited=%.3f s blame=%.3f s"
               "  mutex: waited=%.3f s blame=%.3f s\n",
               FNAME[f], held[f] / 1e9, (unsigned long long)ccount[f], cidle[f] / 1e9,
               cblame[f] / 1e9, midle[f] / 1e9, mblame[f] / 1e9);
    printf("  pthread_cond_wait: ping %.3f s, pong %.3f s in all; after the signal (retaking the"
           " mutex): %.3f s\n", cwait[F_PING] / 1e9, cwait[F_PONG] / 1e9, after / 1e9);
    uint64_t ctot = cidle[F_PING] + cidle[F_PONG];
    for (int f = 0; f < NFUNC; f++) {
        truth_ns("idleness.condvar", FNAME[f], cidle[f]);
        truth_ns("blame.condvar", FNAME[f], cblame[f]);
    }
    for (int f = 0; f < NFUNC; f++) {
        if (midle[f] * 50 >= ctot)
            truth_ns("idleness.mutex", FNAME[f], midle[f]);
        if (mblame[f] * 50 >= ctot)
            truth_ns("blame.mutex", FNAME[f], mblame[f]);
    }
    wl_truth_end("ping_round", "ping_round,pong_round", (uint64_t)rounds);
    return hits[F_PING] == rounds && hits[F_PONG] == rounds ? 0 : 1;
}
