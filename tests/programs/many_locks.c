/* many_locks: create, use and destroy millions of malloc'd spin locks and mutexes, with at
 * most LIVE of them alive at once. Memory for monitoring state must be bounded by the live
 * locks, not by all locks ever created.
 *
 * Usage: many_locks [total=3000000] [live=10000] [mode=destroy|nodestroy] [contend_every=32]
 *
 * Rounds of LIVE locks (half pthread_spinlock_t, half pthread_mutex_t, each malloc'd and
 * initialised): two threads then lock/unlock every lock of the round USES times; on the first
 * pass, every CONTEND_EVERY-th lock is taken by both threads at once (a handshake makes sure
 * the second one finds it held), so that many locks become contended (monitored); then the locks are destroyed and freed (with mode=nodestroy,
 * freed without pthread_*_destroy, as much real code does; the next round's locks are then
 * calloc'd and not initialised, which glibc accepts for mutexes and, on
 * non-x86, for spin locks; on x86 the spin locks are still initialised). Other allocations
 * are interleaved so freed lock memory is reused for other things.
 *
 * Prints counts, how often a trylock found a lock busy (contention), the sum check, and the
 * peak RSS (VmHWM from /proc/self/status) as
 *   truth locks=.. contended=.. vmhwm_kib=..
 * Exits 1 if the counts are wrong.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define USES 4

struct lockbox {
    int is_spin;
    union {
        pthread_spinlock_t s;
        pthread_mutex_t m;
    } u;
    uint64_t count;
    int contended; /* a trylock found it busy at least once (written under the lock) */
    int phase;     /* handshake: 1 = thread 0 holds it, 2 = thread 1 is trying */
    uint64_t sum;
};

static struct lockbox **round_locks;
static long live = 10000;
static int nodestroy;
static pthread_barrier_t start_round, end_round;
static int done;
static uint64_t contended[2];
static long contend_every = 32;

static void lock_box(struct lockbox *b, int me) {
    if (b->is_spin) {
        if (pthread_spin_trylock(&b->u.s) != 0) {
            contended[me]++;
            pthread_spin_lock(&b->u.s);
            b->contended = 1;
        }
    } else {
        if (pthread_mutex_trylock(&b->u.m) != 0) {
            contended[me]++;
            pthread_mutex_lock(&b->u.m);
            b->contended = 1;
        }
    }
}

static void unlock_box(struct lockbox *b) {
    if (b->is_spin)
        pthread_spin_unlock(&b->u.s);
    else
        pthread_mutex_unlock(&b->u.m);
}

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits for the other thread's handshake step: spins a little, then sleeps on the word
 * (a futex), so that on a loaded machine the partner is woken when the step is made instead
 * of waiting for a time slice (sched_yield to a CPU hog gives the CPU away for a whole
 * slice, and 94K handshakes took minutes). */
