/* deep_recursion: spends its CPU time 2000 calls deep, past the profiler's maximum call-path
 * depth, so every sample's path must be cut (and marked) without overflowing anything.
 * usage: deep_recursion [DEPTH=2000] [CPU_SECONDS=0.5]
 * stdout: "truth depth=D" */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static double deep_leaf(double secs) {
    volatile double x = 0;
    double end = cpu_seconds() + secs;
    while (cpu_seconds() < end)
        for (int i = 0; i < 10000; i++) x += i * 0.5;
    return x;
}

__attribute__((noinline)) double recurse(int depth, double secs) {
    double r = depth == 0 ? deep_leaf(secs) : recurse(depth - 1, secs);
    __asm__ volatile("" ::: "memory"); /* no tail call: every level keeps its frame */
    return r + 1;
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 2000;
    double secs = argc > 2 ? atof(argv[2]) : 0.5;
    recurse(depth, secs);
    printf("truth depth=%d\n", depth);
    return 0;
}
