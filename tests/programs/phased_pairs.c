/* phased_pairs: one mutex, two phases with different holders and waiters. In the first
 * half `compact` holds `journal_lock` long and `append` waits for it; in the second half
 * `rotate` holds it long and `query` waits. So append waited behind compact (and its own
 * short holds), never behind rotate, and query behind rotate, never behind compact: what
 * "who waited behind whom" must show, where splitting each holder's blame over the waiters
 * by their share of all waiting would put half of append's waiting behind rotate.
 *
 * Usage: phased_pairs [seconds=2]
 * Ground truth, measured by the program (truth_log.h): every wait [lock called, returned]
 * and hold [returned, unlock called], per function; for every wait and every hold that
 * overlaps it, the overlap is added to the pair (waiter, holder); a hold that some wait
 * overlapped counts as contended. Prints one line:
 *   truth contended_holds=.. contended_hold_ns=.. contended_hold_from_wait_ns=..
 *         pair_<waiter>_<holder>_ns=.. (for
 *   append, query x compact, rotate, append, query)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "truth_log.h"

enum { F_COMPACT, F_APPEND, F_ROTATE, F_QUERY, NFUNC };
static const char *const FNAME[NFUNC] = {"compact", "append", "rotate", "query"};

#define LONG_HOLD_NS 3000000ull
#define CAP 200000

pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deadline;
static volatile uint64_t sink;

static void spin_for(uint64_t ns) {
    uint64_t x = sink, end = now_ns() + ns;
    while (now_ns() < end)
        for (int i = 0; i < 200; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

/* One critical section of `fn`, holding the lock for `hold_ns`: a macro, so that the lock
 * calls are made from the functions themselves (an inlined helper would name the sites). */
#define SECTION(l, fn, hold_ns)                                                               \
    do {                                                                                      \
        uint64_t w0 = now_ns();                                                               \
        pthread_mutex_lock(&journal_lock);                                                    \
        uint64_t h0 = now_ns();                                                               \
        spin_for(hold_ns);                                                                    \
        uint64_t h1 = now_ns();                                                               \
        pthread_mutex_unlock(&journal_lock);                                                  \
        log_iv(l, fn, w0, h0, h1);                                                            \
    } while (0)

__attribute__((noinline)) void compact(tlog_t *l) { SECTION(l, F_COMPACT, LONG_HOLD_NS); }
__attribute__((noinline)) void append(tlog_t *l) { SECTION(l, F_APPEND, 10000); }
__attribute__((noinline)) void rotate(tlog_t *l) { SECTION(l, F_ROTATE, LONG_HOLD_NS); }
__attribute__((noinline)) void query(tlog_t *l) { SECTION(l, F_QUERY, 10000); }

struct role {
    tlog_t *log;
    void (*step)(tlog_t *);
    useconds_t pause_us;
};

static void *run_role(void *arg) {
    struct role *r = arg;
    while (now_ns() < deadline) {
        r->step(r->log);
        usleep(r->pause_us);
    }
    return NULL;
}

/* Runs a holder and a waiter role for `ns`. */
static void phase(tlog_t *holder_log, void (*hold)(tlog_t *), tlog_t *waiter_log,
                  void (*wait)(tlog_t *), uint64_t ns) {
    deadline = now_ns() + ns;
    struct role h = {holder_log, hold, 1000}, w = {waiter_log, wait, 300};
    pthread_t th, tw;
    pthread_create(&th, NULL, run_role, &h);
    pthread_create(&tw, NULL, run_role, &w);
    pthread_join(th, NULL);
    pthread_join(tw, NULL);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    tlog_t *logs = truth_alloc_logs(4, CAP);
    if (!logs)
        return 1;
    uint64_t half = (uint64_t)(seconds * 5e8);
    phase(&logs[0], compact, &logs[1], append, half);
    phase(&logs[2], rotate, &logs[3], query, half);
    if (truth_overflowed(logs, 4, "phased_pairs"))
        return 1;
    size_t nh;
    ival_t *holds = truth_merge_holds(logs, 4, &nh);
    if (!holds)
        return 1;
    uint64_t pair[NFUNC][NFUNC] = {{0}};
    char *waited_for = calloc(nh + 1, 1);
    /* Per hold: when its first waiter arrived (or the hold began, if later). */
    uint64_t *first_wait = calloc(nh + 1, sizeof *first_wait);
    if (!waited_for || !first_wait)
        return 1;
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < logs[i].nwaits; j++) {
            ival_t w = logs[i].waits[j];
            for (size_t h = truth_first_hold(holds, nh, w.a); h < nh && holds[h].a < w.b; h++) {
                uint64_t o = truth_overlap(&holds[h], &w);
                pair[w.fn][holds[h].fn] += o;
                if (o > 0) {
                    uint64_t from = w.a > holds[h].a ? w.a : holds[h].a;
                    if (!waited_for[h] || from < first_wait[h])
                        first_wait[h] = from;
                    waited_for[h] = 1;
                }
            }
        }
    /* The holds others waited for: how many, their length in all, and their length from
     * their first waiter's arrival in all (what a profiler that does not see a hold begin
     * without waiting can measure of it: a lower bound). */
    uint64_t contended_holds = 0, contended_hold_ns = 0, from_first_wait_ns = 0;
    for (size_t h = 0; h < nh; h++)
        if (waited_for[h]) {
            contended_holds++;
            contended_hold_ns += holds[h].b - holds[h].a;
            from_first_wait_ns += holds[h].b - first_wait[h];
        }
    printf("truth contended_holds=%llu contended_hold_ns=%llu contended_hold_from_wait_ns=%llu",
           (unsigned long long)contended_holds, (unsigned long long)contended_hold_ns,
           (unsigned long long)from_first_wait_ns);
    for (int w = 0; w < NFUNC; w++)
        for (int h = 0; h < NFUNC; h++)
            printf(" pair_%s_%s_ns=%llu", FNAME[w], FNAME[h], (unsigned long long)pair[w][h]);
    printf("\n");
    free(waited_for);
    free(first_wait);
    free(holds);
    return 0;
}
