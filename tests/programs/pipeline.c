/* pipeline: an imbalanced two-stage pipeline over a bounded queue of CAPACITY items (the
 * mutex `queue_lock` and the condition variables `not_full` and `not_empty`).
 * PARSERS threads run `parse_stage`: make an item in `parse_item` (PARSE_NS of CPU time), then
 * push it, waiting on not_full while the queue is full. RENDERERS threads run
 * `render_stage`: pop an item, waiting on not_empty while the queue is empty, then work on
 * it in `render_item` (RENDER_NS, four times as long). So the renderers are the bottleneck:
 * they compute nearly all the time, and the parsers spend most of theirs waiting on
 * not_full. The main thread starts the renderers once the parsers have filled the queue.
 * After `seconds` the main thread sets `stop` and broadcasts both condition
 * variables; parsers stop pushing, renderers render what is left in the queue and return,
 * and main joins them all.
 *
 * Usage: pipeline [seconds=2]
 * Every queue_lock acquisition first tries pthread_mutex_trylock; when that fails the
 * pthread_mutex_lock call that follows is timed as a wait. Prints one line
 *   truth start_ns=.. end_ns=.. parse_work_ns=.. render_work_ns=.. parse_wait_ns=..
 *         render_wait_ns=.. parse_threads=3 render_threads=3 items=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, and its end: all
 * threads joined); parse_work_ns / render_work_ns are the CPU time spent in parse_item /
 * render_item summed over each stage's threads (CPU time, as the profile's work: on a loaded
 * machine a thread spends much of its wall-clock time in them waiting for a CPU, which is
 * neither work nor waiting), parse_wait_ns / render_wait_ns each stage's
 * time in pthread_cond_wait plus its waits for queue_lock (as above), and items the number
 * of items that went through the pipeline (pushed, and so popped and rendered).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define PARSERS 3
#define RENDERERS 3
#define CAPACITY 8
/* Items take tens of milliseconds of CPU time: a renderer that blocks for queue_lock waits
 * for a CPU once woken, tens of milliseconds on a loaded machine. With items of 50 and 200 us
 * those waits had the renderers wait a fifth to a third of their time; with 1 and 4 ms, a
 * few percent on an idle machine but a fifth beside two CPU hogs; with 5 and 20 ms, up to a
 * tenth there; with these, under 1%. */
#define PARSE_NS 12500000ull
#define RENDER_NS 50000000ull

pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static unsigned queue[CAPACITY], head, count;
static int stop;

struct stage {
    unsigned index;
    uint64_t work_ns, wait_ns, items;
};

/* Takes queue_lock, timing the wait of a contended acquisition into `s`: a macro, so that
 * the lock calls are made from the stage functions themselves. */
#define LOCK_QUEUE(s)                                                                         \
    do {                                                                                      \
        if (pthread_mutex_trylock(&queue_lock) != 0) {                                        \
            uint64_t w0 = now_ns();                                                           \
            pthread_mutex_lock(&queue_lock);                                                  \
            (s)->wait_ns += now_ns() - w0;                                                    \
        }                                                                                     \
    } while (0)

/* Waits on `cv`, timing the wait into `s`. */
#define COND_WAIT(s, cv)                                                                      \
    do {                                                                                      \
        uint64_t w0 = now_ns();                                                               \
        pthread_cond_wait(cv, &queue_lock);                                                   \
        (s)->wait_ns += now_ns() - w0;                                                        \
    } while (0)

/* Burns `ns` of the calling thread's CPU time; returns the CPU time it took. */
static NOINL uint64_t busy_cpu(uint64_t ns, unsigned seed) {
    uint64_t t0 = cpu_ns(), now;
    unsigned x = seed | 1;
    do {
        for (int i = 0; i < 256; i++) {
            x = x * 1103515245u + 12345u;
            wt_sink[x & 1023] += x;
        }
    } while ((now = cpu_ns()) - t0 < ns);
    return now - t0;
}

