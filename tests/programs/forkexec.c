/* forkexec: CPU work across fork() and execv(), each phase in a distinct function.
 *
 * usage: forkexec [CPU_SECONDS_PER_PHASE=0.4]
 *
 *   parent_work  (original image, before fork)
 *   child_work   (forked child, then exit(0))
 *   after_exec_work (the same pid after execv of itself with --after-exec)
 *
 * stdout lines: "truth parent_pid=P child_pid=C" (before exec) and "forkexec: after exec
 * pid=P" (after exec).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long long thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static double seconds = 0.4;

#define SPIN_BODY(mult)                                                                        \
    do {                                                                                       \
        unsigned long long until = thread_cpu_ns() + (unsigned long long)(seconds * 1e9);      \
        volatile unsigned long x = 1;                                                          \
        while (thread_cpu_ns() < until)                                                        \
            for (long i = 0; i < 100000; i++)                                                  \
                x = x * (mult) + (unsigned long)i;                                             \
    } while (0)

__attribute__((noinline, noclone)) void parent_work(void) { SPIN_BODY(3UL); }
__attribute__((noinline, noclone)) void child_work(void) { SPIN_BODY(5UL); }
__attribute__((noinline, noclone)) void after_exec_work(void) { SPIN_BODY(7UL); }

int main(int argc, char **argv)
{
    int after_exec = argc > 1 && strcmp(argv[1], "--after-exec") == 0;
    int arg = after_exec ? 2 : 1;
    if (argc > arg)
        seconds = atof(argv[arg]);
    if (after_exec) {
        after_exec_work();
        printf("forkexec: after exec pid=%d\n", (int)getpid());
        return 0;
    }

    parent_work();
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        child_work();
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
