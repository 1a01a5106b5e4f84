/* crash: computes in before_crash for a while, then dies the way it is told: "segv" (a null
 * pointer write: SIGSEGV) or "kill" (SIGKILL to itself, which nothing can intercept). The
 * profile must still hold what ran before the death.
 * usage: crash segv|kill [CPU_SECONDS=2.5]
 * stdout: "truth before_crash_ns=N" (flushed before dying) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

__attribute__((noinline)) unsigned long long before_crash(double secs) {
    volatile double x = 0;
    unsigned long long start = cpu_ns(), end = start + (unsigned long long)(secs * 1e9);
    while (cpu_ns() < end)
        for (int i = 0; i < 10000; i++) x += i * 0.5;
    return cpu_ns() - start;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "segv";
    double secs = argc > 2 ? atof(argv[2]) : 2.5;
    printf("truth before_crash_ns=%llu\n", before_crash(secs));
    fflush(stdout);
    if (strcmp(how, "kill") == 0)
        kill(getpid(), SIGKILL);
    *(volatile int *)0 = 1;
    return 0;
}
