/* wait_semantics: the return codes and side effects of every kind of wait, for comparing a
 * profiled run with a plain one (they must print the same and exit the same).
 *
 * Each check prints one line "<name>: <observed results>" followed by "ok" or "FAIL"; the
 * observations are return codes and errno names, never times, so the output is the same
 * from run to run. Covered: condition variables (signal, broadcast, timed wait timing out
 * on both clocks, EINVAL, mutex owned again on return), semaphores (trywait, timed wait
 * timing out, EINVAL, sem_wait interrupted by the program's own signal), rwlocks (shared
 * reads, EBUSY, timed locks timing out, EDEADLK), clocks and deadlines glibc refuses before
 * it looks at the object (EINVAL with a unit there, on a free lock), a robust mutex that is
 * not recoverable (ENOTRECOVERABLE, and left free for the next locker), a pending
 * cancellation request at semaphore waits with a unit there (sem_wait and sem_timedwait act
 * on it first; sem_clockwait takes the unit, and its thread returns), barriers (exactly one serial thread per
 * round), joins (values, tryjoin EBUSY, timed join timing out, EDEADLK), and raw
 * syscall(SYS_futex, ...) (wake, EAGAIN, timeouts, bitset, requeue, EINTR from the
 * program's own signal) plus other system calls made through syscall() and errno kept.
 * While a busy thread computes (so the profiler samples), waits that can only time out must
 * report ETIMEDOUT, never EINTR.
 *
 * Usage: wait_semantics. Exit status 0 if every check passed, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wait_truth.h"

static int failures;
static volatile int stop_busy;
static volatile sig_atomic_t usr1_count;

static void check(const char *name, const char *observed, int ok) {
    printf("%s: %s %s\n", name, observed, ok ? "ok" : "FAIL");
    fflush(stdout);
    if (!ok)
        failures++;
}

static const char *ename(int e) {
    switch (e) {
    case 0:
        return "0";
    case EAGAIN:
        return "EAGAIN";
    case EBUSY:
        return "EBUSY";
    case EDEADLK:
        return "EDEADLK";
    case EINTR:
        return "EINTR";
    case EINVAL:
        return "EINVAL";
    case ENOSYS:
        return "ENOSYS";
    case EPERM:
        return "EPERM";
    case ESRCH:
        return "ESRCH";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    default:
        return "other";
    }
}

static struct timespec abs_after(clockid_t c, uint64_t ns) {
    uint64_t t = clock_ns(c) + ns;
    return (struct timespec){(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void on_usr1(int sig) {
    (void)sig;
    int saved = errno;
    usr1_count++;
    errno = saved;
}

NOINL void keep_busy(void) {
    while (!stop_busy)
        busy_for(1000000ull, 3);
}

static void *busy_thread(void *arg) {
    (void)arg;
    keep_busy();
    return NULL;
}

/* ---------------------------------------------------------------- condition variables */

static pthread_mutex_t cm;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag, woken, started;

static void *cond_waiter(void *arg) {
    (void)arg;
    pthread_mutex_lock(&cm);
    started++;
    int r = 0;
    while (!flag && r == 0)
        r = pthread_cond_wait(&cv, &cm);
    woken++;
    int u = pthread_mutex_unlock(&cm); /* errorcheck: 0 only if we own it again */
    return (void *)(intptr_t)(r == 0 && u == 0);
}

