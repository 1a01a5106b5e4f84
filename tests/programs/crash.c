/* crash: computes in before_crash for a while, then dies the way it is told: "segv" (a null
 * pointer write: SIGSEGV) or "kill" (SIGKILL to itself, which nothing can intercept). The
 * profile must still hold what ran before the death.
 * usage: crash segv|kill [CPU_SECONDS=2.5]
 * stdout: "truth before_crash_ns=N last_second_ns=L" (flushed before dying): its CPU time in
 * before_crash, and the part of it in its last second of wall-clock time (what the runtime
 * may not have written when the process dies: it writes a thread's samples once they are a
 * second old; on a loaded machine a second holds less CPU time). */
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

static unsigned long long wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Checkpoints (wall, CPU) at least 10 ms apart, 256 of them: 2.56 s of wall-clock time at
 * least, more than the last second. */
#define CHECKPOINTS 256
static unsigned long long cp_wall[CHECKPOINTS], cp_cpu[CHECKPOINTS];
static unsigned cp_n;
static unsigned long long last_second_ns;

__attribute__((noinline)) unsigned long long before_crash(double secs) {
    volatile double x = 0;
    unsigned long long start = cpu_ns(), end = start + (unsigned long long)(secs * 1e9), now;
    while ((now = cpu_ns()) < end) {
        unsigned long long wall = wall_ns();
        if (cp_n == 0 || wall - cp_wall[(cp_n - 1) % CHECKPOINTS] >= 10000000ULL) {
            cp_wall[cp_n % CHECKPOINTS] = wall;
            cp_cpu[cp_n % CHECKPOINTS] = now;
            cp_n++;
        }
        for (int i = 0; i < 10000; i++) x += i * 0.5;
    }
    unsigned long long stop = cpu_ns(), stop_wall = wall_ns();
    /* The newest checkpoint a second or more before the end: never less than the truth. */
    last_second_ns = stop - start;
    unsigned oldest = cp_n > CHECKPOINTS ? cp_n - CHECKPOINTS : 0;
    for (unsigned k = cp_n; k-- > oldest;)
        if (cp_wall[k % CHECKPOINTS] + 1000000000ULL <= stop_wall) {
            last_second_ns = stop - cp_cpu[k % CHECKPOINTS];
            break;
        }
    return stop - start;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "segv";
    double secs = argc > 2 ? atof(argv[2]) : 2.5;
    unsigned long long ns = before_crash(secs);
    printf("truth before_crash_ns=%llu last_second_ns=%llu\n", ns, last_second_ns);
    fflush(stdout);
    if (strcmp(how, "kill") == 0)
        kill(getpid(), SIGKILL);
    *(volatile int *)0 = 1;
    return 0;
}
