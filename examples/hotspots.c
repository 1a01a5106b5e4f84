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

/* A CPU loop the compiler cannot remove: `units` is roughly milliseconds of work. */
static NOINLINE unsigned long spin(unsigned long seed, int units)
{
    volatile unsigned long x = seed;
    for (long i = 0; i < units * 1000000L; i++)
        x = x * 31 + (unsigned long)i;
    return x;
}

NOINLINE unsigned long parse_request(int id) { return spin((unsigned long)id, 1); }
NOINLINE unsigned long compute_checksum(unsigned long v) { return spin(v, 2); }
NOINLINE unsigned long compress_block(unsigned long v) { return spin(v, 4); }

NOINLINE unsigned long handle_request(int id)
{
    unsigned long v = parse_request(id);
    v = compute_checksum(v);
    return compress_block(v);
}

NOINLINE void *worker(void *arg)
{
    long first = (long)arg;
    unsigned long acc = 0;
    for (int i = 0; i < 70; i++)
        acc ^= handle_request((int)first + i);
    return (void *)acc;
}

NOINLINE unsigned long load_config(void) { return spin(42, 200); }

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