static void check_condvars(void) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&cm, &ma);
    char buf[256];

    /* signal: one waiter */
    pthread_t t[3];
    pthread_create(&t[0], NULL, cond_waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&cm);
        int s = started;
        pthread_mutex_unlock(&cm);
        if (s == 1)
            break;
        sleep_ms(1);
    }
    sleep_ms(20);
    pthread_mutex_lock(&cm);
    flag = 1;
    int rs = pthread_cond_signal(&cv);
    pthread_mutex_unlock(&cm);
    void *v;
    pthread_join(t[0], &v);
    snprintf(buf, sizeof buf, "signal=%s waiter_ok=%d", ename(rs), (int)(intptr_t)v);
    check("cond signal", buf, rs == 0 && v == (void *)1);

    /* broadcast: three waiters */
    flag = 0;
    started = 0;
    woken = 0;
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, cond_waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&cm);
        int s = started;
        pthread_mutex_unlock(&cm);
        if (s == 3)
            break;
        sleep_ms(1);
    }
    sleep_ms(20);
    pthread_mutex_lock(&cm);
    flag = 1;
    int rb = pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&cm);
    int all = 1;
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], &v);
        all &= v == (void *)1;
    }
    snprintf(buf, sizeof buf, "broadcast=%s woken=%d waiters_ok=%d", ename(rb), woken, all);
    check("cond broadcast", buf, rb == 0 && woken == 3 && all);

    /* timed waits that time out, on the realtime and the monotonic clock */
    pthread_mutex_lock(&cm);
    struct timespec dl = abs_after(CLOCK_REALTIME, 30000000ull);
    int r1 = pthread_cond_timedwait(&cv, &cm, &dl);
    int u1 = pthread_mutex_unlock(&cm);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_t mcv;
    pthread_cond_init(&mcv, &ca);
    pthread_mutex_lock(&cm);
    dl = abs_after(CLOCK_MONOTONIC, 30000000ull);
    int r2 = pthread_cond_timedwait(&mcv, &cm, &dl);
    dl = abs_after(CLOCK_MONOTONIC, 30000000ull);
    int r3 = pthread_cond_clockwait(&cv, &cm, CLOCK_MONOTONIC, &dl);
    struct timespec bad = {0, 2000000000L};
    int r4 = pthread_cond_timedwait(&cv, &cm, &bad);
    int u2 = pthread_mutex_unlock(&cm);
    snprintf(buf, sizeof buf, "realtime=%s unlock=%s monotonic=%s clockwait=%s bad_ns=%s unlock=%s",
             ename(r1), ename(u1), ename(r2), ename(r3), ename(r4), ename(u2));
    check("cond timed", buf,
          r1 == ETIMEDOUT && u1 == 0 && r2 == ETIMEDOUT && r3 == ETIMEDOUT && r4 == EINVAL &&
              u2 == 0);
    pthread_cond_destroy(&mcv);
    pthread_condattr_destroy(&ca);
}

/* ---------------------------------------------------------------- semaphores */

static sem_t sem;
static volatile int sem_waiting;

static void *sem_interrupted(void *arg) {
    (void)arg;
    sem_waiting = 1;
    int r = sem_wait(&sem);
    int e = errno;
    return (void *)(intptr_t)(r == -1 ? e : 0);
}

static void check_semaphores(void) {
    char buf[256];
    sem_init(&sem, 0, 0);
    errno = 0;
    int r1 = sem_trywait(&sem);
    int e1 = errno;
    int r2 = sem_post(&sem);
    int val = -1;
    sem_getvalue(&sem, &val);
    int r3 = sem_wait(&sem);
    struct timespec dl = abs_after(CLOCK_REALTIME, 30000000ull);
    int r4 = sem_timedwait(&sem, &dl);
    int e4 = errno;
    dl = abs_after(CLOCK_MONOTONIC, 30000000ull);
    int r5 = sem_clockwait(&sem, CLOCK_MONOTONIC, &dl);
    int e5 = errno;
    struct timespec bad = {0, 2000000000L};
    int r6 = sem_timedwait(&sem, &bad);
    int e6 = errno;
    snprintf(buf, sizeof buf, "trywait=%d/%s post=%d value=%d wait=%d timedwait=%d/%s"
             " clockwait=%d/%s bad_ns=%d/%s", r1, ename(e1), r2, val, r3, r4, ename(e4), r5,
             ename(e5), r6, ename(e6));
    check("sem basics", buf,
          r1 == -1 && e1 == EAGAIN && r2 == 0 && val == 1 && r3 == 0 && r4 == -1 &&
              e4 == ETIMEDOUT && r5 == -1 && e5 == ETIMEDOUT && r6 == -1 && e6 == EINVAL);

    /* The program's own signal interrupts sem_wait: EINTR must reach it. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART */
    usr1_count = 0;
    pthread_t t;
    sem_waiting = 0;
    pthread_create(&t, NULL, sem_interrupted, NULL);
    while (!sem_waiting)
        sleep_ms(1);
    sleep_ms(50);
    pthread_kill(t, SIGUSR1);
    void *v;
    pthread_join(t, &v);
    snprintf(buf, sizeof buf, "sem_wait=%s handler_runs=%d", ename((int)(intptr_t)v),
             (int)usr1_count);
    check("sem_wait own signal", buf, (intptr_t)v == EINTR && usr1_count == 1);
    sem_destroy(&sem);
}

