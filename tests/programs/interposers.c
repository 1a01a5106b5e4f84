/* interposers: every function the blameprof runtime interposes, called as a program calls
 * it, for comparing a profiled run with a plain one and the profile with what the program
 * measured of itself.
 *
 * usage: interposers waits | exec [CPU_SECONDS=0.3] | image VARIANT CPU_SECONDS
 *
 * waits: each wait is made by a function of its own, w_<what> (so the profile shows it at
 * `w_<what> -> <interposed function>`), and lasts about 100 ms because a helper thread
 * keeps it waiting (holds the lock, posts, signals, wakes, exits or sends a signal that
 * late) or because it times out. Each prints "w_<what>: <results> ok|FAIL", where results
 * are return codes and errno names only (the same from run to run), and the wait it measured
 * with CLOCK_MONOTONIC around the call goes into the final line
 * "truth w_<what>_ns=N ...". Lock, condition-variable, semaphore, barrier, join, spin-lock
 * and futex waits are the profiler's idleness; sleeps, descriptor waits and signal waits are
 * not (they only keep the sampling signal out). Then the calls that do not wait: failing
 * execs (errno kept, profiling carries on), descriptors (dup2, dup3, close, close_range,
 * closefrom), the signal-mask and handler functions, sem_post, trylocks, inits and destroys,
 * dlopen and dlclose. Exit status 0 if every check passed, else 1.
 *
 * exec: for each exec variant (execl, execlp, execle, execv, execvp, execvpe, execve,
 * fexecve; and posix_spawn, posix_spawnp) starts a process that runs this program as
 * "image VARIANT CPU_SECONDS" with the arguments "two words" and "" after them, and
 * INTERPOSERS_VARIANT=VARIANT in its environment (set with setenv for the variants that
 * pass the caller's environment, in the envp given for the others: the caller's
 * environment and that variable). Last, execve_bare: execve with an environment of two
 * variables only (INTERPOSERS_VARIANT and PATH), without the profiler's. Prints
 * "exec VARIANT: status=S" and "truth pid_VARIANT=PID" per process.
 *
 * image: checks its arguments and environment ("image VARIANT: argv ok env ok"), runs
 * image_work for CPU_SECONDS of its thread's CPU time and prints
 * "truth image_VARIANT_ns=N proc_VARIANT_ns=M": the CPU time image_work measured and the
 * process's whole CPU time (CLOCK_PROCESS_CPUTIME_ID, which runs on across exec), then ends
 * with _exit, _Exit or a return from main (by variant).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "truth_log.h"

#define NOINL __attribute__((noinline, noclone))
#define HOLD_MS 100  /* how long a helper keeps a wait waiting */
#define SHORT_MS 80  /* a timeout, or a sleep */
#define SPIN_MS 50   /* a spin-lock hold (the waiter burns a CPU meanwhile) */

extern char **environ;

static int failures;
static char truth_line[8192] = "truth";

static const char *ename(int e) {
    switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case EBUSY: return "EBUSY";
    case EBADF: return "EBADF";
    case EDEADLK: return "EDEADLK";
    case EINTR: return "EINTR";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case ETIMEDOUT: return "ETIMEDOUT";
    default: return "other";
    }
}

