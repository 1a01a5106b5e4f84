/* contended_hold: a holder computes inside critical sections that other threads wait for,
 * and outside them, and measures how much of its CPU time inside was spent while others
 * waited: what `held.contended` must show, under the right function and lock.
 *
 * - `hog` takes the mutex `table_lock`, computes in rebuild_table() (HOLD_NS of CPU),
 *   releases it and computes in tidy_up() (the same, outside any lock);
 * - `writer` does the same with the rwlock `config_lock` as a writer: reload_config()
 *   inside, housekeeping() outside;
 * - `lookups` threads take `table_lock` and read `config_lock` for a moment, then sleep a
 *   little, so that they come back to wait during most of the holds.
 * Each thread counts itself waiting (an atomic per lock) around its lock calls; the holders
 * poll that count as they compute and add the CPU time of each slice to `*_contended_ns`
 * when someone waited at its start and end. They also time their holds' wall time
 * (`*_wall_ns`): above their CPU time inside, the machine descheduled them mid-hold, and
 * a sample then lands where the program's slices do not (the test reruns such a run).
 *
 * Usage: contended_hold [seconds=2] [lookups=2]
 * Prints one line: truth table_contended_ns=.. table_inside_ns=.. table_outside_ns=..
 *   table_wall_ns=.. config_contended_ns=.. config_inside_ns=.. config_outside_ns=..
 *   config_wall_ns=..
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

#define HOLD_NS 4000000ull

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_rwlock_t config_lock = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int table_waiting, config_waiting;
static uint64_t deadline;
static volatile uint64_t sink;

struct holder {
    uint64_t contended_ns, inside_ns, outside_ns, wall_ns;
};

/* Computes for `ns` of CPU time; with `waiting`, adds to `*contended` the CPU time of the
 * slices during which someone waited (at the slice's start and end). A slice is 10000
 * multiply-adds (several microseconds): the thread CPU clock is a system call, and read
 * every 2000 it took a fifth of the time, which a loaded machine's samples then put in
 * `[vdso]` more than in `compute`. */
static void compute(uint64_t ns, atomic_int *waiting, uint64_t *contended) {
    uint64_t x = sink, start = cpu_ns(), t = start;
    while (t - start < ns) {
        int before = waiting ? atomic_load(waiting) : 0;
        for (int i = 0; i < 10000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t now = cpu_ns();
        if (waiting && before > 0 && atomic_load(waiting) > 0)
            *contended += now - t;
        t = now;
    }
    sink = x;
}

__attribute__((noinline)) void rebuild_table(struct holder *h) {
    uint64_t t0 = cpu_ns(), w0 = now_ns();
    compute(HOLD_NS, &table_waiting, &h->contended_ns);
    h->inside_ns += cpu_ns() - t0;
    h->wall_ns += now_ns() - w0;
}

__attribute__((noinline)) void tidy_up(struct holder *h) {
    uint64_t t0 = cpu_ns();
    compute(HOLD_NS, NULL, NULL);
    h->outside_ns += cpu_ns() - t0;
}

__attribute__((noinline)) void reload_config(struct holder *h) {
    uint64_t t0 = cpu_ns(), w0 = now_ns();
    compute(HOLD_NS, &config_waiting, &h->contended_ns);
    h->inside_ns += cpu_ns() - t0;
    h->wall_ns += now_ns() - w0;
}

__attribute__((noinline)) void housekeeping(struct holder *h) {
    uint64_t t0 = cpu_ns();
    compute(HOLD_NS, NULL, NULL);
    h->outside_ns += cpu_ns() - t0;
}

static void *hog(void *arg) {
    struct holder *h = arg;
    while (now_ns() < deadline) {
        pthread_mutex_lock(&table_lock);
        rebuild_table(h);
        pthread_mutex_unlock(&table_lock);
        tidy_up(h);
    }
    return NULL;
}

static void *writer(void *arg) {
    struct holder *h = arg;
    while (now_ns() < deadline) {
        pthread_rwlock_wrlock(&config_lock);
        reload_config(h);
        pthread_rwlock_unlock(&config_lock);
        housekeeping(h);
    }
    return NULL;
}

__attribute__((noinline)) void lookup(void) {
    atomic_fetch_add(&table_waiting, 1);
    pthread_mutex_lock(&table_lock);
    atomic_fetch_sub(&table_waiting, 1);
    sink++;
    pthread_mutex_unlock(&table_lock);
    atomic_fetch_add(&config_waiting, 1);
    pthread_rwlock_rdlock(&config_lock);
    atomic_fetch_sub(&config_waiting, 1);
    sink++;
    pthread_rwlock_unlock(&config_lock);
}

static void *lookups(void *arg) {
    (void)arg;
    while (now_ns() < deadline) {
        lookup();
        usleep(300);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    int n = argc > 2 ? atoi(argv[2]) : 2;
    if (n < 1 || n > 16) {
        fprintf(stderr, "contended_hold: lookups must be 1..16\n");
        return 2;
    }
    deadline = now_ns() + (uint64_t)(seconds * 1e9);
    struct holder table = {0}, config = {0};
    pthread_t h, w, l[16];
    pthread_create(&h, NULL, hog, &table);
    pthread_create(&w, NULL, writer, &config);
    for (int i = 0; i < n; i++)
        pthread_create(&l[i], NULL, lookups, NULL);
    pthread_join(h, NULL);
    pthread_join(w, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(l[i], NULL);
    printf("truth table_contended_ns=%llu table_inside_ns=%llu table_outside_ns=%llu"
           " table_wall_ns=%llu",
           (unsigned long long)table.contended_ns, (unsigned long long)table.inside_ns,
           (unsigned long long)table.outside_ns, (unsigned long long)table.wall_ns);
    printf(" config_contended_ns=%llu config_inside_ns=%llu config_outside_ns=%llu"
           " config_wall_ns=%llu\n",
           (unsigned long long)config.contended_ns, (unsigned long long)config.inside_ns,
           (unsigned long long)config.outside_ns, (unsigned long long)config.wall_ns);
    return 0;
}