/* ---------------------------------------------------------------- rwlocks */

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

static void *rw_other_reads(void *arg) {
    (void)arg;
    int a = pthread_rwlock_tryrdlock(&rw);
    struct timespec dl = abs_after(CLOCK_REALTIME, 30000000ull);
    int b = pthread_rwlock_timedrdlock(&rw, &dl);
    return (void *)(intptr_t)(a * 1000 + b);
}

static void *rw_other_writes(void *arg) {
    (void)arg;
    int a = pthread_rwlock_trywrlock(&rw);
    struct timespec dl = abs_after(CLOCK_REALTIME, 30000000ull);
    int b = pthread_rwlock_timedwrlock(&rw, &dl);
    return (void *)(intptr_t)(a * 1000 + b);
}

static void check_rwlocks(void) {
    char buf[256];
    void *v;
    pthread_t t;
    int r1 = pthread_rwlock_rdlock(&rw);
    int r2 = pthread_rwlock_rdlock(&rw); /* recursive read */
    pthread_create(&t, NULL, rw_other_writes, NULL);
    pthread_join(t, &v);
    int w = (int)(intptr_t)v;
    int u1 = pthread_rwlock_unlock(&rw);
    int u2 = pthread_rwlock_unlock(&rw);
    int r3 = pthread_rwlock_wrlock(&rw);
    int r4 = pthread_rwlock_wrlock(&rw); /* relock by the writer */
    pthread_create(&t, NULL, rw_other_reads, NULL);
    pthread_join(t, &v);
    int r = (int)(intptr_t)v;
    int u3 = pthread_rwlock_unlock(&rw);
    snprintf(buf, sizeof buf, "rdlock=%s,%s other_write=%s,%s unlock=%s,%s wrlock=%s relock=%s"
             " other_read=%s,%s unlock=%s", ename(r1), ename(r2), ename(w / 1000),
             ename(w % 1000), ename(u1), ename(u2), ename(r3), ename(r4), ename(r / 1000),
             ename(r % 1000), ename(u3));
    check("rwlock", buf,
          r1 == 0 && r2 == 0 && w == EBUSY * 1000 + ETIMEDOUT && u1 == 0 && u2 == 0 &&
              r3 == 0 && r4 == EDEADLK && r == EBUSY * 1000 + ETIMEDOUT && u3 == 0);
}

/* ------------------------------------------------- refused deadlines, robust */

/* glibc refuses these before it looks at the semaphore or the lock: EINVAL although a unit
 * is there and the lock is free (the profiler's try first must not take them). */
static void check_refused_deadlines(void) {
    char buf[256];
    struct timespec bad = {0, -1}, past = {0, 0};
    sem_t s;
    sem_init(&s, 0, 1);
    errno = 0;
    int r1 = sem_timedwait(&s, &bad);
    int e1 = errno;
    errno = 0;
    int r2 = sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &past);
    int e2 = errno;
    int val = -1;
    sem_getvalue(&s, &val);
    sem_destroy(&s);
    pthread_rwlock_t l = PTHREAD_RWLOCK_INITIALIZER;
    int r3 = pthread_rwlock_timedrdlock(&l, &bad);
    int r4 = pthread_rwlock_clockwrlock(&l, CLOCK_PROCESS_CPUTIME_ID, &past);
    int r5 = pthread_rwlock_trywrlock(&l);
    snprintf(buf, sizeof buf, "sem_timedwait=%d/%s sem_clockwait=%d/%s value=%d"
             " timedrdlock=%s clockwrlock=%s then trywrlock=%s", r1, ename(e1), r2, ename(e2),
             val, ename(r3), ename(r4), ename(r5));
    check("refused deadlines", buf,
          r1 == -1 && e1 == EINVAL && r2 == -1 && e2 == EINVAL && val == 1 && r3 == EINVAL &&
              r4 == EINVAL && r5 == 0);
}

static pthread_mutex_t robust;

static void *robust_dies_holding(void *arg) {
    (void)arg;
    pthread_mutex_lock(&robust);
    return NULL;
}

static void *robust_locks(void *arg) {
    (void)arg;
    return (void *)(intptr_t)pthread_mutex_lock(&robust);
}

static const char *rname(int e) {
    return e == EOWNERDEAD ? "EOWNERDEAD" : e == ENOTRECOVERABLE ? "ENOTRECOVERABLE" : ename(e);
}

