/* many_objects: lock overhead seen only through the group of locks made at one init site.
 * `object_new` mallocs an object with a mutex of its own, initialised there by
 * pthread_mutex_init (the one init site of every object lock). THREADS workers each make
 * OBJECTS objects of their own and loop over them round-robin: { `touch_object`: lock the
 * object, a tiny update, unlock; `compute`: COMPUTE_NS of work outside any lock }. Nothing
 * is shared, so no acquisition is ever contended; together the object locks are taken
 * millions of times a second, but each single one well under 1000 times a second. The objects are kept (never destroyed) until the program exits.
 *
 * Usage: many_objects [seconds=2]
 * Every acquisition first tries pthread_mutex_trylock; when that fails the acquisition is
 * contended (and pthread_mutex_lock follows). Prints one line
 *   truth start_ns=.. end_ns=.. acquisitions=.. objects=4000 contended=0 max_object_acq=..
 * where start_ns and end_ns are CLOCK_MONOTONIC ns (the start of the work, before the
 * objects are made, and its end: all workers joined), acquisitions and contended are summed
 * over all object locks, objects is the number of objects (locks) made, and max_object_acq
 * the largest number of acquisitions of any one object lock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "wait_truth.h"

#define THREADS 4
#define OBJECTS 1000
/* About 600 ns of arithmetic between acquisitions (no clock read: on some virtual machines
 * one costs more than that): taking the locks costs a few percent of the threads' running
 * time on an idle 2-CPU machine, over the lock_overhead finding's 1%, while each of the
 * OBJECTS locks of a thread is taken a few hundred times a second. */
#define COMPUTE_ITERATIONS 480

struct object {
    pthread_mutex_t lock;
    uint64_t value, acquisitions;
};

static uint64_t deadline;

struct worker {
    unsigned index;
    struct object *objects[OBJECTS];
    uint64_t acquisitions, contended, sink;
};

NOINL struct object *object_new(void) {
    struct object *o = calloc(1, sizeof *o);
    if (!o) {
        perror("calloc");
        exit(2);
    }
    pthread_mutex_init(&o->lock, NULL);
    return o;
}

NOINL void touch_object(struct worker *w, struct object *o) {
    if (pthread_mutex_trylock(&o->lock) != 0) {
        w->contended++;
        pthread_mutex_lock(&o->lock);
    }
    o->value += w->index + 1;
    o->acquisitions++;
    pthread_mutex_unlock(&o->lock);
    w->acquisitions++;
}

NOINL void compute(struct worker *w) {
    unsigned x = w->index | 1;
    for (int i = 0; i < COMPUTE_ITERATIONS; i++)
        x = x * 1103515245u + 12345u;
    w->sink += x; /* in the worker's own line: no sharing between threads */
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    for (int i = 0; i < OBJECTS; i++)
        w->objects[i] = object_new();
    for (unsigned i = 0; (i % 256 != 0) || now_ns() < deadline; i = (i + 1) % OBJECTS) {
        touch_object(w, w->objects[i]);
        compute(w);
    }
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0) {
        fprintf(stderr, "usage: many_objects [seconds]\n");
        return 2;
    }
    static struct worker workers[THREADS];
    pthread_t t[THREADS];
    uint64_t start = now_ns();
    deadline = start + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < THREADS; i++) {
        workers[i].index = (unsigned)i;
        if (pthread_create(&t[i], NULL, run_worker, &workers[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t end = now_ns();
    uint64_t acquisitions = 0, contended = 0, max_object = 0;
    for (int i = 0; i < THREADS; i++) {
        acquisitions += workers[i].acquisitions;
        contended += workers[i].contended;
        for (int j = 0; j < OBJECTS; j++)
            if (workers[i].objects[j]->acquisitions > max_object)
                max_object = workers[i].objects[j]->acquisitions;
    }
    printf("truth start_ns=%llu end_ns=%llu acquisitions=%llu objects=%d contended=%llu"
           " max_object_acq=%llu\n",
           (unsigned long long)start, (unsigned long long)end, (unsigned long long)acquisitions,
           THREADS * OBJECTS, (unsigned long long)contended, (unsigned long long)max_object);
    return 0;
}