static void await_phase(int *phase, int want) {
    for (unsigned n = 0; n < 2000; n++)
        if (__atomic_load_n(phase, __ATOMIC_ACQUIRE) == want)
            return;
    for (int seen; (seen = __atomic_load_n(phase, __ATOMIC_ACQUIRE)) != want;)
        syscall(SYS_futex, phase, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

/* Makes a handshake step and wakes the partner, if it sleeps on it. */
static void set_phase(int *phase, int value) {
    __atomic_store_n(phase, value, __ATOMIC_RELEASE);
    syscall(SYS_futex, phase, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Pass 0 over every CONTEND_EVERY-th lock: thread 0 takes it and holds it until thread 1 has
 * announced that it is trying too, and a few microseconds more, so thread 1's trylock fails
 * and its lock call waits. */
static void handshake(struct lockbox *b, int me) {
    if (me == 0) {
        lock_box(b, me);
        set_phase(&b->phase, 1);
        await_phase(&b->phase, 2);
        uint64_t end = now_ns() + 3000;
        while (now_ns() < end)
            ;
        b->count++;
        unlock_box(b);
    } else {
        await_phase(&b->phase, 1);
        set_phase(&b->phase, 2);
        lock_box(b, me);
        b->count++;
        unlock_box(b);
    }
}

/* With two CPUs or more, each user thread gets a CPU of its own: the handshakes spin, and
 * two spinning partners sharing one CPU would wait for each other a time slice at a time. */
static void pin_to_nth_cpu(int n) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2)
        return;
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &allowed) && seen++ == n) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

static void *user(void *arg) {
    int me = (int)(intptr_t)arg;
    pin_to_nth_cpu(me);
    for (;;) {
        pthread_barrier_wait(&start_round);
        if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
            return NULL;
        for (int u = 0; u < USES; u++) {
            for (long i = 0; i < live; i++) {
                struct lockbox *b = round_locks[i];
                if (u == 0 && i % contend_every == 0) {
                    handshake(b, me);
                    continue;
                }
                lock_box(b, me);
                b->count++;
                for (int k = 0; k < 16; k++)
                    b->sum += (uint64_t)k;
                unlock_box(b);
            }
        }
        pthread_barrier_wait(&end_round);
    }
}

static long vmhwm_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    long total = argc > 1 ? atol(argv[1]) : 3000000;
    live = argc > 2 ? atol(argv[2]) : 10000;
    nodestroy = argc > 3 && strcmp(argv[3], "nodestroy") == 0;
    contend_every = argc > 4 ? atol(argv[4]) : 32;
    if (total < 1 || live < 1 || live > total || contend_every < 1) {
        fprintf(stderr, "usage: many_locks [total] [live] [destroy|nodestroy] [contend_every]\n");
        return 2;
    }
    round_locks = calloc((size_t)live, sizeof *round_locks);
    pthread_barrier_init(&start_round, NULL, 3);
    pthread_barrier_init(&end_round, NULL, 3);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, user, (void *)(intptr_t)i);

    long rounds = total / live, created = 0, bad = 0, locks_contended = 0;
    void *junk[64] = {0};
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < live; i++) {
            int spin = (int)((i + r) & 1);
            struct lockbox *b;
            if (nodestroy && r > 0)
                b = calloc(1, sizeof *b); /* zeroed, not initialised */
            else
                b = malloc(sizeof *b);
            if (!b) {
                perror("malloc");
                return 2;
            }
            b->is_spin = spin;
            b->count = 0;
            b->contended = 0;
            b->phase = 0;
            b->sum = 0;
            if (!(nodestroy && r > 0)) {
                if (spin)
                    pthread_spin_init(&b->u.s, PTHREAD_PROCESS_PRIVATE);
                else
                    pthread_mutex_init(&b->u.m, NULL);
            } else if (spin) {
#if defined(__x86_64__) || defined(__i386__)
                pthread_spin_init(&b->u.s, PTHREAD_PROCESS_PRIVATE); /* zero is locked here */
#endif
            }
            round_locks[i] = b;
            created++;
            /* interleave other allocations so lock memory gets reused for other data */
            if (i % 97 == 0) {
                unsigned j = (unsigned)(i / 97) % 64;
                free(junk[j]);
                junk[j] = malloc(sizeof(struct lockbox) * (1 + (size_t)(i % 3)));
                if (junk[j])
                    memset(junk[j], 0xa5, sizeof(struct lockbox));
            }
        }
        pthread_barrier_wait(&start_round);
        pthread_barrier_wait(&end_round);
        for (long i = 0; i < live; i++) {
            struct lockbox *b = round_locks[i];
            if (b->count != 2 * USES)
                bad++;
            locks_contended += b->contended;
            /* the lock must be free again */
            int busy = b->is_spin ? pthread_spin_trylock(&b->u.s) : pthread_mutex_trylock(&b->u.m);
            if (busy != 0)
                bad++;
            else
                unlock_box(b);
            if (!nodestroy) {
                if (b->is_spin)
                    pthread_spin_destroy(&b->u.s);
                else
                    pthread_mutex_destroy(&b->u.m);
            }
            memset(b, 0x5a, sizeof *b); /* freed memory does not stay a lock */
            free(b);
        }
    }
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    pthread_barrier_wait(&start_round);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int j = 0; j < 64; j++)
        free(junk[j]);
    long hwm = vmhwm_kib();
    printf("many_locks: %ld locks created (%ld live at once, %s), %ld of them contended, "
           "%llu contended acquisitions, %ld bad, VmHWM %ld kB\n",
           created, live, nodestroy ? "freed without destroy" : "destroyed", locks_contended,
           (unsigned long long)(contended[0] + contended[1]), bad, hwm);
    printf("truth locks=%ld locks_contended=%ld contended=%llu bad=%ld vmhwm_kib=%ld\n", created,
           locks_contended, (unsigned long long)(contended[0] + contended[1]), bad, hwm);
    return bad ? 1 : 0;
}