/* Its owner died and nobody made it consistent: every later lock fails at once, in this
 * thread and in another (which would wait forever if a lock left the word set). */
static void check_unrecoverable_mutex(void) {
    char buf[256];
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust, &a);
    pthread_mutexattr_destroy(&a);
    pthread_t t;
    void *v;
    pthread_create(&t, NULL, robust_dies_holding, NULL);
    pthread_join(t, NULL);
    int r1 = pthread_mutex_lock(&robust);
    int u = pthread_mutex_unlock(&robust);
    int r2 = pthread_mutex_lock(&robust);
    struct timespec dl = abs_after(CLOCK_REALTIME, 30000000ull);
    int r3 = pthread_mutex_timedlock(&robust, &dl);
    pthread_create(&t, NULL, robust_locks, NULL);
    pthread_join(t, &v);
    int r4 = (int)(intptr_t)v;
    snprintf(buf, sizeof buf, "lock=%s unlock=%s lock=%s timedlock=%s other_lock=%s",
             rname(r1), ename(u), rname(r2), rname(r3), rname(r4));
    check("robust not recoverable", buf,
          r1 == EOWNERDEAD && u == 0 && r2 == ENOTRECOVERABLE && r3 == ENOTRECOVERABLE &&
              r4 == ENOTRECOVERABLE);
    pthread_mutex_destroy(&robust);
}

static sem_t cancel_sem;

static void *cancelled_waiter(void *arg) {
    int which = (int)(intptr_t)arg;
    pthread_cancel(pthread_self()); /* deferred: pending until a cancellation point */
    struct timespec far = abs_after(CLOCK_REALTIME, 10000000000ull);
    int r = which == 0   ? sem_wait(&cancel_sem)
            : which == 1 ? sem_timedwait(&cancel_sem, &far)
                         : sem_clockwait(&cancel_sem, CLOCK_REALTIME, &far);
    return (void *)(intptr_t)(r == 0 ? 1 : 2);
}

static void check_cancellation_points(void) {
    char buf[256], *at = buf;
    int ok = 1;
    for (int which = 0; which < 3; which++) {
        sem_init(&cancel_sem, 0, 1);
        pthread_t t;
        void *v;
        pthread_create(&t, NULL, cancelled_waiter, (void *)(intptr_t)which);
        pthread_join(t, &v);
        int val = -1;
        sem_getvalue(&cancel_sem, &val);
        sem_destroy(&cancel_sem);
        const char *end = v == PTHREAD_CANCELED ? "cancelled" : v == (void *)1 ? "took" : "failed";
        at += snprintf(at, (size_t)(buf + sizeof buf - at), "%s%s value=%d",
                       which ? " " : "", end, val);
        ok &= which < 2 ? v == PTHREAD_CANCELED && val == 1 : v == (void *)1 && val == 0;
    }
    check("sem cancellation points", buf, ok);
}

/* ---------------------------------------------------------------- barriers */

#define BAR_THREADS 4
#define BAR_ROUNDS 50
static pthread_barrier_t bar;
static int serial_count[BAR_ROUNDS], other_bad;

