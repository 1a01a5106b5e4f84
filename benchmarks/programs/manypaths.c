/* manypaths: CPU-bound threads that wander through a call graph of 32 functions, up to 24
 * calls deep, so a profile of it holds many distinct call paths (thousands), unlike a
 * steady loop. Used to build realistically varied large profiles for `report` timings.
 * usage: manypaths THREADS CPU_SECONDS_PER_THREAD */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef unsigned (*step_fn)(unsigned, int);
static step_fn table[32];

static unsigned spin(unsigned seed) {
    volatile unsigned x = seed;
    for (int i = 0; i < 2000; i++) x = x * 1103515245u + 12345u;
    return x;
}

#define STEP(n)                                                                       \
    __attribute__((noinline)) static unsigned step##n(unsigned seed, int depth) {    \
        seed = seed * 1664525u + 1013904223u + n;                                     \
        unsigned r = depth > 0 && (seed >> 28) != 0                                   \
                         ? table[(seed >> 8) % 32](seed, depth - 1)                   \
                         : spin(seed);                                                \
        __asm__ volatile("" ::: "memory");                                            \
        return r + 1;                                                                 \
    }
STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)
STEP(8) STEP(9) STEP(10) STEP(11) STEP(12) STEP(13) STEP(14) STEP(15)
STEP(16) STEP(17) STEP(18) STEP(19) STEP(20) STEP(21) STEP(22) STEP(23)
STEP(24) STEP(25) STEP(26) STEP(27) STEP(28) STEP(29) STEP(30) STEP(31)

static double secs;

static void *worker(void *arg) {
    unsigned seed = (unsigned)(size_t)arg * 7919u;
    double end = cpu_seconds() + secs;
    while (cpu_seconds() < end)
        for (int i = 0; i < 64; i++) seed = table[seed % 32](seed, 24);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    secs = argc > 2 ? atof(argv[2]) : 5;
    step_fn fns[32] = {step0,  step1,  step2,  step3,  step4,  step5,  step6,  step7,
                       step8,  step9,  step10, step11, step12, step13, step14, step15,
                       step16, step17, step18, step19, step20, step21, step22, step23,
                       step24, step25, step26, step27, step28, step29, step30, step31};
    for (int i = 0; i < 32; i++) table[i] = fns[i];
    pthread_t t[256];
    if (threads > 256) threads = 256;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(size_t)(i + 1));
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    printf("manypaths: done\n");
    return 0;
}
