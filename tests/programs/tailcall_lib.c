/* tailcall_lib: the library half of tailcall.c. lib_forward, called by the program through
 * its PLT, does nothing but tail-call lib_worker. */
#include <time.h>

unsigned long long lib_worker_ns;
volatile unsigned long lib_sink;

static unsigned long long cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

__attribute__((noipa)) unsigned long lib_worker(long units)
{
    unsigned long long t0 = cpu_ns();
    unsigned long x = 7;
    for (long i = 0; i < units * 40000L; i++) {
        x = x * 31 + (unsigned long)i;
        lib_sink = x;
    }
    lib_worker_ns += cpu_ns() - t0;
    return x;
}

__attribute__((noipa)) unsigned long lib_forward(long units)
{
    return lib_worker(units);
}