static void *bar_thread(void *arg) {
    unsigned seed = (unsigned)(intptr_t)arg;
    for (int r = 0; r < BAR_ROUNDS; r++) {
        busy_for(20000ull * ((seed + (unsigned)r) % 4), seed);
        int x = pthread_barrier_wait(&bar);
        if (x == PTHREAD_BARRIER_SERIAL_THREAD)
            __atomic_fetch_add(&serial_count[r], 1, __ATOMIC_RELAXED);
        else if (x != 0)
            __atomic_fetch_add(&other_bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void check_barriers(void) {
    char buf[256];
    pthread_barrier_init(&bar, NULL, BAR_THREADS);
    pthread_t t[BAR_THREADS];
    for (int i = 0; i < BAR_THREADS; i++)
        pthread_create(&t[i], NULL, bar_thread, (void *)(intptr_t)i);
    for (int i = 0; i < BAR_THREADS; i++)
        pthread_join(t[i], NULL);
    int rounds_ok = 0;
    for (int r = 0; r < BAR_ROUNDS; r++)
        rounds_ok += serial_count[r] == 1;
    int d = pthread_barrier_destroy(&bar);
    snprintf(buf, sizeof buf, "rounds_with_one_serial=%d/%d other_codes_bad=%d destroy=%s",
             rounds_ok, BAR_ROUNDS, other_bad, ename(d));
    check("barrier", buf, rounds_ok == BAR_ROUNDS && other_bad == 0 && d == 0);
}

/* ---------------------------------------------------------------- joins */

static volatile int release_joinee;

static void *joinee_returns(void *arg) {
    while (!release_joinee)
        sleep_ms(1);
    return arg;
}

static void *joinee_exits(void *arg) {
    sleep_ms(20);
    pthread_exit(arg);
}

static void check_joins(void) {
    char buf[256];
    pthread_t t;
    void *v = NULL;
    release_joinee = 0;
    pthread_create(&t, NULL, joinee_returns, (void *)0x77);
    int r1 = pthread_tryjoin_np(t, &v);
    struct timespec dl = abs_after(CLOCK_REALTIME, 30000000ull);
    int r2 = pthread_timedjoin_np(t, &v, &dl);
    release_joinee = 1;
    int r3 = pthread_join(t, &v);
    int ok_v = v == (void *)0x77;
    pthread_create(&t, NULL, joinee_exits, (void *)0x99);
    v = NULL;
    int r4 = pthread_join(t, &v);
    int ok_x = v == (void *)0x99;
    int r5 = pthread_join(pthread_self(), NULL);
    snprintf(buf, sizeof buf, "tryjoin=%s timedjoin=%s join=%s value=%d exit_join=%s value=%d"
             " self=%s", ename(r1), ename(r2), ename(r3), ok_v, ename(r4), ok_x, ename(r5));
    check("join", buf,
          r1 == EBUSY && r2 == ETIMEDOUT && r3 == 0 && ok_v && r4 == 0 && ok_x && r5 == EDEADLK);
}

/* ---------------------------------------------------------------- raw futexes */

static int fw, fw2;
static volatile int futex_waiting;

static long futex(int *uaddr, int op, int val, const struct timespec *ts, int *uaddr2,
                  int val3) {
    return syscall(SYS_futex, uaddr, op, val, ts, uaddr2, val3);
}

static void *futex_waiter(void *arg) {
    (void)arg;
    futex_waiting = 1;
    long r;
    do
        r = futex(&fw, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    while (r == -1 && errno == EAGAIN && __atomic_load_n(&fw, __ATOMIC_ACQUIRE) == 0);
    return (void *)(intptr_t)(r == -1 ? errno : 0);
}

static void *futex_requeued(void *arg) {
    (void)arg;
    futex_waiting = 1;
    long r = futex(&fw, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    return (void *)(intptr_t)(r == -1 ? errno : 0);
}

static void check_futexes(void) {
    char buf[320];
    pthread_t t;
    void *v;

    /* value mismatch, relative timeout, absolute bitset timeout, wake with nobody waiting */
    fw = 1;
    long a = futex(&fw, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    int ea = errno;
    fw = 0;
    struct timespec rel = {0, 30000000L};
    long b = futex(&fw, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0);
    int eb = errno;
    struct timespec dl = abs_after(CLOCK_MONOTONIC, 30000000ull);
    long c = futex(&fw, FUTEX_WAIT_BITSET_PRIVATE, 0, &dl, NULL, FUTEX_BITSET_MATCH_ANY);
    int ec = errno;
    long d = futex(&fw, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    snprintf(buf, sizeof buf, "mismatch=%ld/%s timeout=%ld/%s bitset_timeout=%ld/%s"
             " wake_nobody=%ld", a, ename(ea), b, ename(eb), c, ename(ec), d);
    check("futex basics", buf,
          a == -1 && ea == EAGAIN && b == -1 && eb == ETIMEDOUT && c == -1 &&
              ec == ETIMEDOUT && d == 0);

    /* a waiter woken by FUTEX_WAKE */
    fw = 0;
    futex_waiting = 0;
    pthread_create(&t, NULL, futex_waiter, NULL);
    while (!futex_waiting)
        sleep_ms(1);
    sleep_ms(30);
    __atomic_store_n(&fw, 1, __ATOMIC_RELEASE);
    long w = futex(&fw, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(t, &v);
    snprintf(buf, sizeof buf, "woken=%ld waiter=%s", w, ename((int)(intptr_t)v));
    check("futex wake", buf, w == 1 && v == (void *)0);

    /* requeue: a waiter on fw is moved to fw2, then woken there */
    fw = 0;
    fw2 = 0;
    futex_waiting = 0;
    pthread_create(&t, NULL, futex_requeued, NULL);
    while (!futex_waiting)
        sleep_ms(1);
    sleep_ms(30);
    long q = futex(&fw, FUTEX_CMP_REQUEUE_PRIVATE, 0, (const struct timespec *)(uintptr_t)1,
                   &fw2, 0);
    long w2 = futex(&fw2, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(t, &v);
    snprintf(buf, sizeof buf, "requeued=%ld woken_at_target=%ld waiter=%s", q, w2,
             ename((int)(intptr_t)v));
    check("futex requeue", buf, q == 1 && w2 == 1 && v == (void *)0);

    /* the program's own signal interrupts FUTEX_WAIT */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    usr1_count = 0;
    fw = 0;
    futex_waiting = 0;
    pthread_create(&t, NULL, futex_requeued, NULL);
    while (!futex_waiting)
        sleep_ms(1);
    sleep_ms(30);
    pthread_kill(t, SIGUSR1);
    pthread_join(t, &v);
    snprintf(buf, sizeof buf, "futex_wait=%s handler_runs=%d", ename((int)(intptr_t)v),
             (int)usr1_count);
    check("futex own signal", buf, v == (void *)(intptr_t)EINTR && usr1_count == 1);

    /* other system calls through syscall(): results and errno as without the profiler */
    errno = 1234;
    long pid = syscall(SYS_getpid);
    int e_kept = errno == 1234;
    long tid = syscall(SYS_gettid);
    long nosys = syscall(100000);
    int e_nosys = errno;
    const char msg[] = "syscall write: through syscall()\n";
    fflush(stdout);
    long wr = syscall(SYS_write, 1, msg, sizeof msg - 1);
    snprintf(buf, sizeof buf, "getpid_same=%d errno_kept=%d gettid_same=%d nosys=%ld/%s"
             " write=%d", pid == getpid(), e_kept, tid == gettid(), nosys, ename(e_nosys),
             wr == (long)(sizeof msg - 1));
    check("syscall passthrough", buf,
          pid == getpid() && e_kept && tid == gettid() && nosys == -1 && e_nosys == ENOSYS &&
              wr == (long)(sizeof msg - 1));
}

/* ------------------------------------------------ no EINTR the program did not cause */

static void check_no_foreign_eintr(void) {
    char buf[256];
    sem_t s;
    sem_init(&s, 0, 0);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    int fword = 0;
    int sem_eintr = 0, sem_to = 0, cond_to = 0, futex_eintr = 0, futex_to = 0;
    for (int i = 0; i < 10; i++) {
        struct timespec dl = abs_after(CLOCK_REALTIME, 20000000ull);
        if (sem_timedwait(&s, &dl) == -1) {
            sem_eintr += errno == EINTR;
            sem_to += errno == ETIMEDOUT;
        }
        pthread_mutex_lock(&m);
        dl = abs_after(CLOCK_REALTIME, 20000000ull);
        cond_to += pthread_cond_timedwait(&c, &m, &dl) == ETIMEDOUT;
        pthread_mutex_unlock(&m);
        struct timespec rel = {0, 20000000L};
        if (futex(&fword, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0) == -1) {
            futex_eintr += errno == EINTR;
            futex_to += errno == ETIMEDOUT;
        }
        busy_for(2000000ull, (unsigned)i); /* sampled between the waits */
    }
    sem_destroy(&s);
    snprintf(buf, sizeof buf, "sem_timedout=%d sem_eintr=%d cond_timedout=%d futex_timedout=%d"
             " futex_eintr=%d", sem_to, sem_eintr, cond_to, futex_to, futex_eintr);
    check("no foreign EINTR", buf,
          sem_to == 10 && sem_eintr == 0 && cond_to == 10 && futex_to == 10 && futex_eintr == 0);
}

int main(void) {
    pthread_t busy;
    pthread_create(&busy, NULL, busy_thread, NULL);
    check_condvars();
    check_semaphores();
    check_rwlocks();
    check_refused_deadlines();
    check_unrecoverable_mutex();
    check_cancellation_points();
    check_barriers();
    check_joins();
    check_futexes();
    check_no_foreign_eintr();
    stop_busy = 1;
    pthread_join(busy, NULL);
    printf("wait_semantics: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
