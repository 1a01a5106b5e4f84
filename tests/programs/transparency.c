/* transparency: a program whose observable behaviour must not change under the profiler.
 *
 * usage: transparency STATUS     exit with STATUS (0..255)
 *        transparency signal     kill itself with SIGTERM (a wrapper must exit 128+15)
 *
 * It writes deterministic text to stdout (including a block larger than a pipe buffer) and to
 * stderr, runs its OWN SIGPROF interval timer (ITIMER_PROF) with a counting handler, keeps a
 * sentinel in errno across CPU work, creates threads, and does blocking read(), nanosleep()
 * and usleep() while its own timer is disarmed, so any EINTR seen there was caused by someone
 * else. Nothing printed depends on timing: counts are reported as yes/no.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_long prof_ticks;
static atomic_int unexpected_eintr;
static int pipe_fds[2];

static void on_prof(int sig)
{
    (void)sig;
    int saved = errno;
    atomic_fetch_add(&prof_ticks, 1);
    errno = saved;
}

static unsigned long long thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

/* Deterministic CPU work: returns a checksum depending only on `seed` and `rounds`. */
__attribute__((noinline, noclone)) unsigned long churn(unsigned long seed, long rounds)
{
    volatile unsigned long x = seed;
    for (long i = 0; i < rounds; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

/* Burns about `ms` milliseconds of CPU (without affecting the checksum) and reports whether
 * errno kept the sentinel value the whole time. */
static int burn_keeps_errno(int ms)
{
    int clobbered = 0;
    unsigned long long until = thread_cpu_ns() + (unsigned long long)ms * 1000000ULL;
    errno = 4242;
    while (thread_cpu_ns() < until) {
        errno = 4242;
        churn(1, 20000);
        if (errno != 4242)
            clobbered = 1;
    }
    return !clobbered;
}

static unsigned long results[3];
static int errno_kept[3];

static void *thread_body(void *arg)
{
    long idx = (long)arg;
    results[idx] = churn((unsigned long)idx + 7, 3000000);
    errno_kept[idx] = burn_keeps_errno(100);
    return NULL;
}

static void sleep_ns(long ns)
{
    struct timespec req = {ns / 1000000000L, ns % 1000000000L}, rem;
    while (nanosleep(&req, &rem) != 0) {
        if (errno != EINTR) {
            perror("nanosleep");
            exit(101);
        }
        atomic_fetch_add(&unexpected_eintr, 1);
        req = rem;
    }
}

static void *pipe_writer(void *arg)
{
    (void)arg;
    sleep_ns(150L * 1000000L);
    if (write(pipe_fds[1], "ping\n", 5) != 5)
        exit(102);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: transparency STATUS|signal\n");
        return 2;
    }
    printf("transparency: start\n");
    fflush(stdout);
    fprintf(stderr, "transparency: stderr line 1\n");

    /* Our own SIGPROF timer. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prof;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0) {
        perror("sigaction");
        return 100;
    }
    struct itimerval it = {{0, 2000}, {0, 2000}};
    if (setitimer(ITIMER_PROF, &it, NULL) != 0) {
        perror("setitimer");
        return 100;
    }

    pthread_t th[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, thread_body, (void *)i);
    int main_errno_kept = burn_keeps_errno(300);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);

    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);

    for (int i = 0; i < 3; i++)
        printf("thread %d checksum %lx errno kept: %s\n", i, results[i], errno_kept[i] ? "yes" : "no");
    printf("main errno kept: %s\n", main_errno_kept ? "yes" : "no");
    printf("ticks>0: %s\n", atomic_load(&prof_ticks) > 0 ? "yes" : "no");

    struct sigaction cur;
    sigaction(SIGPROF, NULL, &cur);
    printf("sigprof handler intact: %s\n", cur.sa_handler == on_prof ? "yes" : "no");
    sigset_t blocked;
    pthread_sigmask(SIG_BLOCK, NULL, &blocked);
    int nblocked = 0;
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&blocked, s) == 1)
            nblocked++;
    printf("blocked signals in main: %d\n", nblocked);

    /* Blocking calls; our own timer is off, so EINTR here is unexpected. */
    if (pipe(pipe_fds) != 0)
        return 100;
    pthread_t w;
    pthread_create(&w, NULL, pipe_writer, NULL);
    char buf[16];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) < 0 && errno == EINTR)
        atomic_fetch_add(&unexpected_eintr, 1);
    pthread_join(w, NULL);
    printf("read: %.*s", n > 0 ? (int)n : 0, buf);
    sleep_ns(50L * 1000000L);
    for (int i = 0; i < 5; i++) {
        if (usleep(10000) != 0) {
            if (errno != EINTR)
                return 103;
            atomic_fetch_add(&unexpected_eintr, 1);
        }
        churn(3, 200000);
    }
    printf("unexpected EINTR: %d\n", atomic_load(&unexpected_eintr));

    /* More than a pipe buffer's worth of stdout. */
    for (int i = 0; i < 3000; i++)
        printf("bulk line %04d %s\n", i, "abcdefghijklmnopqrstuvwxyz");
    fprintf(stderr, "transparency: stderr line 2\n");

    if (strcmp(argv[1], "signal") == 0) {
        printf("transparency: raising SIGTERM\n");
        fflush(stdout);
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
        return 104; /* not reached */
    }
    int status = atoi(argv[1]);
    printf("transparency: exit %d\n", status);
    return status;
}