/* Prints the check's line; `waited` (ns, or 0 for none) goes into the truth line. */
static void note(const char *name, int ok, uint64_t waited, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(const char *name, int ok, uint64_t waited, const char *fmt, ...) {
    char observed[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(observed, sizeof observed, fmt, ap);
    va_end(ap);
    printf("%s: %s %s\n", name, observed, ok ? "ok" : "FAIL");
    fflush(stdout);
    if (!ok)
        failures++;
    if (waited) {
        size_t len = strlen(truth_line);
        snprintf(truth_line + len, sizeof truth_line - len, " %s_ns=%llu", name,
                 (unsigned long long)waited);
    }
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static struct timespec abs_after(clockid_t c, long ms) {
    uint64_t t = clock_ns(c) + (uint64_t)ms * 1000000ull;
    return (struct timespec){(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
}

/* --- the helper thread that keeps a wait waiting --------------------------------------- */

static pthread_t helper_thread, main_thread;
static int ready_pipe[2];

static void helper(void *(*fn)(void *)) {
    if (pthread_create(&helper_thread, NULL, fn, NULL) != 0) {
        perror("pthread_create");
        exit(1);
    }
}

/* The helper holds what the main thread will wait for. (read and write are not
 * interposed: the handshake is no wait of the profiler's.) */
static void helper_ready(void) {
    char c = 1;
    if (write(ready_pipe[1], &c, 1) != 1)
        abort();
}

static void await_helper(void) {
    char c;
    while (read(ready_pipe[0], &c, 1) != 1) {
    }
}

static void *helper_result;

static NOINL void reap(void) {
    pthread_join(helper_thread, &helper_result);
}

#define TIMED(waited, call)                                                                    \
    ({                                                                                         \
        uint64_t t0_ = now_ns();                                                               \
        __typeof__(call) r_ = (call);                                                          \
        int e_ = errno;                                                                        \
        waited = now_ns() - t0_;                                                               \
        errno = e_;                                                                            \
        r_;                                                                                    \
    })

/* --- mutexes ---------------------------------------------------------------------------- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *hold_mutex(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    helper_ready();
    sleep_ms(HOLD_MS);
    pthread_mutex_unlock(&m);
    return NULL;
}

/* Waits for `m` (held by a helper for HOLD_MS) with `how`; expects `want`. */
#define MUTEX_WAIT(name, want, call)                                                           \
    NOINL void name(void) {                                                                    \
        uint64_t w;                                                                            \
        helper(hold_mutex);                                                                    \
        await_helper();                                                                        \
        int rc = TIMED(w, call);                                                               \
        if (rc == 0)                                                                           \
            pthread_mutex_unlock(&m);                                                          \
        reap();                                                                                \
        note(#name, rc == (want), w, "rc=%s", ename(rc));                                      \
    }

static struct timespec ts_real, ts_mono;

MUTEX_WAIT(w_mutex_lock, 0, pthread_mutex_lock(&m))
MUTEX_WAIT(w_mutex_timedlock, 0,
           pthread_mutex_timedlock(&m, (ts_real = abs_after(CLOCK_REALTIME, 5000), &ts_real)))
MUTEX_WAIT(w_mutex_clocklock, 0,
           pthread_mutex_clocklock(&m, CLOCK_MONOTONIC,
                                   (ts_mono = abs_after(CLOCK_MONOTONIC, 5000), &ts_mono)))
MUTEX_WAIT(w_mutex_clocklock_timeout, ETIMEDOUT,
           pthread_mutex_clocklock(&m, CLOCK_MONOTONIC,
                                   (ts_mono = abs_after(CLOCK_MONOTONIC, SHORT_MS / 2), &ts_mono)))

/* --- rwlocks ---------------------------------------------------------------------------- */

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int hold_as_writer;

static void *hold_rwlock(void *arg) {
    (void)arg;
    if (hold_as_writer)
        pthread_rwlock_wrlock(&rw);
    else
        pthread_rwlock_rdlock(&rw);
    helper_ready();
    sleep_ms(HOLD_MS);
    pthread_rwlock_unlock(&rw);
    return NULL;
}

/* Waits for `rw` held by a helper (as a writer if `writer`) with `call`; expects `want`. */
#define RWLOCK_WAIT(name, writer, want, call)                                                  \
    NOINL void name(void) {                                                                    \
        uint64_t w;                                                                            \
        hold_as_writer = (writer);                                                             \
        helper(hold_rwlock);                                                                   \
        await_helper();                                                                        \
        int rc = TIMED(w, call);                                                               \
        if (rc == 0)                                                                           \
            pthread_rwlock_unlock(&rw);                                                        \
        reap();                                                                                \
        note(#name, rc == (want), w, "rc=%s", ename(rc));                                      \
    }

RWLOCK_WAIT(w_rwlock_rdlock, 1, 0, pthread_rwlock_rdlock(&rw))
RWLOCK_WAIT(w_rwlock_wrlock, 0, 0, pthread_rwlock_wrlock(&rw))
RWLOCK_WAIT(w_rwlock_timedrdlock, 1, 0,
            pthread_rwlock_timedrdlock(&rw, (ts_real = abs_after(CLOCK_REALTIME, 5000), &ts_real)))
RWLOCK_WAIT(w_rwlock_timedwrlock, 0, 0,
            pthread_rwlock_timedwrlock(&rw, (ts_real = abs_after(CLOCK_REALTIME, 5000), &ts_real)))
RWLOCK_WAIT(w_rwlock_clockrdlock, 1, 0,
            pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC,
                                       (ts_mono = abs_after(CLOCK_MONOTONIC, 5000), &ts_mono)))
RWLOCK_WAIT(w_rwlock_clockwrlock, 0, 0,
            pthread_rwlock_clockwrlock(&rw, CLOCK_REALTIME,
                                       (ts_real = abs_after(CLOCK_REALTIME, 5000), &ts_real)))
RWLOCK_WAIT(w_rwlock_clockwrlock_timeout, 1, ETIMEDOUT,
            pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC,
                                       (ts_mono = abs_after(CLOCK_MONOTONIC, SHORT_MS / 2),
                                        &ts_mono)))

/* --- condition variables ---------------------------------------------------------------- */

static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;

static void *signal_later(void *arg) {
    (void)arg;
    sleep_ms(HOLD_MS);
    pthread_mutex_lock(&m);
    flag = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
    return NULL;
}

/* Waits for `flag`, set and signalled by a helper after HOLD_MS, with `call` (which may
 * return early: spurious wake-ups are allowed); expects 0. */
#define COND_WAIT(name, call)                                                                  \
    NOINL void name(void) {                                                                    \
        uint64_t w = 0, one;                                                                   \
        int rc = 0;                                                                            \
        flag = 0;                                                                              \
        pthread_mutex_lock(&m);                                                                \
        helper(signal_later);                                                                  \
        while (!flag && rc == 0) {                                                             \
            rc = TIMED(one, call);                                                             \
            w += one;                                                                          \
        }                                                                                      \
        pthread_mutex_unlock(&m);                                                              \
        reap();                                                                                \
        note(#name, rc == 0 && flag, w, "rc=%s flag=%d", ename(rc), flag);                     \
    }

COND_WAIT(w_cond_wait, pthread_cond_wait(&cv, &m))
COND_WAIT(w_cond_timedwait,
          pthread_cond_timedwait(&cv, &m, (ts_real = abs_after(CLOCK_REALTIME, 5000), &ts_real)))
COND_WAIT(w_cond_clockwait,
          pthread_cond_clockwait(&cv, &m, CLOCK_MONOTONIC,
                                 (ts_mono = abs_after(CLOCK_MONOTONIC, 5000), &ts_mono)))

/* Nobody signals: times out, and owns the mutex again. */
NOINL void w_cond_clockwait_timeout(void) {
    uint64_t w;
    pthread_mutex_lock(&m);
    ts_mono = abs_after(CLOCK_MONOTONIC, SHORT_MS);
    int rc = TIMED(w, pthread_cond_clockwait(&cv, &m, CLOCK_MONOTONIC, &ts_mono));
    int owned = pthread_mutex_trylock(&m) == EBUSY;
    pthread_mutex_unlock(&m);
    note("w_cond_clockwait_timeout", rc == ETIMEDOUT && owned, w, "rc=%s owned=%d", ename(rc),
         owned);
}

/* --- semaphores ------------------------------------------------------------------------- */

static sem_t sem;

static void *post_later(void *arg) {
    (void)arg;
    sleep_ms(HOLD_MS);
    sem_post(&sem);
    return NULL;
}

/* Waits for a post a helper makes after HOLD_MS with `call`; expects 0. */
#define SEM_WAIT(name, call)                                                                   \
    NOINL void name(void) {                                                                    \
        uint64_t w;                                                                            \
        helper(post_later);                                                                    \
        errno = 0;                                                                             \
        int rc = TIMED(w, call);                                                               \
        int e = rc ? errno : 0;                                                                \
        reap();                                                                                \
        note(#name, rc == 0, w, "rc=%d errno=%s", rc, ename(e));                               \
    }

SEM_WAIT(w_sem_wait, sem_wait(&sem))
SEM_WAIT(w_sem_timedwait,
         sem_timedwait(&sem, (ts_real = abs_after(CLOCK_REALTIME, 5000), &ts_real)))
SEM_WAIT(w_sem_clockwait,
         sem_clockwait(&sem, CLOCK_MONOTONIC, (ts_mono = abs_after(CLOCK_MONOTONIC, 5000), &ts_mono)))

NOINL void w_sem_clockwait_timeout(void) {
    uint64_t w;
    ts_real = abs_after(CLOCK_REALTIME, SHORT_MS);
    int rc = TIMED(w, sem_clockwait(&sem, CLOCK_REALTIME, &ts_real));
    int e = rc ? errno : 0;
    note("w_sem_clockwait_timeout", rc == -1 && e == ETIMEDOUT, w, "rc=%d errno=%s", rc,
         ename(e));
}

/* --- barrier, joins, spin lock, futex --------------------------------------------------- */

static pthread_barrier_t bar;
static int helper_barrier_rc;

static void *barrier_later(void *arg) {
    (void)arg;
    sleep_ms(HOLD_MS);
    helper_barrier_rc = pthread_barrier_wait(&bar);
    return NULL;
}

NOINL void w_barrier_wait(void) {
    uint64_t w;
    helper(barrier_later);
    int rc = TIMED(w, pthread_barrier_wait(&bar));
    reap();
    int serial = (rc == PTHREAD_BARRIER_SERIAL_THREAD) + (helper_barrier_rc == PTHREAD_BARRIER_SERIAL_THREAD);
    int valid = (rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD) &&
                (helper_barrier_rc == 0 || helper_barrier_rc == PTHREAD_BARRIER_SERIAL_THREAD);
    note("w_barrier_wait", valid && serial == 1, w, "serial threads=%d", serial);
}

static void *exit_later(void *arg) {
    (void)arg;
    sleep_ms(HOLD_MS);
    pthread_exit((void *)42);
}

/* Joins a helper that ends after HOLD_MS with `call`; expects 0 and its value. */
#define JOIN_WAIT(name, call)                                                                  \
    NOINL void name(void) {                                                                    \
        uint64_t w;                                                                            \
        void *ret = NULL;                                                                      \
        helper(exit_later);                                                                    \
        int rc = TIMED(w, call);                                                               \
        note(#name, rc == 0 && ret == (void *)42, w, "rc=%s value=%ld", ename(rc), (long)ret);  \
    }

JOIN_WAIT(w_join, pthread_join(helper_thread, &ret))
JOIN_WAIT(w_timedjoin, pthread_timedjoin_np(helper_thread, &ret,
                                            (ts_real = abs_after(CLOCK_REALTIME, 5000), &ts_real)))
JOIN_WAIT(w_clockjoin,
          pthread_clockjoin_np(helper_thread, &ret, CLOCK_MONOTONIC,
                               (ts_mono = abs_after(CLOCK_MONOTONIC, 5000), &ts_mono)))

/* The helper outlives the timeout: ETIMEDOUT, then EBUSY from tryjoin (glibc's, not
 * interposed), and reap() joins it. */
NOINL void w_clockjoin_timeout(void) {
    uint64_t w;
    void *ret = NULL;
    helper(exit_later);
    ts_mono = abs_after(CLOCK_MONOTONIC, SHORT_MS / 2);
    int rc = TIMED(w, pthread_clockjoin_np(helper_thread, &ret, CLOCK_MONOTONIC, &ts_mono));
    int busy = pthread_tryjoin_np(helper_thread, &ret);
    reap();
    note("w_clockjoin_timeout", rc == ETIMEDOUT && busy == EBUSY, w, "rc=%s tryjoin=%s",
         ename(rc), ename(busy));
}

NOINL void w_timedjoin_timeout(void) {
    uint64_t w;
    void *ret = NULL;
    helper(exit_later);
    ts_real = abs_after(CLOCK_REALTIME, SHORT_MS / 2);
    int rc = TIMED(w, pthread_timedjoin_np(helper_thread, &ret, &ts_real));
    reap();
    note("w_timedjoin_timeout", rc == ETIMEDOUT && helper_result == (void *)42, w, "rc=%s",
         ename(rc));
}

static pthread_spinlock_t spin;

static void *hold_spin(void *arg) {
    (void)arg;
    pthread_spin_lock(&spin);
    helper_ready();
    sleep_ms(SPIN_MS);
    pthread_spin_unlock(&spin);
    return NULL;
}

NOINL void w_spin_lock(void) {
    uint64_t w;
    helper(hold_spin);
    await_helper();
    int rc = TIMED(w, pthread_spin_lock(&spin));
    int busy = pthread_spin_trylock(&spin);
    pthread_spin_unlock(&spin);
    reap();
    note("w_spin_lock", rc == 0 && busy == EBUSY, w, "rc=%s trylock=%s", ename(rc), ename(busy));
}

static uint32_t fword;

static void *wake_later(void *arg) {
    (void)arg;
    sleep_ms(HOLD_MS);
    __atomic_store_n(&fword, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &fword, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    return NULL;
}

/* FUTEX_WAIT through syscall() until the helper's wake: 0, or EAGAIN if the word changed
 * before the wait began; never EINTR. */
NOINL void w_futex_wait(void) {
    uint64_t w = 0, one;
    int bad = 0;
    fword = 0;
    helper(wake_later);
    while (__atomic_load_n(&fword, __ATOMIC_SEQ_CST) == 0) {
        long rc = TIMED(one, syscall(SYS_futex, &fword, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0));
        w += one;
        if (rc != 0 && errno != EAGAIN)
            bad = errno;
        if (bad)
            break;
    }
    reap();
    note("w_futex_wait", !bad, w, "errno=%s", ename(bad));
}

/* --- sleeps and descriptor waits: no idleness, no EINTR --------------------------------- */

static int empty_pipe[2];

NOINL void w_nanosleep(void) {
    uint64_t w;
    struct timespec ts = {0, SHORT_MS * 1000000L}, rem = {7, 7};
    int rc = TIMED(w, nanosleep(&ts, &rem));
    note("w_nanosleep", rc == 0, w, "rc=%d", rc);
}

NOINL void w_clock_nanosleep(void) {
    uint64_t w;
    struct timespec until = abs_after(CLOCK_MONOTONIC, SHORT_MS);
    int rc = TIMED(w, clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL));
    note("w_clock_nanosleep", rc == 0, w, "rc=%s", ename(rc));
}

NOINL void w_usleep(void) {
    uint64_t w;
    int rc = TIMED(w, usleep(SHORT_MS * 1000));
    note("w_usleep", rc == 0, w, "rc=%d", rc);
}

NOINL void w_sleep(void) {
    uint64_t w;
    unsigned left = TIMED(w, sleep(1));
    note("w_sleep", left == 0, w, "left=%u", left);
}

NOINL void w_poll(void) {
    uint64_t w;
    struct pollfd p = {empty_pipe[0], POLLIN, 0};
    int rc = TIMED(w, poll(&p, 1, SHORT_MS));
    note("w_poll", rc == 0 && p.revents == 0, w, "rc=%d revents=%d", rc, p.revents);
}

NOINL void w_ppoll(void) {
    uint64_t w;
    struct pollfd p = {empty_pipe[0], POLLIN, 0};
    struct timespec ts = {0, SHORT_MS * 1000000L};
    sigset_t mask;
    sigemptyset(&mask);
    int rc = TIMED(w, ppoll(&p, 1, &ts, &mask));
    note("w_ppoll", rc == 0 && p.revents == 0, w, "rc=%d revents=%d", rc, p.revents);
}

NOINL void w_select(void) {
    uint64_t w;
    fd_set r;
    FD_ZERO(&r);
    FD_SET(empty_pipe[0], &r);
    struct timeval tv = {0, SHORT_MS * 1000};
    int rc = TIMED(w, select(empty_pipe[0] + 1, &r, NULL, NULL, &tv));
    int still = FD_ISSET(empty_pipe[0], &r);
    note("w_select", rc == 0 && !still && tv.tv_sec == 0 && tv.tv_usec == 0, w,
         "rc=%d set=%d left=%ld.%06ld", rc, still, (long)tv.tv_sec, (long)tv.tv_usec);
}

NOINL void w_pselect(void) {
    uint64_t w;
    fd_set r;
    FD_ZERO(&r);
    FD_SET(empty_pipe[0], &r);
    struct timespec ts = {0, SHORT_MS * 1000000L};
    sigset_t mask;
    sigemptyset(&mask);
    int rc = TIMED(w, pselect(empty_pipe[0] + 1, &r, NULL, NULL, &ts, &mask));
    int still = FD_ISSET(empty_pipe[0], &r);
    note("w_pselect", rc == 0 && !still, w, "rc=%d set=%d", rc, still);
}

static int epfd = -1;

NOINL void w_epoll_wait(void) {
    uint64_t w;
    struct epoll_event ev[2];
    int rc = TIMED(w, epoll_wait(epfd, ev, 2, SHORT_MS));
    note("w_epoll_wait", rc == 0, w, "rc=%d", rc);
}

NOINL void w_epoll_pwait(void) {
    uint64_t w;
    struct epoll_event ev[2];
    sigset_t mask;
    sigemptyset(&mask);
    int rc = TIMED(w, epoll_pwait(epfd, ev, 2, SHORT_MS, &mask));
    note("w_epoll_pwait", rc == 0, w, "rc=%d", rc);
}

NOINL void w_epoll_pwait2(void) {
    uint64_t w;
    struct epoll_event ev[2];
    struct timespec ts = {0, SHORT_MS * 1000000L};
    sigset_t mask;
    sigemptyset(&mask);
    int rc = TIMED(w, epoll_pwait2(epfd, ev, 2, &ts, &mask));
    note("w_epoll_pwait2", rc == 0, w, "rc=%d", rc);
}

/* --- signal waits: the program's own signals ------------------------------------------- */

static volatile sig_atomic_t usr1_count, pause_done;

static void on_usr1(int sig) {
    (void)sig;
    usr1_count++;
}

/* Sends SIGUSR1 to the main thread every HOLD_MS until it says pause() returned (one may
 * arrive before pause() is called). */
static void *usr1_until_done(void *arg) {
    (void)arg;
    for (;;) {
        sleep_ms(HOLD_MS);
        if (pause_done)
            return NULL;
        pthread_kill(main_thread, SIGUSR1);
    }
}

NOINL void w_pause(void) {
    uint64_t w;
    pause_done = 0;
    helper(usr1_until_done);
    int rc = TIMED(w, pause());
    int e = errno;
    pause_done = 1;
    reap();
    note("w_pause", rc == -1 && e == EINTR && usr1_count > 0, w, "rc=%d errno=%s", rc, ename(e));
}

static void *usr1_later(void *arg) {
    (void)arg;
    sleep_ms(HOLD_MS);
    pthread_kill(main_thread, SIGUSR1);
    return NULL;
}

/* SIGUSR1 is blocked; sigsuspend unblocks it until the helper's arrives: -1, EINTR (the
 * program's own signal), handler run, mask restored. */
NOINL void w_sigsuspend(void) {
    uint64_t w;
    sigset_t block, old, during, after;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);
    during = old;
    sigdelset(&during, SIGUSR1);
    sig_atomic_t before = usr1_count;
    helper(usr1_later);
    int rc = TIMED(w, sigsuspend(&during));
    int e = errno;
    sigprocmask(SIG_SETMASK, NULL, &after);
    int restored = sigismember(&after, SIGUSR1) == 1;
    sigprocmask(SIG_SETMASK, &old, NULL);
    reap();
    note("w_sigsuspend", rc == -1 && e == EINTR && usr1_count == before + 1 && restored, w,
         "rc=%d errno=%s handled=%d restored=%d", rc, ename(e), (int)(usr1_count - before),
         restored);
}

static void *usr2_later(void *arg) {
    (void)arg;
    sleep_ms(HOLD_MS);
    pthread_kill(main_thread, SIGUSR2);
    return NULL;
}

static sigset_t usr2_set;

NOINL void w_sigtimedwait(void) {
    uint64_t w;
    struct timespec ts = {0, SHORT_MS * 1000000L};
    siginfo_t info;
    int rc = TIMED(w, sigtimedwait(&usr2_set, &info, &ts));
    int e = rc < 0 ? errno : 0;
    note("w_sigtimedwait", rc == -1 && e == EAGAIN, w, "rc=%d errno=%s", rc, ename(e));
}

NOINL void w_sigtimedwait_signalled(void) {
    uint64_t w;
    struct timespec ts = {5, 0};
    siginfo_t info;
    helper(usr2_later);
    int rc = TIMED(w, sigtimedwait(&usr2_set, &info, &ts));
    reap();
    note("w_sigtimedwait_signalled", rc == SIGUSR2 && info.si_signo == SIGUSR2, w,
         "rc=%s si_signo=%s", rc == SIGUSR2 ? "SIGUSR2" : "other",
         info.si_signo == SIGUSR2 ? "SIGUSR2" : "other");
}

NOINL void w_sigwaitinfo(void) {
    uint64_t w;
    siginfo_t info;
    helper(usr2_later);
    int rc = TIMED(w, sigwaitinfo(&usr2_set, &info));
    reap();
    note("w_sigwaitinfo", rc == SIGUSR2 && info.si_signo == SIGUSR2 && info.si_pid == getpid(),
         w, "rc=%s si_pid=%s", rc == SIGUSR2 ? "SIGUSR2" : "other",
         info.si_pid == getpid() ? "self" : "other");
}

NOINL void w_sigwait(void) {
    uint64_t w;
    int sig = 0;
    helper(usr2_later);
    int rc = TIMED(w, sigwait(&usr2_set, &sig));
    reap();
    note("w_sigwait", rc == 0 && sig == SIGUSR2, w, "rc=%s sig=%s", ename(rc),
         sig == SIGUSR2 ? "SIGUSR2" : "other");
}

/* --- calls that do not wait ------------------------------------------------------------- */

static char self_path[PATH_MAX], self_dir[PATH_MAX], self_name[NAME_MAX + 1];

/* Every exec variant on a file that does not exist: -1, ENOENT, and the program (and its
 * profiling) carries on. */
NOINL void failing_execs(void) {
    char *argv[] = {"nothing", NULL};
    char **envp = environ; /* one that would profile the image, had it started */
    const char *missing = "/nonexistent/interposers-missing";
    int rcs[8], errs[8], n = 0;
#define TRY(call)                                                                              \
    do {                                                                                       \
        errno = 0;                                                                             \
        rcs[n] = (call);                                                                       \
        errs[n++] = errno;                                                                     \
    } while (0)
    TRY(execl(missing, "nothing", (char *)NULL));
    TRY(execlp("interposers-missing-file", "nothing", (char *)NULL));
    TRY(execle(missing, "nothing", (char *)NULL, envp));
    TRY(execv(missing, argv));
    TRY(execvp("interposers-missing-file", argv));
    TRY(execvpe("interposers-missing-file", argv, envp));
    TRY(execve(missing, argv, envp));
    TRY(fexecve(-1, argv, envp));
#undef TRY
    static const char *names[] = {"execl", "execlp", "execle", "execv",
                                  "execvp", "execvpe", "execve", "fexecve"};
    for (int i = 0; i < n; i++) {
        int want = i == 7 ? EINVAL : ENOENT; /* glibc: EINVAL for fd < 0 */
        char name[32];
        snprintf(name, sizeof name, "failing %s", names[i]);
        note(name, rcs[i] == -1 && errs[i] == want, 0, "rc=%d errno=%s", rcs[i], ename(errs[i]));
    }
}

NOINL void descriptor_calls(void) {
    int p[2];
    if (pipe(p) != 0)
        abort();
    int target = 200;
    int rc = dup3(p[0], target, O_CLOEXEC);
    int cloexec = (fcntl(target, F_GETFD) & FD_CLOEXEC) != 0;
    note("dup3", rc == target && cloexec, 0, "rc=%s cloexec=%d", rc == target ? "target" : "other",
         cloexec);
    errno = 0;
    rc = dup3(target, target, 0);
    note("dup3 same", rc == -1 && errno == EINVAL, 0, "rc=%d errno=%s", rc, ename(errno));
    errno = 0;
    rc = dup3(p[0], target, 12345678);
    note("dup3 bad flags", rc == -1 && errno == EINVAL, 0, "rc=%d errno=%s", rc, ename(errno));
    rc = dup2(p[1], target + 1);
    note("dup2", rc == target + 1, 0, "rc=%s", rc == target + 1 ? "target" : "other");
    errno = 0;
    int c1 = close(target), c2 = close(target);
    int e2 = errno;
    note("close", c1 == 0 && c2 == -1 && e2 == EBADF, 0, "rc=%d,%d errno=%s", c1, c2, ename(e2));
    rc = close_range(target + 1, target + 1, 0);
    note("close_range", rc == 0 && fcntl(target + 1, F_GETFD) == -1, 0, "rc=%d", rc);
    closefrom(target + 100); /* nothing open up there; returns nothing */
    close(p[0]);
    close(p[1]);
}

static void on_term(int sig) { (void)sig; }

NOINL void signal_calls(void) {
    struct sigaction sa = {0}, old = {0};
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    int rc = sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGHUP, NULL, &old);
    note("sigaction", rc == 0 && old.sa_handler == on_term, 0, "rc=%d", rc);
    void (*prev)(int) = signal(SIGHUP, SIG_DFL);
    void (*now)(int) = signal(SIGHUP, SIG_DFL);
    note("signal", prev == on_term && now == SIG_DFL, 0, "previous=%s",
         prev == on_term ? "on_term" : "other");
    sigset_t set, back;
    sigemptyset(&set);
    sigaddset(&set, SIGWINCH);
    rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_sigmask(SIG_SETMASK, NULL, &back);
    int blocked = sigismember(&back, SIGWINCH);
    rc |= sigprocmask(SIG_UNBLOCK, &set, NULL);
    sigprocmask(SIG_SETMASK, NULL, &back);
    note("signal masks", rc == 0 && blocked == 1 && sigismember(&back, SIGWINCH) == 0, 0,
         "rc=%d blocked=%d", rc, blocked);
    errno = 0;
    rc = sigaction(SIGKILL, &sa, NULL);
    note("sigaction SIGKILL", rc == -1 && errno == EINVAL, 0, "rc=%d errno=%s", rc, ename(errno));
}

NOINL void lock_calls(void) {
    pthread_mutex_t mx;
    pthread_rwlock_t rl;
    pthread_cond_t c;
    pthread_spinlock_t s;
    pthread_barrier_t b;
    sem_t sm;
    int rc = pthread_mutex_init(&mx, NULL) | pthread_rwlock_init(&rl, NULL) |
             pthread_cond_init(&c, NULL) | pthread_spin_init(&s, 0) |
             pthread_barrier_init(&b, NULL, 1) | sem_init(&sm, 0, 0);
    int busy = 0;
    pthread_mutex_lock(&mx);
    busy += pthread_mutex_trylock(&mx) == EBUSY;
    struct timespec bad = {0, 2000000000L}; /* tv_nsec out of range */
    int einval = pthread_mutex_clocklock(&mx, CLOCK_PROCESS_CPUTIME_ID, &bad) == EINVAL;
    pthread_mutex_unlock(&mx);
    pthread_rwlock_wrlock(&rl);
    busy += pthread_rwlock_tryrdlock(&rl) == EBUSY;
    busy += pthread_rwlock_trywrlock(&rl) == EBUSY;
    einval += pthread_rwlock_clockrdlock(&rl, CLOCK_PROCESS_CPUTIME_ID, &bad) == EINVAL;
    pthread_rwlock_unlock(&rl);
    pthread_spin_lock(&s);
    busy += pthread_spin_trylock(&s) == EBUSY;
    pthread_spin_unlock(&s);
    pthread_cond_signal(&c);
    pthread_cond_broadcast(&c);
    int serial = pthread_barrier_wait(&b) == PTHREAD_BARRIER_SERIAL_THREAD;
    sem_post(&sm);
    int value = -1;
    sem_getvalue(&sm, &value);
    int took = sem_wait(&sm) == 0;
    rc |= pthread_mutex_destroy(&mx) | pthread_rwlock_destroy(&rl) | pthread_cond_destroy(&c) |
          pthread_spin_destroy(&s) | pthread_barrier_destroy(&b) | sem_destroy(&sm);
    note("locks without waiting", rc == 0 && busy == 4 && einval == 2 && serial && value == 1 && took,
         0, "rc=%d busy=%d einval=%d serial=%d value=%d", rc, busy, einval, serial, value);
}

/* dlopen and dlclose (the runtime reads the modules again at each): a library's function
 * is called; a missing library is NULL with a message. */
NOINL void dl_calls(void) {
    void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    double (*cosine)(double) = libm ? (double (*)(double))dlsym(libm, "cos") : NULL;
    int called = cosine && cosine(0.0) == 1.0;
    int closed = libm && dlclose(libm) == 0;
    void *missing = dlopen("/nonexistent/libinterposers.so", RTLD_NOW);
    int message = dlerror() != NULL;
    note("dlopen", called && closed && !missing && message, 0, "called=%d closed=%d missing=%s",
         called, closed, missing ? "opened" : "NULL");
}

static int waits(void) {
    main_thread = pthread_self();
    if (pipe(ready_pipe) != 0 || pipe(empty_pipe) != 0)
        return 1;
    epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = empty_pipe[0]};
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, empty_pipe[0], &ev) != 0)
        return 1;
    sem_init(&sem, 0, 0);
    pthread_barrier_init(&bar, NULL, 2);
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigemptyset(&usr2_set);
    sigaddset(&usr2_set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2_set, NULL); /* before any helper: they inherit it */

    w_mutex_lock();
    w_mutex_timedlock();
    w_mutex_clocklock();
    w_mutex_clocklock_timeout();
    w_rwlock_rdlock();
    w_rwlock_wrlock();
    w_rwlock_timedrdlock();
    w_rwlock_timedwrlock();
    w_rwlock_clockrdlock();
    w_rwlock_clockwrlock();
    w_rwlock_clockwrlock_timeout();
    w_cond_wait();
    w_cond_timedwait();
    w_cond_clockwait();
    w_cond_clockwait_timeout();
    w_sem_wait();
    w_sem_timedwait();
    w_sem_clockwait();
    w_sem_clockwait_timeout();
    w_barrier_wait();
    w_join();
    w_timedjoin();
    w_clockjoin();
    w_clockjoin_timeout();
    w_timedjoin_timeout();
    w_spin_lock();
    w_futex_wait();

    w_nanosleep();
    w_clock_nanosleep();
    w_usleep();
    w_sleep();
    w_poll();
    w_ppoll();
    w_select();
    w_pselect();
    w_epoll_wait();
    w_epoll_pwait();
    w_epoll_pwait2();
    w_pause();
    w_sigsuspend();
    w_sigtimedwait();
    w_sigtimedwait_signalled();
    w_sigwaitinfo();
    w_sigwait();

    failing_execs();
    descriptor_calls();
    signal_calls();
    lock_calls();
    dl_calls();
    printf("%s\n", truth_line);
    return failures ? 1 : 0;
}

/* --- exec ------------------------------------------------------------------------------- */

static double cpu_seconds = 0.3;

NOINL void image_work(double secs, uint64_t *took) {
    uint64_t start = cpu_ns(), until = start + (uint64_t)(secs * 1e9);
    volatile unsigned long x = 1;
    while (cpu_ns() < until)
        for (long i = 0; i < 20000; i++)
            x = x * 2862933555777941757UL + (unsigned long)i;
    *took = cpu_ns() - start;
}

static const char *variants[] = {"execl",   "execlp",      "execle",       "execv",
                                 "execvp",  "execvpe",     "execve",       "fexecve",
                                 "posix_spawn", "posix_spawnp", "execve_bare"};
#define NVARIANTS (int)(sizeof variants / sizeof variants[0])

/* The caller's environment and INTERPOSERS_VARIANT=variant, for the variants given one. */
static char **env_with(const char *variant) {
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 2, sizeof *envp);
    static char var[64];
    snprintf(var, sizeof var, "INTERPOSERS_VARIANT=%s", variant);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "INTERPOSERS_VARIANT=", 20) != 0)
            envp[j++] = environ[i];
    envp[j++] = var;
    envp[j] = NULL;
    return envp;
}

