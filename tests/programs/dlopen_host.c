/* dlopen_host: loads a plugin with dlopen after start-up, runs its plugin_hot, unloads it,
 * then computes in its own host_after. The profiler must have refreshed its module list to
 * unwind and symbolize the plugin's code.
 * usage: dlopen_host PLUGIN.so [CPU_SECONDS=0.6]
 * stdout: "truth plugin_ns=N host_ns=M" */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned long long cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

__attribute__((noinline)) unsigned long long host_after(double secs) {
    volatile double x = 0;
    unsigned long long start = cpu_ns(), end = start + (unsigned long long)(secs * 1e9);
    while (cpu_ns() < end)
        for (int i = 0; i < 10000; i++) x += i * 0.5;
    return cpu_ns() - start;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_host PLUGIN.so [SECONDS]\n");
        return 2;
    }
    double secs = argc > 2 ? atof(argv[2]) : 0.6;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    unsigned long long (*hot)(double) = (unsigned long long (*)(double))dlsym(h, "plugin_hot");
    unsigned long long plugin = hot(secs);
    dlclose(h);
    unsigned long long host = host_after(secs / 2);
    printf("truth plugin_ns=%llu host_ns=%llu\n", plugin, host);
    return 0;
}
