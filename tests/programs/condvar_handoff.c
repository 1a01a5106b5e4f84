/* condvar_handoff: the mutex side of condition variables.
 *
 * Part A, the signaller keeps the mutex: `await_flag` waits in pthread_cond_wait until
 * `signal_then_hold` sets the flag, signals, and then computes HOLD_MS more before unlocking.
 * The waiter's time until the signal is condvar waiting (blamed on signal_then_hold's
 * signal); its time retaking the mutex afterwards is mutex waiting, blamed on
 * signal_then_hold's unlock.
 * Part B, a wait ends a hold: `hold_then_wait` locks the mutex, computes HOLD_MS and then
 * waits in pthread_cond_wait (which releases the mutex); `poke_mutex` tries to lock it
 * meanwhile and is blocked until then: blamed on `hold_then_wait` at its pthread_cond_wait.
 * (`wake_holder` then signals it.)
 *
 * Usage: condvar_handoff [rounds=40] [hold_ms=4]
 *
 * Ground truth (CLOCK_MONOTONIC). Part A: each pthread_cond_wait of await_flag
 * [called, returned], the signal time s and the unlock time u of signal_then_hold:
 * cond part = min(returned, s) - called (idle_cond_ns), mutex part = returned - s
 * (idle_retake_ns), blame of the hold = overlap of the wait with [s, u] (blame_retake_ns).
 * Part B: poke_mutex's lock waits and hold_then_wait's holds [locked, pthread_cond_wait
 * called]; blame_wait_hold_ns = their overlap. Prints
 *   truth idle_cond_ns=.. idle_retake_ns=.. blame_retake_ns=.. wait_poke_ns=..
 *         blame_wait_hold_ns=.. rounds=.. wall_ns=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wait_truth.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;
static int rounds = 40;
static uint64_t hold_ns = 4000000ull;

/* Part A */
static uint64_t *wait_a, *wait_b, *sig_t, *unl_t; /* per round */
static volatile int a_ready = -1, a_done = -1;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

NOINL void await_flag(int r) {
    pthread_mutex_lock(&m);
    a_ready = r;
    while (!flag) {
        uint64_t a = now_ns();
        pthread_cond_wait(&cv, &m);
        uint64_t b = now_ns();
        if (flag) { /* the wait that ended with the signal (a spurious one is not logged) */
            wait_a[r] = a;
            wait_b[r] = b;
        }
    }
    flag = 0;
    pthread_mutex_unlock(&m);
    a_done = r;
}

static void *part_a_waiter(void *arg) {
    (void)arg;
    for (int r = 0; r < rounds; r++)
        await_flag(r);
    return NULL;
}

NOINL void signal_then_hold(int r) {
    pthread_mutex_lock(&m);
    flag = 1;
    sig_t[r] = now_ns();
    pthread_cond_signal(&cv);
    busy_for(hold_ns, (unsigned)r);
    unl_t[r] = now_ns();
    pthread_mutex_unlock(&m);
}

/* Part B */
static uint64_t *hold_a, *hold_b, *poke_a, *poke_b;
static volatile int b_locked = -1, b_waiting = -1;
static int woken;

NOINL void hold_then_wait(int r) {
    pthread_mutex_lock(&m);
    hold_a[r] = now_ns();
    b_locked = r;
    busy_for(hold_ns, (unsigned)r);
    hold_b[r] = now_ns();
    b_waiting = r;
    while (!woken)
        pthread_cond_wait(&cv, &m);
    woken = 0;
    pthread_mutex_unlock(&m);
}

static void *part_b_holder(void *arg) {
    (void)arg;
    for (int r = 0; r < rounds; r++)
        hold_then_wait(r);
    return NULL;
}

NOINL void poke_mutex(int r) {
    poke_a[r] = now_ns();
    pthread_mutex_lock(&m);
    poke_b[r] = now_ns();
    pthread_mutex_unlock(&m);
}

NOINL void wake_holder(void) {
    pthread_mutex_lock(&m);
    woken = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 40;
    double hms = argc > 2 ? atof(argv[2]) : 4.0;
    if (rounds < 1 || hms <= 0) {
        fprintf(stderr, "usage: condvar_handoff [rounds] [hold_ms]\n");
        return 2;
    }
    hold_ns = (uint64_t)(hms * 1e6);
    uint64_t *mem = calloc((size_t)rounds * 8, sizeof *mem);
    if (!mem)
        return 2;
    wait_a = mem, wait_b = mem + rounds, sig_t = mem + 2 * rounds, unl_t = mem + 3 * rounds;
    hold_a = mem + 4 * rounds, hold_b = mem + 5 * rounds, poke_a = mem + 6 * rounds,
    poke_b = mem + 7 * rounds;
    uint64_t t0 = now_ns();

    pthread_t t;
    if (pthread_create(&t, NULL, part_a_waiter, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    for (int r = 0; r < rounds; r++) {
        while (a_ready < r)
            sleep_ms(1);
        sleep_ms(3); /* the waiter is in pthread_cond_wait */
        signal_then_hold(r);
        while (a_done < r)
            sleep_ms(1);
    }
    pthread_join(t, NULL);

    if (pthread_create(&t, NULL, part_b_holder, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    for (int r = 0; r < rounds; r++) {
        while (b_locked < r) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        poke_mutex(r); /* blocks until hold_then_wait waits */
        while (b_waiting < r)
            sleep_ms(1);
        wake_holder();
    }
    pthread_join(t, NULL);
    uint64_t wall = now_ns() - t0;

    uint64_t idle_cond = 0, idle_retake = 0, blame_retake = 0, wait_poke = 0, blame_hold = 0;
    for (int r = 0; r < rounds; r++) {
        uint64_t s = sig_t[r] < wait_b[r] ? sig_t[r] : wait_b[r];
        idle_cond += s > wait_a[r] ? s - wait_a[r] : 0;
        idle_retake += wait_b[r] - s;
        ival_t w = {wait_a[r], wait_b[r], 0, 0}, h = {sig_t[r], unl_t[r], 0, 0};
        blame_retake += truth_overlap(&h, &w);
        ival_t pw = {poke_a[r], poke_b[r], 0, 0}, ph = {hold_a[r], hold_b[r], 0, 0};
        wait_poke += poke_b[r] - poke_a[r];
        blame_hold += truth_overlap(&ph, &pw);
    }
    printf("condvar_handoff: %.2f s, %d rounds: waiter %.3f s for the signal + %.3f s retaking"
           " the mutex; poke blocked %.3f s\n",
           wall / 1e9, rounds, idle_cond / 1e9, idle_retake / 1e9, wait_poke / 1e9);
    printf("truth idle_cond_ns=%llu idle_retake_ns=%llu blame_retake_ns=%llu wait_poke_ns=%llu"
           " blame_wait_hold_ns=%llu rounds=%d wall_ns=%llu\n",
           (unsigned long long)idle_cond, (unsigned long long)idle_retake,
           (unsigned long long)blame_retake, (unsigned long long)wait_poke,
           (unsigned long long)blame_hold, rounds, (unsigned long long)wall);
    return 0;
}