/* In a forked child: becomes "image VARIANT SECS" by `variant`; returns only on failure. */
static void exec_by(const char *variant, char *secs) {
    char *argv[] = {"interposers-image", "image", (char *)variant, secs, "two words", "", NULL};
    char **envp = env_with(variant);
    if (strcmp(variant, "execle") && strcmp(variant, "execvpe") && strncmp(variant, "execve", 6) &&
        strcmp(variant, "fexecve"))
        setenv("INTERPOSERS_VARIANT", variant, 1); /* these pass the caller's environment */
    if (!strcmp(variant, "execl"))
        execl(self_path, argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], (char *)NULL);
    else if (!strcmp(variant, "execlp"))
        execlp(self_name, argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], (char *)NULL);
    else if (!strcmp(variant, "execle"))
        execle(self_path, argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], (char *)NULL, envp);
    else if (!strcmp(variant, "execv"))
        execv(self_path, argv);
    else if (!strcmp(variant, "execvp"))
        execvp(self_name, argv);
    else if (!strcmp(variant, "execvpe"))
        execvpe(self_name, argv, envp);
    else if (!strcmp(variant, "execve"))
        execve(self_path, argv, envp);
    else if (!strcmp(variant, "execve_bare")) {
        /* An environment of the program's own making, without the profiler's variables. */
        char *bare[] = {"INTERPOSERS_VARIANT=execve_bare", "PATH=/usr/bin:/bin", NULL};
        execve(self_path, argv, bare);
    }
    else if (!strcmp(variant, "fexecve")) {
        int fd = open(self_path, O_RDONLY | O_CLOEXEC);
        fexecve(fd, argv, envp);
    }
    fprintf(stderr, "interposers: %s: %s\n", variant, strerror(errno));
}

