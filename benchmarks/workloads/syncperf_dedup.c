/* syncperf_dedup: asymmetric contention on a hash table's bucket locks (SyncPerf, Alam et
 * al., "Asymmetric Contention", PARSEC dedup: "an array of locks (encoder.c:1051) protect
 * different buckets of a hash table ... the one with the most acquisitions has a contention
 * rate of 16%, while others have less than 1%"; the hash function does not spread the keys).
 *
 * THREADS compression threads each process CHUNKS chunks: `fingerprint` (outside any lock,
 * FP_NS of computing), then `lookup_chunk` (the chunk's bucket lock held LOOKUP_NS while
 * searching the chain) and, for every INSERT_EVERY-th chunk (a new one), `insert_chunk` (the
 * bucket lock held INSERT_NS while comparing and linking the chunk). The keys are skewed:
 * one chunk in HOT_EVERY (pseudo-randomly) hashes to bucket 0 (the hot bucket), the others spread over all
 * NBUCKET buckets. Contention is almost all on bucket 0; insert_chunk holds it longest and
 * is the culprit, lookup_chunk waits most.
 *
 * Usage: syncperf_dedup [scale=1.0]   (scale 1.0: about 1.3 s on 2 CPUs)
 *
 * Truth (obj_truth.h): every wait [lock called, returned] and hold [returned, unlock
 * called] with its bucket, CLOCK_MONOTONIC; per bucket, blame.mutex of a function = the
 * overlap of the waits on that bucket with its holds, summed over the buckets;
 * idleness.mutex = its contended waits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "obj_truth.h"

enum { F_INSERT, F_LOOKUP, NFUNC };
static const char *const FNAME[NFUNC] = {"insert_chunk", "lookup_chunk"};

#define THREADS 2
#define NBUCKET 256
#define FP_NS 40000ull
#define LOOKUP_NS 5000ull
#define INSERT_NS 100000ull
#define INSERT_EVERY 2
#define HOT_EVERY 2

static pthread_mutex_t bucket_lock[NBUCKET];
static uint64_t bucket_len[NBUCKET];
static uint64_t hot_acq, all_acq;
static int chunks;

/* The keys of the skewed part of the key space have their low byte zero. */
static unsigned bucket_of(uint64_t key) {
    if ((key & 0xff) == 0)
        return 0; /* the bad hash: all of them in one bucket */
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    return (unsigned)(key >> 56) % NBUCKET;
}

/* The chunk's key: one chunk in HOT_EVERY is of the skewed kind (low byte zero). */
NOINL uint64_t fingerprint(uint64_t chunk, unsigned seed) {
    busy_for(FP_NS, (unsigned)chunk * 2654435761u + seed);
    uint64_t key = (chunk + 1) * 0x9e3779b97f4a7c15ull;
    if ((key >> 33) % HOT_EVERY == 0)
        key &= ~0xffull;
    else if ((key & 0xff) == 0)
        key |= 1;
    return key;
}

NOINL uint64_t lookup_chunk(tlog_t *l, uint64_t key) {
    unsigned b = bucket_of(key);
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&bucket_lock[b]);
    uint64_t h0 = now_ns();
    busy_for(LOOKUP_NS, (unsigned)key);
    uint64_t v = bucket_len[b];
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&bucket_lock[b]);
    ob_hold(l, F_LOOKUP, (int)b, w0, h0, h1);
    return v;
}

NOINL void insert_chunk(tlog_t *l, uint64_t key) {
    unsigned b = bucket_of(key);
    uint64_t w0 = now_ns();
    pthread_mutex_lock(&bucket_lock[b]);
    uint64_t h0 = now_ns();
    busy_for(INSERT_NS, (unsigned)key);
    bucket_len[b]++;
    uint64_t h1 = now_ns();
    pthread_mutex_unlock(&bucket_lock[b]);
    ob_hold(l, F_INSERT, (int)b, w0, h0, h1);
}

static void *compress_thread(void *arg) {
    tlog_t *l = arg;
    uint64_t sum = 0, hot = 0;
    for (int c = 0; c < chunks; c++) {
        uint64_t chunk = (uint64_t)c * THREADS + (uint64_t)l->index;
        uint64_t key = fingerprint(chunk, (unsigned)l->index);
        sum += lookup_chunk(l, key);
        hot += bucket_of(key) == 0;
        if (c % INSERT_EVERY == 0) {
            insert_chunk(l, key);
            hot += bucket_of(key) == 0;
        }
    }
    wt_sink[l->index] += sum;
    __atomic_fetch_add(&hot_acq, hot, __ATOMIC_RELAXED);
    __atomic_fetch_add(&all_acq, (uint64_t)chunks + (uint64_t)(chunks + 1) / INSERT_EVERY,
                       __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv) {
    double scale = wl_scale(argc, argv, "syncperf_dedup");
    chunks = (int)(12000 * scale + 0.5);
    if (chunks < 10)
        chunks = 10;
    for (int b = 0; b < NBUCKET; b++)
        pthread_mutex_init(&bucket_lock[b], NULL);
    uint64_t wall;
    tlog_t *logs = wl_run_logged(THREADS, compress_thread, (size_t)chunks * 2 + 10, &wall);
    if (!logs)
        return 2;

    uint64_t blame[NFUNC] = {0}, idle[NFUNC] = {0}, contended[NFUNC] = {0};
    if (ob_mutex_truth(logs, THREADS, NBUCKET, "syncperf_dedup", blame, idle, contended))
        return 2;
    printf("syncperf_dedup: %.2f s, %d threads, %d chunks each, %llu of %llu bucket"
           " acquisitions on the hot bucket\n",
           wall / 1e9, THREADS, chunks, (unsigned long long)hot_acq,
           (unsigned long long)all_acq);
    ob_mutex_lines(FNAME, NFUNC, contended, idle, blame, 0);
    wl_truth_pairs("mutex", FNAME, NFUNC, blame, idle);
    wl_truth_end("insert_chunk", "insert_chunk,lookup_chunk,fingerprint", all_acq);
    return 0;
}
