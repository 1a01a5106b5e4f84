/* hotspots: a small demo program for blameprof.
 *
 *   gcc -O2 -g -pthread examples/hotspots.c -o hotspots
 *   blameprof run -o hotspots.prof -- ./hotspots
 *   blameprof report hotspots.prof --view top-down
 *
 * Three worker threads each process a batch of "requests": parsing is cheap, checksumming
 * costs about twice as much, and compressing costs about four times as much. The main thread
 * meanwhile loads a "configuration". Expect roughly: compress_block 50%, compute_checksum
 * 25%, parse_request 13%, load_config 12%. About 1.5 s of CPU in total.
 */
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline, noclone))

/* A CPU loop the compiler cannot remove: `units` is roughly milliseconds of work. It is a
 * macro, so each stage below computes in its own body and shows up with its own time. */
#define SPIN(seed, units)                                                                 \
    do {                                                                                  \
        volatile unsigned long x_ = (seed);                                               \
        for (long i_ = 0; i_ < (units) * 1000000L; i_++) x_ = x_ * 31 + (unsigned long)i_; \
        (seed) = x_;                                                                      \
    } while (0)

NOINLINE unsigned long parse_request(int id) { unsigned long v = (unsigned long)id; SPIN(v, 1); return v; }
NOINLINE unsigned long compute_checksum(unsigned long v) { SPIN(v, 2); return v; }
NOINLINE unsigned long compress_block(unsigned long v) { SPIN(v, 4); return v; }

NOINLINE unsigned long handle_request(int id)
{
    unsigned long v = parse_request(id);
    v = compute_checksum(v);
    v = compress_block(v);
    __asm__ volatile("" ::: "memory"); /* keep the calls real calls, not tail jumps */
    return v;
}

NOINLINE void *worker(void *arg)
{
    long first = (long)arg;
    unsigned long acc = 0;
    for (int i = 0; i < 70; i++)
        acc ^= handle_request((int)first + i);
    return (void *)acc;
}

NOINLINE unsigned long load_config(void) { unsigned long v = 42; SPIN(v, 200); return v; }

int main(void)
{
    pthread_t threads[3];
    for (long t = 0; t < 3; t++)
        pthread_create(&threads[t], NULL, worker, (void *)(t * 1000));
    unsigned long result = load_config();
    for (int t = 0; t < 3; t++) {
        void *r;
        pthread_join(threads[t], &r);
        result ^= (unsigned long)r;
    }
    printf("hotspots: done (%lx)\n", result);
    return 0;
}
