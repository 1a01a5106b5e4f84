/* procs: CPU work in processes started every way a program starts them, each phase in a
 * function of its own that measures its own CPU time.
 *
 * usage: procs MODE [CPU_SECONDS=0.4]
 *   vfork   parent_work, then vfork + execv of itself as "child": child_work
 *   spawn   parent_work, then posix_spawn of itself as "child": child_work
 *   system  parent_work, then system("'<itself>' child SECS"): /bin/sh, then child_work
 *   setsid  parent_work, then fork; the child calls setsid() and runs session_work
 *   daemon  parent_work, then fork and exit(0) as soon as the daemon is in its own session;
 *           the child calls setsid(), forks again and _exit(0)s; the grandchild (the daemon)
 *           tells the parent it is there, then runs daemon_work for 2.5 x CPU_SECONDS (so
 *           that it outlives `blameprof run`)
 *   child   child_work (the image started by vfork, spawn and system)
 *
 * stdout: one "truth <function>_ns=N" line per function run (each process prints its own
 * and flushes before it starts another), and "procs: ..." lines saying what each parent saw
 * (deterministic but for the numbers). Exit status 0, or 1 after a message on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static unsigned long long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static double seconds = 0.4;

/* Spins for `secs` of this thread's CPU time and prints it as "truth <name>_ns=N". */
#define WORK_FN(name, mult)                                                                    \
    __attribute__((noinline, noclone)) void name(double secs) {                                \
        unsigned long long start = thread_cpu_ns();                                            \
        unsigned long long until = start + (unsigned long long)(secs * 1e9);                   \
        volatile unsigned long x = 1;                                                          \
        while (thread_cpu_ns() < until)                                                        \
            for (long i = 0; i < 20000; i++)                                                   \
                x = x * (mult) + (unsigned long)i;                                             \
        printf("truth " #name "_ns=%llu\n", thread_cpu_ns() - start);                          \
        fflush(stdout);                                                                        \
    }

WORK_FN(parent_work, 3UL)
WORK_FN(child_work, 5UL)
WORK_FN(session_work, 7UL)
WORK_FN(daemon_work, 11UL)

static int fail(const char *what) {
    fprintf(stderr, "procs: %s: %s\n", what, strerror(errno));
    return 1;
}

/* Waits for `pid` and prints how it ended; 0 if it exited with 0. */
static int reap(const char *how, pid_t pid) {
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return fail("waitpid");
    if (WIFEXITED(status))
        printf("procs: %s child exited %d\n", how, WEXITSTATUS(status));
    else
        printf("procs: %s child killed by signal %d\n", how, WTERMSIG(status));
    fflush(stdout);
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (argc > 2)
        seconds = atof(argv[2]);
    char secs[32];
    snprintf(secs, sizeof secs, "%g", seconds);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        return fail("readlink /proc/self/exe");
    self[n] = 0;
    char *child_argv[] = {self, "child", secs, NULL};

    if (strcmp(mode, "child") == 0) {
        child_work(seconds);
        return 0;
    }
    if (strcmp(mode, "vfork") && strcmp(mode, "spawn") && strcmp(mode, "system") &&
        strcmp(mode, "setsid") && strcmp(mode, "daemon")) {
        fprintf(stderr, "usage: procs vfork|spawn|system|setsid|daemon|child [SECONDS]\n");
        return 2;
    }
    parent_work(seconds);

    if (strcmp(mode, "vfork") == 0) {
        pid_t pid = vfork();
        if (pid < 0)
            return fail("vfork");
        if (pid == 0) {
            execv(self, child_argv);
            _exit(127);
        }
        return reap("vfork", pid);
    }
    if (strcmp(mode, "spawn") == 0) {
        pid_t pid;
        int rc = posix_spawn(&pid, self, NULL, NULL, child_argv, environ);
        if (rc != 0) {
            errno = rc;
            return fail("posix_spawn");
        }
        return reap("posix_spawn", pid);
    }
    if (strcmp(mode, "system") == 0) {
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "'%s' child %s", self, secs);
        int status = system(cmd);
        if (status == -1)
            return fail("system");
        printf("procs: system returned exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    if (strcmp(mode, "setsid") == 0) {
        pid_t pid = fork();
        if (pid < 0)
            return fail("fork");
        if (pid == 0) {
            if (setsid() < 0)
                return fail("setsid");
            session_work(seconds);
            exit(0);
        }
        return reap("setsid", pid);
    }
    /* daemon: the classic double fork. The parent waits for one byte from the daemon, sent
     * once it is in its own session: whoever then kills the parent's process group (the
     * tests' harness does, once the parent has exited) cannot reach the daemon. */
    int ready[2];
    if (pipe(ready) < 0)
        return fail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork");
    if (pid > 0) {
        char byte;
        close(ready[1]);
        if (read(ready[0], &byte, 1) != 1)
            return fail("read from the daemon");
        printf("procs: daemon started, parent exits\n");
        fflush(stdout);
        exit(0);
    }
    close(ready[0]);
    if (setsid() < 0)
        return fail("setsid");
    pid = fork();
    if (pid < 0)
        return fail("fork");
    if (pid > 0)
        _exit(0);
    if (write(ready[1], "", 1) != 1)
        return fail("write to the parent");
    close(ready[1]);
    daemon_work(2.5 * seconds);
    exit(0);
}
