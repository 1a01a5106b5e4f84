/* futex_nobody: a FUTEX_WAKE that wakes nobody, while a thread waits on the same futex.
 *
 * Each round: `wait_on_word` blocks in FUTEX_WAIT_BITSET (bitset 1) until the word is 1.
 * After EARLY_MS, `wake_other_bits` issues FUTEX_WAKE_BITSET with bitset 2: the kernel
 * wakes nobody (it returns 0). After late_ms more, `wake_for_real` sets the word and wakes
 * the waiter. The waiter waited on, past the wake that woke nobody: the wake that ends the
 * wait takes the waiting since the previous wake on that address.
 *
 * Usage: futex_nobody [rounds=3] [late_ms=100]
 *
 * Ground truth (CLOCK_MONOTONIC): every FUTEX_WAIT_BITSET [called, returned] is a wait;
 * every wake is an event just before the call (see wait_truth.h). Prints
 *   truth wait_ns=.. blame_wake_other_bits_ns=.. blame_wake_for_real_ns=..
 *         woken_by_other_bits=<sum of the no-op wakes' results: 0> woken_for_real=<rounds>
 *         rounds=.. wall_ns=..
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

enum { F_WAIT, F_OTHER, F_REAL, NFUNC };

#define EARLY_MS 20

static int word;
static int rounds = 3;
static long late_ms = 100;
static volatile int waiting_round = -1, done_round = -1;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

NOINL void wait_on_word(tlog_t *l, int r) {
    waiting_round = r;
    while (__atomic_load_n(&word, __ATOMIC_ACQUIRE) == 0) {
        uint64_t a = now_ns();
        long rc = syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, NULL, 1);
        uint64_t b = now_ns();
        if (rc == 0)
            wt_wait(l, F_WAIT, a, b);
    }
    __atomic_store_n(&word, 0, __ATOMIC_RELEASE);
    done_round = r;
}

static void *waiter_thread(void *arg) {
    for (int r = 0; r < rounds; r++)
        wait_on_word(arg, r);
    return NULL;
}

NOINL long wake_other_bits(tlog_t *l) {
    wt_event(l, F_OTHER, now_ns());
    return syscall(SYS_futex, &word, FUTEX_WAKE_BITSET_PRIVATE, 1, NULL, NULL, 2);
}

NOINL long wake_for_real(tlog_t *l) {
    __atomic_store_n(&word, 1, __ATOMIC_RELEASE);
    wt_event(l, F_REAL, now_ns());
    return syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 3;
    late_ms = argc > 2 ? atol(argv[2]) : 100;
    if (rounds < 1 || late_ms < 1) {
        fprintf(stderr, "usage: futex_nobody [rounds] [late_ms]\n");
        return 2;
    }
    tlog_t *logs = truth_alloc_logs(2, (size_t)rounds * 4 + 10); /* 0: main, 1: waiter */
    if (!logs)
        return 2;
    uint64_t t0 = now_ns();
    pthread_t th;
    if (pthread_create(&th, NULL, waiter_thread, &logs[1]) != 0) {
        perror("pthread_create");
        return 2;
    }
    long other = 0, real = 0;
    for (int r = 0; r < rounds; r++) {
        while (waiting_round < r)
            sleep_ms(1);
        sleep_ms(EARLY_MS);
        other += wake_other_bits(&logs[0]);
        sleep_ms(late_ms);
        real += wake_for_real(&logs[0]);
        while (done_round < r)
            sleep_ms(1);
    }
    pthread_join(th, NULL);
    uint64_t wall = now_ns() - t0;
    if (truth_overflowed(logs, 2, "futex_nobody"))
        return 2;
    uint64_t idle[NFUNC] = {0}, blame[NFUNC] = {0};
    wt_wait_totals(logs, 2, idle, NULL);
    wt_event_blame(logs, 2, blame);
    printf("futex_nobody: %d rounds, waited %.3f s; the other-bits wakes woke %ld, the real"
           " ones %ld\n",
           rounds, idle[F_WAIT] / 1e9, other, real);
    printf("truth wait_ns=%llu blame_wake_other_bits_ns=%llu blame_wake_for_real_ns=%llu"
           " woken_by_other_bits=%ld woken_for_real=%ld rounds=%d wall_ns=%llu\n",
           (unsigned long long)idle[F_WAIT], (unsigned long long)blame[F_OTHER],
           (unsigned long long)blame[F_REAL], other, real, rounds, (unsigned long long)wall);
    return 0;
}
