/* dying: computes in functions that measure their own CPU time, then ends the way it is told.
 *
 * usage: dying MODE [CPU_SECONDS=1.5]
 *   abort        first_work, then abort() (SIGABRT)
 *   _exit        first_work, then _exit(7) (no atexit handlers, no stdio flush)
 *   sigterm      first_work, then kill(getpid(), SIGTERM) with its default action
 *   thread-exit  two threads compute in runner_work for as long as they live; a third
 *                computes in first_work and then calls exit(5) from that thread while they
 *                run (the main thread waits in pthread_join); an atexit handler prints
 *                "dying: atexit ran"
 *   two-phase    first_work, then second_work, then exit(0): for the tests that signal
 *                `blameprof run` while the program is in second_work
 *
 * stdout: "truth first_work_ns=N first_work_last_second_ns=L" when first_work is done
 * (flushed at once), L being the CPU time first_work used in its last second of wall-clock
 * time (what the runtime may not have written yet when the process dies: it writes a
 * thread's samples once they are a second old; on a loaded machine a second holds less CPU
 * time); thread-exit adds runner_work_ns=M (the runners' CPU time until just before exit);
 * two-phase then prints "truth second_work_ns=N" and "dying: done".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static unsigned long long thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

/* The CPU time the calling thread's last spin used in its last LAST_WINDOW_NS of wall-clock
 * time (all of it for a shorter spin), from checkpoints (wall, CPU) taken at least
 * CHECKPOINT_NS apart: the newest at least a window before the end, so never less than the
 * truth, and at most a checkpoint's CPU time more. */
#define LAST_WINDOW_NS 1000000000ULL
#define CHECKPOINT_NS 10000000ULL
#define CHECKPOINTS 256 /* 2.56 s of wall-clock time at least: more than the window */
static __thread unsigned long long spin_last_second_ns;

struct checkpoints {
    unsigned long long wall[CHECKPOINTS], cpu[CHECKPOINTS];
    unsigned n;
};

static void checkpoint(struct checkpoints *c, unsigned long long cpu) {
    unsigned long long wall = clock_ns(CLOCK_MONOTONIC);
    if (c->n == 0 || wall - c->wall[(c->n - 1) % CHECKPOINTS] >= CHECKPOINT_NS) {
        c->wall[c->n % CHECKPOINTS] = wall;
        c->cpu[c->n % CHECKPOINTS] = cpu;
        c->n++;
    }
}

static unsigned long long cpu_in_last_window(const struct checkpoints *c, unsigned long long start,
                                             unsigned long long end_cpu) {
    unsigned long long end_wall = clock_ns(CLOCK_MONOTONIC);
    unsigned oldest = c->n > CHECKPOINTS ? c->n - CHECKPOINTS : 0;
    for (unsigned k = c->n; k-- > oldest;)
        if (c->wall[k % CHECKPOINTS] + LAST_WINDOW_NS <= end_wall)
            return end_cpu - c->cpu[k % CHECKPOINTS];
    return end_cpu - start;
}

/* Spins for `secs` of the calling thread's CPU time (forever if secs < 0); returns the CPU
 * time it took, and leaves in spin_last_second_ns the part of it in its last second. */
#define SPIN_FN(name, mult)                                                                    \
    __attribute__((noinline, noclone)) unsigned long long name(double secs) {                  \
        static __thread struct checkpoints c;                                                  \
        c.n = 0;                                                                               \
        unsigned long long start = thread_cpu_ns(), now;                                       \
        unsigned long long until = secs < 0 ? ~0ULL : start + (unsigned long long)(secs * 1e9); \
        volatile unsigned long x = 1;                                                          \
        while ((now = thread_cpu_ns()) < until) {                                              \
            checkpoint(&c, now);                                                               \
            for (long i = 0; i < 20000; i++)                                                   \
                x = x * (mult) + (unsigned long)i;                                             \
        }                                                                                      \
        unsigned long long end = thread_cpu_ns();                                              \
        spin_last_second_ns = cpu_in_last_window(&c, start, end);                              \
        return end - start;                                                                    \
    }

SPIN_FN(first_work, 3UL)
SPIN_FN(second_work, 5UL)
SPIN_FN(runner_work, 7UL)

static double seconds = 1.5;

static void truth_first(void) {
    unsigned long long ns = first_work(seconds);
    printf("truth first_work_ns=%llu first_work_last_second_ns=%llu\n", ns, spin_last_second_ns);
    fflush(stdout);
}

/* ---- thread-exit ---- */

enum { RUNNERS = 2 };
static pthread_t runners[RUNNERS];

static void *runner(void *unused) {
    (void)unused;
    runner_work(-1);
    return NULL;
}

static void said_at_exit(void) { printf("dying: atexit ran\n"); }

static void *exiter(void *unused) {
    (void)unused;
    unsigned long long mine = first_work(seconds);
    unsigned long long theirs = 0;
    for (int i = 0; i < RUNNERS; i++) {
        clockid_t c;
        if (pthread_getcpuclockid(runners[i], &c) == 0)
            theirs += clock_ns(c);
    }
    printf("truth first_work_ns=%llu runner_work_ns=%llu\n", mine, theirs);
    exit(5);
}

static int thread_exit(void) {
    atexit(said_at_exit);
    for (int i = 0; i < RUNNERS; i++)
        if (pthread_create(&runners[i], NULL, runner, NULL) != 0) {
            fprintf(stderr, "dying: pthread_create failed\n");
            return 1;
        }
    pthread_t t;
    if (pthread_create(&t, NULL, exiter, NULL) != 0) {
        fprintf(stderr, "dying: pthread_create failed\n");
        return 1;
    }
    pthread_join(t, NULL);
    fprintf(stderr, "dying: the exiting thread returned\n");
    return 1;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (argc > 2)
        seconds = atof(argv[2]);
    if (strcmp(mode, "thread-exit") == 0)
        return thread_exit();
    if (strcmp(mode, "abort") && strcmp(mode, "_exit") && strcmp(mode, "sigterm") &&
        strcmp(mode, "two-phase")) {
        fprintf(stderr, "usage: dying abort|_exit|sigterm|thread-exit|two-phase [SECONDS]\n");
        return 2;
    }
    truth_first();
    if (strcmp(mode, "abort") == 0)
        abort();
    if (strcmp(mode, "_exit") == 0) {
        printf("dying: this line is lost in the stdio buffer\n");
        _exit(7);
    }
    if (strcmp(mode, "sigterm") == 0) {
        kill(getpid(), SIGTERM);
        for (;;)
            pause();
    }
    printf("truth second_work_ns=%llu\n", second_work(seconds));
    printf("dying: done\n");
    return 0;
}
