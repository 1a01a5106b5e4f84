/* timed_waits: timed waits that nobody ends; every one times out.
 *
 * `wait_for_nobody` calls pthread_cond_timedwait, `sem_for_nobody` sem_timedwait and
 * `futex_for_nobody` FUTEX_WAIT with a timeout, each `n` times for wait_ms; nobody ever
 * signals, posts or wakes. Their time is waiting (idleness) that nobody caused: it must be
 * reported as unblamed, and no code may be blamed for it. Another thread computes meanwhile
 * (`keep_busy`), so the profile has work too.
 *
 * Usage: timed_waits [n=8] [wait_ms=25]
 *
 * Ground truth (CLOCK_MONOTONIC): each timed call [called, returned]. Prints
 *   truth timed_cond_ns=.. timed_sem_ns=.. timed_futex_ns=.. timed_total_ns=..
 *         codes_ok=<1 if every call reported ETIMEDOUT> wall_ns=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wait_truth.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static sem_t sem;
static int fword;
static volatile int stop;
static int n = 8;
static uint64_t wait_ns = 25000000ull;

static struct timespec abs_after(clockid_t c, uint64_t ns) {
    uint64_t t = clock_ns(c) + ns;
    return (struct timespec){(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
}

NOINL uint64_t wait_for_nobody(int *ok) {
    uint64_t total = 0;
    pthread_mutex_lock(&m);
    for (int i = 0; i < n; i++) {
        struct timespec dl = abs_after(CLOCK_REALTIME, wait_ns);
        uint64_t a = now_ns();
        int r = pthread_cond_timedwait(&cv, &m, &dl);
        total += now_ns() - a;
        *ok &= r == ETIMEDOUT;
    }
    pthread_mutex_unlock(&m);
    return total;
}

NOINL uint64_t sem_for_nobody(int *ok) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        struct timespec dl = abs_after(CLOCK_REALTIME, wait_ns);
        uint64_t a = now_ns();
        int r = sem_timedwait(&sem, &dl);
        int e = errno;
        total += now_ns() - a;
        *ok &= r == -1 && e == ETIMEDOUT;
    }
    return total;
}

NOINL uint64_t futex_for_nobody(int *ok) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        struct timespec rel = {0, (long)wait_ns};
        uint64_t a = now_ns();
        long r = syscall(SYS_futex, &fword, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0);
        int e = errno;
        total += now_ns() - a;
        *ok &= r == -1 && e == ETIMEDOUT;
    }
    return total;
}

NOINL void keep_busy(void) {
    while (!stop)
        busy_for(1000000ull, 7);
}

static void *busy_thread(void *arg) {
    (void)arg;
    keep_busy();
    return NULL;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atoi(argv[1]) : 8;
    double wms = argc > 2 ? atof(argv[2]) : 25.0;
    if (n < 1 || wms <= 0 || wms >= 1000) {
        fprintf(stderr, "usage: timed_waits [n] [wait_ms]\n");
        return 2;
    }
    wait_ns = (uint64_t)(wms * 1e6);
    sem_init(&sem, 0, 0);
    pthread_t busy;
    if (pthread_create(&busy, NULL, busy_thread, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    uint64_t t0 = now_ns();
    int ok = 1;
    uint64_t c = wait_for_nobody(&ok);
    uint64_t s = sem_for_nobody(&ok);
    uint64_t f = futex_for_nobody(&ok);
    stop = 1;
    pthread_join(busy, NULL);
    uint64_t wall = now_ns() - t0;
    printf("timed_waits: %d x %.0f ms each: cond %.3f s, sem %.3f s, futex %.3f s, %s\n", n,
           wms, c / 1e9, s / 1e9, f / 1e9, ok ? "all timed out" : "NOT all timed out");
    printf("truth timed_cond_ns=%llu timed_sem_ns=%llu timed_futex_ns=%llu timed_total_ns=%llu"
           " codes_ok=%d wall_ns=%llu\n",
           (unsigned long long)c, (unsigned long long)s, (unsigned long long)f,
           (unsigned long long)(c + s + f), ok, (unsigned long long)wall);
    return ok ? 0 : 1;
}
