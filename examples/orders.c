/* orders: a small order-processing service with the usual contention problems, the
 * program `bash scripts/demo.sh` profiles.
 *
 * - `dispatcher` parses orders (parse_order) and queues them (queue_push: a mutex and a
 *   condition variable);
 * - three workers take orders (take_order waits on the condition variable when the queue
 *   is empty), price them (price_order: a fetch, then computing), record each sale in the ledger
 *   (record_sale: a short hold of `ledger_lock`) and count it (bump_stats: a spin lock);
 * - an auditor checks the whole ledger every 3 ms (audit_ledger) while holding
 *   `ledger_lock`: a long critical section that makes the workers wait in record_sale.
 *
 * So the workers are the victims (waiting in record_sale and take_order), and the culprits
 * are audit_ledger (its long hold) and queue_push (orders arrive slower than the workers
 * take them). The program measures how long the workers waited for the ledger and prints
 * it, to compare with the profile's idleness of record_sale.
 *
 * Usage: orders [seconds=2]
 * Build: gcc -O2 -g -pthread examples/orders.c -o orders
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORKERS 3
#define QUEUE_CAP 64
#define LEDGER_SIZE 4096

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Computes for about `ns` nanoseconds; returns a value so the work is not optimised out. */
static __attribute__((noinline)) uint64_t spin_work(uint64_t ns, uint64_t seed) {
    uint64_t end = now_ns() + ns, x = seed | 1;
    while (now_ns() < end)
        for (int i = 0; i < 4000; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
    return x;
}

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
static uint64_t queue[QUEUE_CAP];
static int queue_len;
static int closed;

static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ledger[LEDGER_SIZE];
static uint64_t ledger_wait_ns[WORKERS];

static pthread_spinlock_t stats_lock;
static uint64_t orders_done;

static volatile int stop;

static __attribute__((noinline)) uint64_t parse_order(uint64_t id) {
    return spin_work(300000, id); /* 300 us per order */
}

static __attribute__((noinline)) void queue_push(uint64_t order) {
    pthread_mutex_lock(&queue_lock);
    if (queue_len < QUEUE_CAP)
        queue[queue_len++] = order;
    pthread_cond_signal(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
}

static __attribute__((noinline)) int take_order(uint64_t *order) {
    pthread_mutex_lock(&queue_lock);
    while (queue_len == 0 && !closed)
        pthread_cond_wait(&queue_ready, &queue_lock);
    int got = queue_len > 0;
    if (got)
        *order = queue[--queue_len];
    pthread_mutex_unlock(&queue_lock);
    return got;
}

static __attribute__((noinline)) uint64_t price_order(uint64_t order) {
    struct timespec fetch = {0, 200000}; /* 200 us fetching the price list, */
    nanosleep(&fetch, NULL);
    return spin_work(100000, order); /* then 100 us of computing */
}

static __attribute__((noinline)) void record_sale(int worker, uint64_t order, uint64_t price) {
    uint64_t a = now_ns();
    pthread_mutex_lock(&ledger_lock);
    ledger_wait_ns[worker] += now_ns() - a;
    ledger[order % LEDGER_SIZE] += price;
    pthread_mutex_unlock(&ledger_lock);
}

static __attribute__((noinline)) void bump_stats(void) {
    pthread_spin_lock(&stats_lock);
    orders_done++;
    pthread_spin_unlock(&stats_lock);
}

static __attribute__((noinline)) uint64_t audit_ledger(void) {
    pthread_mutex_lock(&ledger_lock);
    uint64_t sum = spin_work(2000000, ledger[0]); /* 2 ms with the ledger locked */
    for (int i = 0; i < LEDGER_SIZE; i++)
        sum += ledger[i];
    pthread_mutex_unlock(&ledger_lock);
    return sum;
}

static void *dispatcher(void *arg) {
    uint64_t id = 0;
    while (!stop)
        queue_push(parse_order(++id));
    pthread_mutex_lock(&queue_lock);
    closed = 1;
    pthread_cond_broadcast(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
    return arg;
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    uint64_t order;
    while (take_order(&order)) {
        record_sale(w, order, price_order(order));
        bump_stats();
    }
    return NULL;
}

static void *auditor(void *arg) {
    uint64_t sum = 0;
    struct timespec pause = {0, 3000000}; /* 3 ms between audits */
    while (!stop) {
        sum += audit_ledger();
        nanosleep(&pause, NULL);
    }
    return (void *)(uintptr_t)(sum & 1) + (arg != NULL);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    pthread_spin_init(&stats_lock, PTHREAD_PROCESS_PRIVATE);
    pthread_t d, a, w[WORKERS];
    pthread_create(&d, NULL, dispatcher, NULL);
    pthread_create(&a, NULL, auditor, NULL);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i);
    struct timespec t = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&t, NULL);
    stop = 1;
    pthread_join(d, NULL);
    pthread_join(a, NULL);
    uint64_t waited = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(w[i], NULL);
        waited += ledger_wait_ns[i];
    }
    printf("orders: %llu orders; the workers waited %.1f ms for the ledger (record_sale)\n",
           (unsigned long long)orders_done, waited / 1e6);
    pthread_spin_destroy(&stats_lock);
    return 0;
}
