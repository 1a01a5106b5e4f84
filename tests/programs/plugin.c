/* plugin: a shared library loaded at run time by dlopen_host.c. Its one function burns the
 * CPU time it is asked for and returns what it measured, in nanoseconds. */
#include <time.h>

static unsigned long long cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

__attribute__((noinline)) unsigned long long plugin_hot(double secs) {
    volatile double x = 0;
    unsigned long long start = cpu_ns(), end = start + (unsigned long long)(secs * 1e9);
    while (cpu_ns() < end)
        for (int i = 0; i < 10000; i++) x += i * 0.5;
    return cpu_ns() - start;
}
