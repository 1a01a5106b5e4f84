/* tailcall: functions whose last act is a call compiled, at -O2, to a jump (a tail call), so
 * that their frames are gone from the stack while the function they called runs.
 *
 * usage: tailcall [CPU_SECONDS_PER_PHASE=0.4]
 *
 * Phases, each repeated until it has used its CPU time:
 *   dispatch:       computes a setup of its own (about half its time), then tail-calls
 *                   worker;
 *   only_forwards:  nothing but a tail call to worker2;
 *   calls_normally: calls worker3 and adds to its result (the control: an ordinary call);
 *   chain_outer:    tail-calls chain_inner, which tail-calls worker4 (a chain of two);
 *   lib_forward:    in libtailcall.so (tailcall_lib.c), called through the PLT, nothing but
 *                   a tail call to lib_worker.
 * Every function is noipa, so gcc neither inlines, clones nor folds it, and every body
 * differs. Build with -O2 -g and libtailcall.so.
 *
 * Ground truth: each worker and dispatch's setup bracket their own work with
 * CLOCK_THREAD_CPUTIME_ID; the last stdout line is
 *   truth dispatch_ns=D worker_ns=W worker2_ns=W2 worker3_ns=W3 worker4_ns=W4 lib_worker_ns=L
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define UNIT 40000L /* loop iterations per work unit (tens of microseconds) */

extern unsigned long lib_forward(long units);
extern unsigned long long lib_worker_ns;

static unsigned long long dispatch_ns, worker_ns, worker2_ns, worker3_ns, worker4_ns;
static volatile unsigned long sink;

static unsigned long long cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

__attribute__((noipa)) unsigned long worker(long units)
{
    unsigned long long t0 = cpu_ns();
    unsigned long x = 0;
    for (long i = 0; i < units * UNIT; i++) {
        x += (unsigned long)i;
        sink = x;
    }
    worker_ns += cpu_ns() - t0;
    return x;
}

__attribute__((noipa)) unsigned long worker2(long units)
{
    unsigned long long t0 = cpu_ns();
    unsigned long x = 1;
    for (long i = 0; i < units * UNIT; i++) {
        x ^= (unsigned long)i * 3UL;
        sink = x;
    }
    worker2_ns += cpu_ns() - t0;
    return x;
}

__attribute__((noipa)) unsigned long worker3(long units)
{
    unsigned long long t0 = cpu_ns();
    unsigned long x = 2;
    for (long i = 0; i < units * UNIT; i++) {
        x = x * 5 + (unsigned long)i;
        sink = x;
    }
    worker3_ns += cpu_ns() - t0;
    return x;
}

__attribute__((noipa)) unsigned long worker4(long units)
{
    unsigned long long t0 = cpu_ns();
    unsigned long x = 3;
    for (long i = 0; i < units * UNIT; i++) {
        x -= (unsigned long)i | 1UL;
        sink = x;
    }
    worker4_ns += cpu_ns() - t0;
    return x;
}

/* A setup of its own, then a tail call: its frame is gone while worker runs. */
__attribute__((noipa)) unsigned long dispatch(long units)
{
    unsigned long long t0 = cpu_ns();
    unsigned long x = 4;
    for (long i = 0; i < units * UNIT / 3; i++) {
        x += x >> 3 ^ (unsigned long)i;
        sink = x;
    }
    dispatch_ns += cpu_ns() - t0;
    return worker(units);
}

__attribute__((noipa)) unsigned long only_forwards(long units)
{
    return worker2(units);
}

/* The control: worker3 returns here, so this frame stays on the stack. */
__attribute__((noipa)) unsigned long calls_normally(long units)
{
    return worker3(units) + 1;
}

__attribute__((noipa)) unsigned long chain_inner(long units)
{
    return worker4(units);
}

__attribute__((noipa)) unsigned long chain_outer(long units)
{
    return chain_inner(units);
}

/* Calls `phase` directly (an indirect call would prove nothing) for `secs` of CPU time. */
#define RUN(phase, secs)                                                           \
    for (unsigned long long end = cpu_ns() + (unsigned long long)((secs) * 1e9); \
         cpu_ns() < end;)                                                          \
        sink = phase(30)

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.4;
    RUN(dispatch, secs);
    RUN(only_forwards, secs);
    RUN(calls_normally, secs);
    RUN(chain_outer, secs);
    RUN(lib_forward, secs);
    printf("truth dispatch_ns=%llu worker_ns=%llu worker2_ns=%llu worker3_ns=%llu "
           "worker4_ns=%llu lib_worker_ns=%llu\n",
           dispatch_ns, worker_ns, worker2_ns, worker3_ns, worker4_ns, lib_worker_ns);
    return 0;
}
