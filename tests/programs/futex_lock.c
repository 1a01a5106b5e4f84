/* futex_lock: a hand-made futex lock (Drepper's "Futexes are tricky", mutex #2) built on
 * syscall(SYS_futex, ...), the way Rust's std::sync and parking_lot block.
 *
 * One thread runs `hold_long`: it holds the lock for hold_ms of computing, then computes
 * GAP_NS outside it. `peekers` threads run `quick_peek`: a hold of a few microseconds, then
 * PEEK_GAP_NS of sleep. Waiters block in FUTEX_WAIT; an unlock that finds waiters issues
 * FUTEX_WAKE from the unlocking function (the lock helpers are inlined), so the peekers'
 * FUTEX_WAIT time must be blamed on `hold_long`.
 *
 * Usage: futex_lock [seconds=1] [peekers=2] [hold_ms=4]
 *
 * Ground truth (CLOCK_MONOTONIC): every FUTEX_WAIT call [called, returned] is a wait of the
 * calling function; every FUTEX_WAKE is a wake event of the unlocking function just before
 * the call (see wait_truth.h); the lock calls' total waiting is also measured. Prints
 *   truth futex_wait_peek_ns=<peekers' FUTEX_WAIT time> futex_wait_hold_ns=..
 *         blame_hold_long_ns=.. blame_quick_peek_ns=.. (event truth)
 *         lock_wait_peek_ns=<peekers' whole lock() waiting> wakes=.. holds=.. bad=<lost
 *         updates> wall_ns=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wait_truth.h"

enum { F_HOLD, F_PEEK, NFUNC };

#define GAP_NS 1000000ull
#define PEEK_HOLD_NS 2000ull
#define PEEK_GAP_NS 150000ull
#define ALWAYS __attribute__((always_inline)) static inline

static int lockword; /* 0 free, 1 locked, 2 locked with waiters */
static uint64_t deadline, hold_ns = 4000000ull;
static long counter, expected;
static long wakes;

ALWAYS int cas(int *p, int old, int new) {
    __atomic_compare_exchange_n(p, &old, new, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    return old;
}

/* Returns the waiting time of the whole lock call. */
ALWAYS uint64_t flock_acquire(tlog_t *l, int fn) {
    uint64_t a = now_ns();
    int c = cas(&lockword, 0, 1);
    if (c == 0)
        return 0;
    if (c != 2)
        c = __atomic_exchange_n(&lockword, 2, __ATOMIC_ACQUIRE);
    while (c != 0) {
        uint64_t w0 = now_ns();
        long r = syscall(SYS_futex, &lockword, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        uint64_t w1 = now_ns();
        if (r == 0 || errno == EINTR)
            wt_wait(l, fn, w0, w1);
        else if (errno != EAGAIN) {
            perror("FUTEX_WAIT");
            exit(1);
        }
        c = __atomic_exchange_n(&lockword, 2, __ATOMIC_ACQUIRE);
    }
    return now_ns() - a;
}

ALWAYS void flock_release(tlog_t *l, int fn) {
    if (__atomic_exchange_n(&lockword, 0, __ATOMIC_RELEASE) != 1) {
        wt_event(l, fn, now_ns());
        if (syscall(SYS_futex, &lockword, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) < 0) {
            perror("FUTEX_WAKE");
            exit(1);
        }
        wakes++; /* under no lock, but only a statistic */
    }
}

NOINL void hold_long(tlog_t *l, unsigned i) {
    flock_acquire(l, F_HOLD);
    counter++;
    busy_for(hold_ns, i);
    flock_release(l, F_HOLD);
}

NOINL uint64_t quick_peek(tlog_t *l, unsigned i) {
    uint64_t w = flock_acquire(l, F_PEEK);
    counter++;
    busy_for(PEEK_HOLD_NS, i);
    flock_release(l, F_PEEK);
    return w;
}

static void *holder_thread(void *arg) {
    tlog_t *l = arg;
    long n = 0;
    for (unsigned i = 0; now_ns() < deadline; i++, n++) {
        hold_long(l, i);
        busy_for(GAP_NS, i);
    }
    __atomic_fetch_add(&expected, n, __ATOMIC_RELAXED);
    return NULL;
}

static uint64_t peek_wait[16];

static void *peeker_thread(void *arg) {
    tlog_t *l = arg;
    long n = 0;
    uint64_t w = 0;
    for (unsigned i = 0; now_ns() < deadline; i++, n++) {
        w += quick_peek(l, i);
        struct timespec ts = {0, (long)PEEK_GAP_NS};
        nanosleep(&ts, NULL);
    }
    peek_wait[l->index] = w;
    __atomic_fetch_add(&expected, n, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int npeek = argc > 2 ? atoi(argv[2]) : 2;
    double hms = argc > 3 ? atof(argv[3]) : 4.0;
    if (secs <= 0 || npeek < 1 || npeek > 15 || hms <= 0) {
        fprintf(stderr, "usage: futex_lock [seconds] [peekers] [hold_ms]\n");
        return 2;
    }
    hold_ns = (uint64_t)(hms * 1e6);
    size_t cap = (size_t)(secs * 1e9 / (double)PEEK_GAP_NS) * 2 + 1000;
    tlog_t *logs = truth_alloc_logs(npeek + 1, cap); /* 0: holder */
    if (!logs)
        return 2;
    uint64_t t0 = now_ns();
    deadline = t0 + (uint64_t)(secs * 1e9);
    pthread_t th[16];
    for (int i = 0; i <= npeek; i++)
        if (pthread_create(&th[i], NULL, i ? peeker_thread : holder_thread, &logs[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i <= npeek; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    if (truth_overflowed(logs, npeek + 1, "futex_lock"))
        return 2;
    uint64_t idle[NFUNC] = {0}, blame[NFUNC] = {0}, lock_wait = 0;
    wt_wait_totals(logs, npeek + 1, idle, NULL);
    wt_event_blame(logs, npeek + 1, blame);
    for (int i = 1; i <= npeek; i++)
        lock_wait += peek_wait[i];
    long bad = expected - counter;
    printf("futex_lock: %.2f s, %ld holds, %ld wakes; peekers waited %.3f s in FUTEX_WAIT"
           " (%.3f s in lock calls)\n",
           wall / 1e9, counter, wakes, idle[F_PEEK] / 1e9, lock_wait / 1e9);
    printf("truth futex_wait_peek_ns=%llu futex_wait_hold_ns=%llu blame_hold_long_ns=%llu"
           " blame_quick_peek_ns=%llu lock_wait_peek_ns=%llu wakes=%ld holds=%ld bad=%ld"
           " wall_ns=%llu\n",
           (unsigned long long)idle[F_PEEK], (unsigned long long)idle[F_HOLD],
           (unsigned long long)blame[F_HOLD], (unsigned long long)blame[F_PEEK],
           (unsigned long long)lock_wait, wakes, counter, bad, (unsigned long long)wall);
    return bad ? 1 : 0;
}
