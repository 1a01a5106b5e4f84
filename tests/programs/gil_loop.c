/* gil_loop: CPython's GIL protocol (Python/ceval_gil.h), in C: threads take turns at a flag
 * (`locked`) guarded by a mutex, and wait for it in 5 ms timed condition waits, in a loop,
 * until its holder drops it; a waiter whose wait times out with no switch meanwhile asks the
 * holder to drop it (`drop_request`), which the holder checks between units of its work.
 * Dropping it signals the condition variable.
 *
 * One `greedy` thread checks the request only every greedy_ms (a long call that keeps the
 * GIL, as a C extension does); two `polite` threads check it every 0.1 ms and drop it after
 * 2 ms of work anyway. Between holds every thread works 0.5 ms without the GIL. So most
 * waits for the GIL time out several times before the holder drops it: each loop in
 * `take_gil` is one wait for one event, and the waiting of all of it is the doing of the
 * holders whose drops (`greedy_release`, `polite_release`) ended it.
 *
 * Usage: gil_loop [seconds=1.5] [greedy_ms=20] [interval_ms=5]
 *
 * CPython's forced switching (a dropper asked to drop the GIL waits until another thread
 * has taken it) is left out: without it a dropper may take the GIL back before the thread
 * its signal woke runs, which then waits again (a stolen wake-up).
 *
 * Ground truth (CLOCK_MONOTONIC): each wait is a loop in take_gil [first wait called, GIL
 * taken], whose timed-out waits do not end it; a signalled wait after which the GIL is
 * taken already (stolen) ends one and begins the next. Each drop is a wake event just
 * before its signal. Prints
 *   truth wait_greedy_ns=.. wait_polite_ns=.. wait_total_ns=.. waits=..
 *         blame_greedy_release_ns=.. blame_polite_release_ns=.. (event truth, wait_truth.h)
 *         after_drop_ns=<waiting after the last drop: retaking the mutex, scheduling>
 *         timeouts=<timed waits that timed out> stolen=<stolen wake-ups> wall_ns=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

enum { F_GREEDY, F_POLITE, NFUNC };

#define UNIT_NS 100000ull
#define POLITE_HOLD_NS 2000000ull
#define OUTSIDE_NS 500000ull

static struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int locked;
    unsigned long switch_number;
    volatile int drop_request;
} gil = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static volatile int stop;
static uint64_t greedy_ns = 20000000ull, interval_ns = 5000000ull;
static long timeouts, stolen;

NOINL void take_gil(tlog_t *l, int fn) {
    pthread_mutex_lock(&gil.mutex);
    if (gil.locked) {
        uint64_t a = now_ns();
        while (gil.locked) {
            unsigned long saved = gil.switch_number;
            uint64_t t = now_ns() + interval_ns;
            struct timespec deadline = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
            int r = pthread_cond_timedwait(&gil.cond, &gil.mutex, &deadline);
            if (r == ETIMEDOUT) {
                timeouts++;
                if (gil.locked && gil.switch_number == saved)
                    gil.drop_request = 1;
            } else if (gil.locked) {
                /* Signalled, but another thread took the GIL first: that wait ended with
                 * the signal (what follows it is being scheduled), and a new one begins. */
                uint64_t b = now_ns();
                wt_wait(l, fn, a, b);
                a = b;
                stolen++;
            }
        }
        wt_wait(l, fn, a, now_ns());
    }
    gil.locked = 1;
    gil.switch_number++;
    gil.drop_request = 0;
    pthread_mutex_unlock(&gil.mutex);
}

NOINL void drop_gil(tlog_t *l, int fn) {
    pthread_mutex_lock(&gil.mutex);
    gil.locked = 0;
    wt_event(l, fn, now_ns());
    pthread_cond_signal(&gil.cond);
    pthread_mutex_unlock(&gil.mutex);
}

NOINL void greedy_release(tlog_t *l) { drop_gil(l, F_GREEDY); }
NOINL void polite_release(tlog_t *l) { drop_gil(l, F_POLITE); }