static int exec_all(void) {
    char secs[32];
    snprintf(secs, sizeof secs, "%g", cpu_seconds);
    /* The p variants find the program by its name in PATH. */
    const char *path = getenv("PATH");
    char newpath[PATH_MAX + 4096];
    snprintf(newpath, sizeof newpath, "%s:%s", self_dir, path ? path : "/usr/bin:/bin");
    setenv("PATH", newpath, 1);
    for (int i = 0; i < NVARIANTS; i++) {
        const char *v = variants[i];
        fflush(stdout);
        pid_t pid;
        if (!strncmp(v, "posix_spawn", 11)) {
            char *argv[] = {"interposers-image", "image", (char *)v, secs, "two words", "", NULL};
            char **envp = env_with(v);
            int rc = strcmp(v, "posix_spawn") == 0
                         ? posix_spawn(&pid, self_path, NULL, NULL, argv, envp)
                         : posix_spawnp(&pid, self_name, NULL, NULL, argv, envp);
            if (rc != 0) {
                fprintf(stderr, "interposers: %s: %s\n", v, strerror(rc));
                return 1;
            }
        } else {
            pid = fork();
            if (pid < 0) {
                perror("fork");
                return 1;
            }
            if (pid == 0) {
                exec_by(v, secs);
                _exit(127);
            }
        }
        int status;
        if (waitpid(pid, &status, 0) != pid) {
            perror("waitpid");
            return 1;
        }
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        printf("exec %s: status=%d\n", v, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        printf("truth pid_%s=%d\n", v, (int)pid);
        fflush(stdout);
        if (!ok)
            failures++;
    }
    return failures ? 1 : 0;
}

/* The image an exec variant started: argv[2] is the variant. */
static int image(int argc, char **argv) {
    const char *v = argv[2];
    int argv_ok = argc == 6 && !strcmp(argv[0], "interposers-image") &&
                  !strcmp(argv[4], "two words") && !strcmp(argv[5], "");
    const char *env = getenv("INTERPOSERS_VARIANT");
    int env_ok = env && !strcmp(env, v) && getenv("PATH") != NULL;
    printf("image %s: argv %s env %s\n", v, argv_ok ? "ok" : "FAIL", env_ok ? "ok" : "FAIL");
    uint64_t took;
    image_work(atof(argv[3]), &took);
    printf("truth image_%s_ns=%llu proc_%s_ns=%llu\n", v, (unsigned long long)took, v,
           (unsigned long long)clock_ns(CLOCK_PROCESS_CPUTIME_ID));
    fflush(stdout);
    int code = argv_ok && env_ok ? 0 : 1;
    /* Each way a process ends: the runtime must write the image's part whole. */
    if (!strcmp(v, "execl") || !strcmp(v, "execvp") || !strcmp(v, "fexecve"))
        _exit(code);
    if (!strcmp(v, "execlp") || !strcmp(v, "execve"))
        _Exit(code);
    return code;
}

int main(int argc, char **argv) {
    if (readlink("/proc/self/exe", self_path, sizeof self_path - 1) < 0) {
        perror("readlink");
        return 1;
    }
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", self_path);
    snprintf(self_dir, sizeof self_dir, "%s", dirname(copy));
    snprintf(copy, sizeof copy, "%s", self_path);
    snprintf(self_name, sizeof self_name, "%s", basename(copy));
    if (argc >= 2 && !strcmp(argv[1], "waits"))
        return waits();
    if (argc >= 2 && !strcmp(argv[1], "exec")) {
        if (argc > 2)
            cpu_seconds = atof(argv[2]);
        return exec_all();
    }
    if (argc >= 4 && !strcmp(argv[1], "image"))
        return image(argc, argv);
    fprintf(stderr, "usage: interposers waits | exec [CPU_SECONDS] | image VARIANT SECS ...\n");
    return 2;
}
