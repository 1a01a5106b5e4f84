/* diff_workload: two runs of it with a known change between them, for `blameprof diff`
 * (tests/diff.rs). Three parts run side by side:
 *   - the main thread computes ROUNDS rounds of heavy() (UNITS of work times FACTOR), then
 *     steady() and constant() (UNITS each, whatever FACTOR): at FACTOR 1 a third each, so
 *     that heavy()'s share of the work changes most when it doubles;
 *   - two "hot" threads take hot_lock in turn, each ITERS times: lock, sleep HOT_US times
 *     FACTOR, unlock, sleep GAP_US (so the other thread gets the lock and the thread comes
 *     back during its hold: every acquisition but the first waits);
 *   - two "calm" threads do the same with calm_lock and CALM_US, whatever FACTOR.
 * So FACTOR 2 doubles heavy()'s work and hot_lock's hold time while the rest stays; SCALE 2
 * doubles every count: a run twice as long with the same shape.
 *
 * Usage: diff_workload [FACTOR=1] [SCALE=1]
 * Prints the program's own measures, summed over threads:
 *   truth heavy_ns=.. steady_ns=.. constant_ns=.. main_ns=.. cpu_ns=.. wall_ns=..
 *         running_ns=.. hot_wait_ns=.. calm_wait_ns=.. hot_hold_ns=.. calm_hold_ns=..
 * heavy_ns, steady_ns and constant_ns: the thread CPU time of every call
 * (CLOCK_THREAD_CPUTIME_ID); main_ns: the main thread's CPU time from the start of main to
 * the end (the lock threads' is the rest: waking up and going to sleep, more of it on a
 * loaded machine); cpu_ns: the process's CPU time at the end
 * (CLOCK_PROCESS_CPUTIME_ID); wall_ns: the time from the start of main to the end
 * (CLOCK_MONOTONIC); running_ns: the threads' running time, as blameprof shares lock
 * waiting out of (their lifetimes less their waits for events: the main thread's join), the
 * sum of the lock threads' lifetimes and the main thread's time until it joins them; a wait:
 * from calling pthread_mutex_lock to its return; a hold: from that return to calling unlock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "truth_log.h" /* clock_ns(), now_ns(), cpu_ns() */

#define ROUNDS 50
#define UNITS 10
#define UNIT 400000L /* loop iterations per unit of work (a fraction of a millisecond) */
#define ITERS 200
#define HOT_US 1000
#define CALM_US 1000
#define GAP_US 400
#define NOINL __attribute__((noinline, noclone))

pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t calm_lock = PTHREAD_MUTEX_INITIALIZER;
static long factor = 1, scale = 1;
static volatile uint64_t sink;

struct side {
    pthread_mutex_t *lock;
    long hold_us;
    uint64_t wait_ns, hold_ns, life_ns;
};

/* The bodies differ (their constants), so that identical-code folding cannot merge
 * them; each iteration depends on the one before, so neither can be vectorised. */
NOINL void heavy(long units) {
    uint64_t x = sink;
    for (long i = 0; i < units * UNIT; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

NOINL void steady(long units) {
    uint64_t x = sink;
    for (long i = 0; i < units * UNIT; i++)
        x = x * 2862933555777941757ull + 3037000493ull;
    sink = x;
}

NOINL void constant(long units) {
    uint64_t x = sink;
    for (long i = 0; i < units * UNIT; i++)
        x = x * 3935559000370003845ull + 2691343689449507681ull;
    sink = x;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* One thread's turns at its lock; the side's sums are updated under the lock itself. */
NOINL void *take_turns(void *arg) {
    struct side *s = arg;
    uint64_t born = now_ns();
    for (long i = 0; i < ITERS * scale; i++) {
        uint64_t t0 = now_ns();
        pthread_mutex_lock(s->lock);
        uint64_t t1 = now_ns();
        sleep_us(s->hold_us);
        uint64_t t2 = now_ns();
        s->wait_ns += t1 - t0;
        s->hold_ns += t2 - t1;
        pthread_mutex_unlock(s->lock);
        sleep_us(GAP_US);
    }
    uint64_t life = now_ns() - born;
    pthread_mutex_lock(s->lock);
    s->life_ns += life;
    pthread_mutex_unlock(s->lock);
    return NULL;
}

int main(int argc, char **argv) {
    uint64_t start = now_ns(), main_start_cpu = cpu_ns();
    if (argc > 1)
        factor = atol(argv[1]);
    if (argc > 2)
        scale = atol(argv[2]);
    if (factor < 1 || scale < 1) {
        fprintf(stderr, "usage: diff_workload [FACTOR>=1] [SCALE>=1]\n");
        return 2;
    }
    struct side hot = {&hot_lock, HOT_US * factor, 0, 0, 0};
    struct side calm = {&calm_lock, CALM_US, 0, 0, 0};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, take_turns, i < 2 ? &hot : &calm) != 0) {
            perror("pthread_create");
            return 1;
        }
    uint64_t heavy_ns = 0, steady_ns = 0, constant_ns = 0;
    for (long r = 0; r < ROUNDS * scale; r++) {
        uint64_t c0 = cpu_ns();
        heavy(UNITS * factor);
        uint64_t c1 = cpu_ns();
        steady(UNITS);
        uint64_t c2 = cpu_ns();
        constant(UNITS);
        uint64_t c3 = cpu_ns();
        heavy_ns += c1 - c0;
        steady_ns += c2 - c1;
        constant_ns += c3 - c2;
    }
    uint64_t joining = now_ns();
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    uint64_t main_ns = cpu_ns() - main_start_cpu;
    uint64_t running_ns = (joining - start) + hot.life_ns + calm.life_ns;
    printf("truth heavy_ns=%llu steady_ns=%llu constant_ns=%llu main_ns=%llu cpu_ns=%llu "
           "wall_ns=%llu running_ns=%llu hot_wait_ns=%llu calm_wait_ns=%llu hot_hold_ns=%llu "
           "calm_hold_ns=%llu\n",
           (unsigned long long)heavy_ns, (unsigned long long)steady_ns,
           (unsigned long long)constant_ns, (unsigned long long)main_ns,
           (unsigned long long)clock_ns(CLOCK_PROCESS_CPUTIME_ID),
           (unsigned long long)(now_ns() - start), (unsigned long long)running_ns,
           (unsigned long long)hot.wait_ns, (unsigned long long)calm.wait_ns,
           (unsigned long long)hot.hold_ns, (unsigned long long)calm.hold_ns);
    return 0;
}