/* Computes with the GIL, checking the drop request every `check_ns`, for at most `most_ns`
 * (0: until asked to drop it). */
NOINL void interpret(uint64_t check_ns, uint64_t most_ns, unsigned seed) {
    uint64_t start = now_ns();
    do {
        busy_for(check_ns, seed++);
    } while (!gil.drop_request && !stop && (most_ns == 0 || now_ns() - start < most_ns));
}

NOINL void outside_gil(unsigned seed) { busy_for(OUTSIDE_NS, seed); }

NOINL void greedy_run(tlog_t *l) {
    for (unsigned i = 0; !stop; i++) {
        take_gil(l, F_GREEDY);
        interpret(greedy_ns, 0, i);
        greedy_release(l);
        outside_gil(i);
    }
}

NOINL void polite_run(tlog_t *l) {
    for (unsigned i = 0; !stop; i++) {
        take_gil(l, F_POLITE);
        interpret(UNIT_NS, POLITE_HOLD_NS, i);
        polite_release(l);
        outside_gil(i);
    }
}

static void *greedy_thread(void *arg) {
    greedy_run(arg);
    return NULL;
}

static void *polite_thread(void *arg) {
    polite_run(arg);
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.5;
    double gms = argc > 2 ? atof(argv[2]) : 20.0;
    double ims = argc > 3 ? atof(argv[3]) : 5.0;
    if (secs <= 0 || gms <= 0 || ims <= 0) {
        fprintf(stderr, "usage: gil_loop [seconds] [greedy_ms] [interval_ms]\n");
        return 2;
    }
    greedy_ns = (uint64_t)(gms * 1e6);
    interval_ns = (uint64_t)(ims * 1e6);
    /* CPython's condition variable times its waits on the monotonic clock. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&gil.cond, &attr);
    size_t cap = (size_t)(secs * 1e9 / (double)OUTSIDE_NS) + 1000;
    tlog_t *logs = truth_alloc_logs(3, cap);
    if (!logs)
        return 2;
    uint64_t t0 = now_ns();
    pthread_t th[3];
    if (pthread_create(&th[0], NULL, greedy_thread, &logs[0]) != 0 ||
        pthread_create(&th[1], NULL, polite_thread, &logs[1]) != 0 ||
        pthread_create(&th[2], NULL, polite_thread, &logs[2]) != 0) {
        perror("pthread_create");
        return 2;
    }
    struct timespec run = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&run, NULL);
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    uint64_t wall = now_ns() - t0;
    if (truth_overflowed(logs, 3, "gil_loop"))
        return 2;
    uint64_t idle[NFUNC] = {0}, count[NFUNC] = {0}, blame[NFUNC] = {0};
    wt_wait_totals(logs, 3, idle, count);
    uint64_t after = wt_event_blame(logs, 3, blame);
    if (after == UINT64_MAX)
        return 2;
    printf("gil_loop: %.2f s, %llu waits for the GIL (%.3f s), %ld timed out\n", wall / 1e9,
           (unsigned long long)(count[F_GREEDY] + count[F_POLITE]),
           (idle[F_GREEDY] + idle[F_POLITE]) / 1e9, timeouts);
    printf("truth wait_greedy_ns=%llu wait_polite_ns=%llu wait_total_ns=%llu waits=%llu"
           " blame_greedy_release_ns=%llu blame_polite_release_ns=%llu after_drop_ns=%llu"
           " timeouts=%ld stolen=%ld wall_ns=%llu\n",
           (unsigned long long)idle[F_GREEDY], (unsigned long long)idle[F_POLITE],
           (unsigned long long)(idle[F_GREEDY] + idle[F_POLITE]),
           (unsigned long long)(count[F_GREEDY] + count[F_POLITE]),
           (unsigned long long)blame[F_GREEDY], (unsigned long long)blame[F_POLITE],
           (unsigned long long)after, timeouts, stolen, (unsigned long long)wall);
    return 0;
}
