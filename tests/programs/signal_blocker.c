/* signal_blocker: a program that blocks every signal, as programs that take their signals
 * with signalfd or sigwait do, in the main thread before it starts its workers (which
 * inherit the mask) and again in each worker with sigprocmask; then computes.
 *
 * Usage: signal_blocker [threads=2] [cpu_ms=400]
 * Prints "mask: all blocked" if, in each thread, the signals the program cares about
 * (SIGINT, SIGTERM, SIGUSR1, SIGHUP) read back blocked, and
 * "truth crunch_ns=N" (the workers' CPU time in crunch()).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "truth_log.h" /* cpu_ns() */

static uint64_t cpu_budget_ns;
static atomic_ullong crunch_total;
static atomic_int mask_ok = 1;
static volatile uint64_t sink;

static void check_mask(void) {
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    int wanted[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
    for (int i = 0; i < 4; i++)
        if (!sigismember(&cur, wanted[i]))
            mask_ok = 0;
}

__attribute__((noinline)) void crunch(void) {
    uint64_t t0 = cpu_ns(), x = sink;
    while (cpu_ns() - t0 < cpu_budget_ns)
        for (int i = 0; i < 5000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
    crunch_total += cpu_ns() - t0;
}

static void *worker(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    check_mask();
    crunch();
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    cpu_budget_ns = (uint64_t)(argc > 2 ? atoi(argv[2]) : 400) * 1000000ull;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    check_mask();
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    printf("mask: %s\n", mask_ok ? "all blocked" : "NOT blocked");
    printf("truth crunch_ns=%llu\n", (unsigned long long)crunch_total);
    return 0;
}
