/* malloc_free_threads: threads that never call malloc, for the runtime footprint test.
 *
 * Usage: malloc_free_threads THREADS
 * Starts THREADS threads that each compute for about 60 ms of CPU time and take a shared
 * mutex now and then (so the profiler samples them, unwinds them and measures their lock
 * waits), joins them, and then prints glibc's per-arena statistics (malloc_stats, to stderr)
 * and a line on stdout:
 *   arenas N
 * where N counts the arenas malloc_stats lists. The program's own threads never allocate,
 * so glibc gives them no arena: N is 1 (the main thread's) unless something else allocated
 * with malloc inside them.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared_counter;

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *arg) {
    (void)arg;
    double start = cpu_now();
    volatile unsigned long x = 0;
    while (cpu_now() - start < 0.06) {
        for (int i = 0; i < 20000; i++) x += i;
        pthread_mutex_lock(&lock);
        for (int i = 0; i < 2000; i++) shared_counter += i;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n < 1 || n > 256) {
        fprintf(stderr, "usage: malloc_free_threads THREADS (1-256)\n");
        return 2;
    }
    pthread_t threads[256];
    for (int i = 0; i < n; i++) {
        if (pthread_create(&threads[i], NULL, worker, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);

    /* malloc_stats writes to stderr: capture it through a pipe to count the arenas. */
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    int saved = dup(2);
    dup2(fds[1], 2);
    malloc_stats();
    fflush(stderr);
    dup2(saved, 2);
    close(fds[1]);
    static char text[1 << 16];
    size_t len = 0;
    ssize_t got;
    while (len < sizeof text - 1 && (got = read(fds[0], text + len, sizeof text - 1 - len)) > 0)
        len += (size_t)got;
    text[len] = 0;
    int arenas = 0;
    for (char *p = text; (p = strstr(p, "Arena ")) != NULL; p++) arenas++;
    fputs(text, stderr);
    printf("arenas %d\n", arenas);
    return 0;
}