NOINL unsigned parse_item(struct stage *s, unsigned n) {
    s->work_ns += busy_cpu(PARSE_NS, s->index + n);
    return s->index * 1000000u + n;
}

NOINL void render_item(struct stage *s, unsigned item) {
    s->work_ns += busy_cpu(RENDER_NS, item);
}

NOINL void *parse_stage(void *arg) {
    struct stage *s = arg;
    for (unsigned n = 0;; n++) {
        unsigned item = parse_item(s, n);
        LOCK_QUEUE(s);
        while (count == CAPACITY && !stop)
            COND_WAIT(s, &not_full);
        if (stop) {
            pthread_mutex_unlock(&queue_lock);
            return NULL;
        }
        queue[(head + count) % CAPACITY] = item;
        count++;
        s->items++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&queue_lock);
    }
}

NOINL void *render_stage(void *arg) {
    struct stage *s = arg;
    for (;;) {
        LOCK_QUEUE(s);
        while (count == 0 && !stop)
            COND_WAIT(s, &not_empty);
        if (count == 0) { /* stopped, and nothing left */
            pthread_mutex_unlock(&queue_lock);
            return NULL;
        }
        unsigned item = queue[head];
        head = (head + 1) % CAPACITY;
        count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&queue_lock);
        render_item(s, item);
        s->items++;
    }
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: pipeline [seconds]\n");
        return 2;
    }
    static struct stage parsers[PARSERS], renderers[RENDERERS];
    pthread_t tp[PARSERS], tr[RENDERERS];
    /* The parsers first, and the renderers once the queue is full: started together, the
     * renderers waited on not_empty for the first items, tens of milliseconds each on a
     * loaded machine (a tenth of their time). */
    uint64_t start = now_ns();
    for (int i = 0; i < PARSERS; i++) {
        parsers[i].index = (unsigned)i;
        if (pthread_create(&tp[i], NULL, parse_stage, &parsers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    pthread_mutex_lock(&queue_lock);
    while (count < CAPACITY)
        pthread_cond_wait(&not_empty, &queue_lock);
    pthread_mutex_unlock(&queue_lock);
    for (int i = 0; i < RENDERERS; i++) {
        renderers[i].index = (unsigned)i + 100;
        if (pthread_create(&tr[i], NULL, render_stage, &renderers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    uint64_t deadline = start + (uint64_t)(seconds * 1e9);
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
    pthread_mutex_lock(&queue_lock);
    stop = 1;
    pthread_cond_broadcast(&not_full);
    pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&queue_lock);
    for (int i = 0; i < PARSERS; i++)
        pthread_join(tp[i], NULL);
    for (int i = 0; i < RENDERERS; i++)
        pthread_join(tr[i], NULL);
    uint64_t end = now_ns();
    struct stage p = {0}, r = {0};
    for (int i = 0; i < PARSERS; i++) {
        p.work_ns += parsers[i].work_ns;
        p.wait_ns += parsers[i].wait_ns;
        p.items += parsers[i].items;
    }
    for (int i = 0; i < RENDERERS; i++) {
        r.work_ns += renderers[i].work_ns;
        r.wait_ns += renderers[i].wait_ns;
        r.items += renderers[i].items;
    }
    if (p.items != r.items) {
        fprintf(stderr, "pipeline: pushed %llu items, rendered %llu\n",
                (unsigned long long)p.items, (unsigned long long)r.items);
        return 1;
    }
    printf("truth start_ns=%llu end_ns=%llu parse_work_ns=%llu render_work_ns=%llu"
           " parse_wait_ns=%llu render_wait_ns=%llu parse_threads=%d render_threads=%d"
           " items=%llu\n",
           (unsigned long long)start, (unsigned long long)end, (unsigned long long)p.work_ns,
           (unsigned long long)r.work_ns, (unsigned long long)p.wait_ns,
           (unsigned long long)r.wait_ns, PARSERS, RENDERERS, (unsigned long long)r.items);
    return 0;
}
