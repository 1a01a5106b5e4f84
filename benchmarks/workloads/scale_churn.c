/* scale_churn: the scoreboard's lock-churn workload (benchmarks/scoreboard, section "Lock
 * churn"), the shape of MADNESS in the blame-shifting paper (which made 65M locks): every
 * thread makes, takes once and destroys `locks_per_thread` heap-allocated spin locks and as
 * many mutexes, keeping about `live_per_thread` of each alive (a ring: the slot's old lock is
 * destroyed and freed when its new one is made). No truth lines: it measures what blameprof
 * costs a program that makes locks by the million.
 *
 * Usage: scale_churn threads locks_per_thread live_per_thread
 *
 * Prints "scale_churn: ..." and "truth ops <n>" (locks made, spin and mutex together); exit
 * status 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t per_thread, live;

static void *worker(void *arg) {
    uint64_t *made = arg;
    pthread_spinlock_t **spins = calloc(live, sizeof *spins);
    pthread_mutex_t **mutexes = calloc(live, sizeof *mutexes);
    if (!spins || !mutexes)
        abort();
    for (uint64_t i = 0; i < per_thread; i++) {
        uint64_t k = i % live;
        if (spins[k]) {
            pthread_spin_destroy(spins[k]);
            free((void *)spins[k]);
            pthread_mutex_destroy(mutexes[k]);
            free(mutexes[k]);
        }
        spins[k] = malloc(sizeof **spins);
        mutexes[k] = malloc(sizeof **mutexes);
        if (!spins[k] || !mutexes[k])
            abort();
        pthread_spin_init(spins[k], PTHREAD_PROCESS_PRIVATE);
        pthread_mutex_init(mutexes[k], NULL);
        pthread_spin_lock(spins[k]);
        pthread_spin_unlock(spins[k]);
        pthread_mutex_lock(mutexes[k]);
        pthread_mutex_unlock(mutexes[k]);
        *made += 2;
    }
    for (uint64_t k = 0; k < live; k++)
        if (spins[k]) {
            pthread_spin_destroy(spins[k]);
            free((void *)spins[k]);
            pthread_mutex_destroy(mutexes[k]);
            free(mutexes[k]);
        }
    free(spins);
    free(mutexes);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: scale_churn threads locks_per_thread live_per_thread\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    per_thread = strtoull(argv[2], NULL, 10);
    live = strtoull(argv[3], NULL, 10);
    if (threads < 1 || threads > 1024 || per_thread < 1 || live < 1) {
        fprintf(stderr, "scale_churn: bad arguments\n");
        return 2;
    }
    pthread_t th[1024];
    uint64_t made[1024] = {0};
    for (int t = 0; t < threads; t++)
        if (pthread_create(&th[t], NULL, worker, &made[t])) {
            perror("pthread_create");
            return 2;
        }
    uint64_t done = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        done += made[t];
    }
    printf("scale_churn: %d threads, %llu spin locks and %llu mutexes each (%llu of each live)\n",
           threads, (unsigned long long)per_thread, (unsigned long long)per_thread,
           (unsigned long long)live);
    printf("truth ops %llu\n", (unsigned long long)done);
    return done == 2 * per_thread * (uint64_t)threads ? 0 : 1;
}
