/* forkexec: CPU work and waiting across fork() and execv(), each phase in a distinct function
 * that measures itself.
 *
 * usage: forkexec [CPU_SECONDS_PER_PHASE=0.4]
 *
 *   parent_work      (original image, before fork)
 *   child_work       (forked child), then child_wait: pthread_mutex_lock of a mutex a
 *                    thread of the child holds for WAIT_MS, then exit(0)
 *   after_exec_work  (the same pid as the parent, after execv of itself with --after-exec),
 *                    then after_exec_wait: pthread_join of a thread that ends after WAIT_MS
 *
 * Each *_work function spins for CPU_SECONDS of its thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) and each *_wait measures its wait with CLOCK_MONOTONIC around
 * the call. stdout:
 *   "truth parent_work_ns=N"                          (the original image)
 *   "truth child_work_ns=N child_wait_ns=N child_proc_ns=N"   (the child, before exit)
 *   "truth parent_pid=P child_pid=C"                  (the original image, after the child)
 *   "truth after_exec_work_ns=N after_exec_wait_ns=N after_exec_proc_ns=N" and
 *   "forkexec: after exec pid=P"                      (the image after exec)
 * *_proc_ns is the process's CPU time (CLOCK_PROCESS_CPUTIME_ID) at the end: the child's
 * starts at its fork; the exec'd image's runs on from the original image's.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 150

static unsigned long long clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static unsigned long long thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static double seconds = 0.4;

/* Spins for `seconds` of the thread's CPU time; returns the CPU time it took. */
#define SPIN_BODY(mult)                                                                        \
    do {                                                                                       \
        unsigned long long start = thread_cpu_ns();                                            \
        unsigned long long until = start + (unsigned long long)(seconds * 1e9);                \
        volatile unsigned long x = 1;                                                          \
        while (thread_cpu_ns() < until)                                                        \
            for (long i = 0; i < 100000; i++)                                                  \
                x = x * (mult) + (unsigned long)i;                                             \
        return thread_cpu_ns() - start;                                                        \
    } while (0)

__attribute__((noinline, noclone)) unsigned long long parent_work(void) { SPIN_BODY(3UL); }
__attribute__((noinline, noclone)) unsigned long long child_work(void) { SPIN_BODY(5UL); }
__attribute__((noinline, noclone)) unsigned long long after_exec_work(void) { SPIN_BODY(7UL); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int held[2];

static void *hold(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    char c = 1;
    if (write(held[1], &c, 1) != 1)
        abort();
    sleep_ms(WAIT_MS);
    pthread_mutex_unlock(&m);
    return NULL;
}

/* Waits for `m`, held by another thread of the child for WAIT_MS. */
__attribute__((noinline, noclone)) unsigned long long child_wait(void)
{
    pthread_t t;
    char c;
    if (pipe(held) != 0 || pthread_create(&t, NULL, hold, NULL) != 0)
        abort();
    while (read(held[0], &c, 1) != 1) {
    }
    unsigned long long t0 = clock_ns(CLOCK_MONOTONIC);
    pthread_mutex_lock(&m);
    unsigned long long waited = clock_ns(CLOCK_MONOTONIC) - t0;
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    return waited;
}

static void *end_later(void *arg)
{
    (void)arg;
    sleep_ms(WAIT_MS);
    return NULL;
}

/* Joins a thread that ends after WAIT_MS. */
__attribute__((noinline, noclone)) unsigned long long after_exec_wait(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, end_later, NULL) != 0)
        abort();
    unsigned long long t0 = clock_ns(CLOCK_MONOTONIC);
    pthread_join(t, NULL);
    return clock_ns(CLOCK_MONOTONIC) - t0;
}

int main(int argc, char **argv)
{
    int after_exec = argc > 1 && strcmp(argv[1], "--after-exec") == 0;
    int arg = after_exec ? 2 : 1;
    if (argc > arg)
        seconds = atof(argv[arg]);
    if (after_exec) {
        unsigned long long work = after_exec_work();
        unsigned long long wait = after_exec_wait();
        printf("truth after_exec_work_ns=%llu after_exec_wait_ns=%llu after_exec_proc_ns=%llu\n",
               work, wait, clock_ns(CLOCK_PROCESS_CPUTIME_ID));
        printf("forkexec: after exec pid=%d\n", (int)getpid());
        return 0;
    }

    printf("truth parent_work_ns=%llu\n", parent_work());
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        unsigned long long work = child_work();
        unsigned long long wait = child_wait();
        printf("truth child_work_ns=%llu child_wait_ns=%llu child_proc_ns=%llu\n", work, wait,
               clock_ns(CLOCK_PROCESS_CPUTIME_ID));
        fflush(stdout);
        exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "forkexec: child failed\n");
        return 1;
    }
    printf("truth parent_pid=%d child_pid=%d\n", (int)getpid(), (int)child);
    fflush(stdout);

    char secs[32];
    snprintf(secs, sizeof secs, "%g", seconds);
    char *args[] = {argv[0], "--after-exec", secs, NULL};
    execv("/proc/self/exe", args);
    perror("execv");
    return 1;
}
