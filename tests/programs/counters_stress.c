/* counters_stress: the lock functions keep their exact semantics under the profiler.
 *
 * THREADS threads x ITERS increments of shared counters under
 *   (a) a normal pthread mutex, (b) a recursive mutex (locked twice per increment),
 *   (c) an error-checking mutex (relock -> EDEADLK, unlock by a non-owner and unlock of an
 *       unlocked mutex -> EPERM), (d) a spin lock, (e) pthread_mutex_trylock and
 *       pthread_spin_trylock loops (failures must be EBUSY), (f) pthread_mutex_timedlock with
 *       a timeout that sometimes expires (ETIMEDOUT, and not before the deadline),
 * then a spin-lock conversion stress: THREADS threads hammer 4 spin locks set up with
 * pthread_spin_init and 4 statically initialised spin words that pthread_spin_init never
 * sees, with lock, trylock and unlock mixed, over several phases; between phases (under a
 * barrier) the initialised locks are destroyed and initialised again.
 *
 * Last, (g) process-shared locks: a PTHREAD_PROCESS_SHARED mutex and spin lock in a
 * MAP_SHARED mapping, used by 2 threads in this process and 2 in a forked child at once.
 *
 * Native spin lock words: glibc's generic code uses 0 = unlocked, but x86 (i386/x86_64
 * assembly, still used by glibc 2.36) uses 1 = unlocked, 0 = locked, negative = locked with
 * contenders that decremented it (`lock decl`). So a statically zero-initialised spin word is
 * LOCKED on x86; the static words here hold the architecture's unlocked value instead.
 *
 * Usage: counters_stress [threads=4] [iters=100000] [parts=all]
 *   parts: comma-separated subset of kinds,spin,trylock,timed,zero,convert,shared
 * Prints one line per check and "counters_stress: ok" at the end; exits 1 on any mismatch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int nthreads = 4;
static long iters = 100000;
static int failures;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "counters_stress: FAIL %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                \
        }                                                                                      \
    } while (0)

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void run_threads(void *(*fn)(void *)) {
    pthread_t th[64];
    for (long i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, fn, (void *)i) != 0) {
            perror("pthread_create");
            exit(2);
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
}

static void report(const char *what, uint64_t got, uint64_t want) {
    printf("%-28s count=%llu expected=%llu %s\n", what, (unsigned long long)got,
           (unsigned long long)want, got == want ? "ok" : "MISMATCH");
    CHECK(got == want, "%s: count %llu, expected %llu", what, (unsigned long long)got,
          (unsigned long long)want);
}

/* ---- (a) normal, (b) recursive, (c) errorcheck mutexes ---- */

static pthread_mutex_t m_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_rec, m_err;
static uint64_t c_normal, c_rec, c_err;

static void *normal_worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        int r = pthread_mutex_lock(&m_normal);
        CHECK(r == 0, "normal lock returned %d", r);
        c_normal++;
        r = pthread_mutex_unlock(&m_normal);
        CHECK(r == 0, "normal unlock returned %d", r);
    }
    return NULL;
}

static void *recursive_worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        int r1 = pthread_mutex_lock(&m_rec);
        int r2 = pthread_mutex_lock(&m_rec);
        int r3 = pthread_mutex_trylock(&m_rec); /* a recursive trylock by the owner succeeds */
        CHECK(r1 == 0 && r2 == 0 && r3 == 0, "recursive lock returned %d %d %d", r1, r2, r3);
        c_rec++;
        r3 = pthread_mutex_unlock(&m_rec);
        r2 = pthread_mutex_unlock(&m_rec);
        r1 = pthread_mutex_unlock(&m_rec);
        CHECK(r1 == 0 && r2 == 0 && r3 == 0, "recursive unlock returned %d %d %d", r1, r2, r3);
    }
    return NULL;
}

static void *errorcheck_worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        int r = pthread_mutex_lock(&m_err);
        CHECK(r == 0, "errorcheck lock returned %d", r);
        if (i % 64 == 0) {
            r = pthread_mutex_lock(&m_err);
            CHECK(r == EDEADLK, "errorcheck relock returned %d, expected EDEADLK", r);
        }
        c_err++;
        r = pthread_mutex_unlock(&m_err);
        CHECK(r == 0, "errorcheck unlock returned %d", r);
        if (i % 64 == 1) {
            /* unlocked now, or held by another thread: either way not ours */
            r = pthread_mutex_unlock(&m_err);
            CHECK(r == EPERM, "errorcheck unlock of a mutex we do not hold returned %d", r);
        }
    }
    return NULL;
}

static void *unlock_foreign(void *arg) {
    int r = pthread_mutex_unlock((pthread_mutex_t *)arg);
    return (void *)(intptr_t)r;
}

static void test_mutex_kinds(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&m_rec, &a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&m_err, &a);
    pthread_mutexattr_destroy(&a);

    run_threads(normal_worker);
    report("(a) normal mutex", c_normal, (uint64_t)nthreads * iters);
    run_threads(recursive_worker);
    report("(b) recursive mutex", c_rec, (uint64_t)nthreads * iters);
    run_threads(errorcheck_worker);
    report("(c) errorcheck mutex", c_err, (uint64_t)nthreads * iters);

    /* EPERM for an unlock by a non-owner while the owner holds it */
    int r = pthread_mutex_lock(&m_err);
    CHECK(r == 0, "errorcheck lock returned %d", r);
    pthread_t t;
    void *ret;
    pthread_create(&t, NULL, unlock_foreign, &m_err);
    pthread_join(t, &ret);
    CHECK((intptr_t)ret == EPERM, "unlock by non-owner returned %d, expected EPERM",
          (int)(intptr_t)ret);
    r = pthread_mutex_unlock(&m_err);
    CHECK(r == 0, "owner's unlock after a foreign unlock attempt returned %d", r);
    r = pthread_mutex_trylock(&m_err);
    CHECK(r == 0, "errorcheck mutex not free after all that (trylock returned %d)", r);
    pthread_mutex_unlock(&m_err);
    printf("%-28s EDEADLK/EPERM %s\n", "(c) errorcheck codes", failures ? "FAIL" : "ok");

    /* a recursive mutex held by another thread is busy */
    pthread_mutex_lock(&m_rec);
    pthread_mutex_lock(&m_rec);
    pthread_create(&t, NULL, unlock_foreign, &m_rec);
    pthread_join(t, &ret);
    CHECK((intptr_t)ret == EPERM, "recursive unlock by non-owner returned %d, expected EPERM",
          (int)(intptr_t)ret);
    pthread_mutex_unlock(&m_rec);
    pthread_mutex_unlock(&m_rec);
    pthread_mutex_destroy(&m_rec);
    pthread_mutex_destroy(&m_err);
}

/* ---- (d) spin lock ---- */

static pthread_spinlock_t s_lock;
static uint64_t c_spin;

static void *spin_worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        int r = pthread_spin_lock(&s_lock);
        CHECK(r == 0, "spin lock returned %d", r);
        c_spin++;
        r = pthread_spin_unlock(&s_lock);
        CHECK(r == 0, "spin unlock returned %d", r);
    }
    return NULL;
}

/* ---- (e) trylock loops ---- */

static pthread_mutex_t m_try = PTHREAD_MUTEX_INITIALIZER;
static pthread_spinlock_t s_try;
static uint64_t c_mtry, c_stry, busy_m, busy_s;

static void *trylock_worker(void *arg) {
    (void)arg;
    uint64_t bm = 0, bs = 0;
    for (long i = 0; i < iters; i++) {
        int r;
        while ((r = pthread_mutex_trylock(&m_try)) != 0) {
            CHECK(r == EBUSY, "mutex trylock returned %d, expected 0 or EBUSY", r);
            if (r != EBUSY)
                return NULL;
            bm++;
        }
        c_mtry++;
        pthread_mutex_unlock(&m_try);
        while ((r = pthread_spin_trylock(&s_try)) != 0) {
            CHECK(r == EBUSY, "spin trylock returned %d, expected 0 or EBUSY", r);
            if (r != EBUSY)
                return NULL;
            bs++;
        }
        c_stry++;
        pthread_spin_unlock(&s_try);
    }
    __atomic_add_fetch(&busy_m, bm, __ATOMIC_RELAXED);
    __atomic_add_fetch(&busy_s, bs, __ATOMIC_RELAXED);
    return NULL;
}

/* ---- (f) timedlock ---- */

static pthread_mutex_t m_timed = PTHREAD_MUTEX_INITIALIZER;
static uint64_t c_timed, n_timedout, n_locked;

static struct timespec abs_in(uint64_t ns) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec += (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    return ts;
}

static void *timed_worker(void *arg) {
    long id = (long)arg;
    uint64_t locked = 0, timedout = 0;
    long n = iters / 20 + 1;
    for (long i = 0; i < n; i++) {
        /* some holds are long (300 us), the timeouts short (50 us): some expire */
        struct timespec dl = abs_in(50000);
        int r = pthread_mutex_timedlock(&m_timed, &dl);
        if (r == 0) {
            locked++;
            c_timed++;
            if ((i + id) % 8 == 0) {
                uint64_t end = now_ns() + 300000;
                while (now_ns() < end)
                    ;
            }
            pthread_mutex_unlock(&m_timed);
        } else {
            CHECK(r == ETIMEDOUT, "timedlock returned %d, expected 0 or ETIMEDOUT", r);
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            CHECK(now.tv_sec > dl.tv_sec || (now.tv_sec == dl.tv_sec && now.tv_nsec >= dl.tv_nsec),
                  "ETIMEDOUT before the deadline");
            timedout++;
        }
    }
    __atomic_add_fetch(&n_locked, locked, __ATOMIC_RELAXED);
    __atomic_add_fetch(&n_timedout, timedout, __ATOMIC_RELAXED);
    return NULL;
}

static void *timed_once(void *arg) {
    struct timespec dl = abs_in((uint64_t)(intptr_t)arg);
    uint64_t t0 = now_ns();
    int r = pthread_mutex_timedlock(&m_timed, &dl);
    uint64_t waited = now_ns() - t0;
    if (r == 0)
        pthread_mutex_unlock(&m_timed);
    return (void *)(intptr_t)(r == ETIMEDOUT && waited >= 4000000 ? 1 : r == 0 ? 2 : -r);
}

static void test_timedlock(void) {
    run_threads(timed_worker);
    report("(f) timedlock", c_timed, n_locked);
    printf("%-28s locked=%llu timedout=%llu\n", "(f) timedlock outcomes",
           (unsigned long long)n_locked, (unsigned long long)n_timedout);

    /* deterministic expiry: held for 50 ms, timeout 5 ms */
    pthread_mutex_lock(&m_timed);
    pthread_t t;
    void *ret;
    pthread_create(&t, NULL, timed_once, (void *)(intptr_t)5000000);
    pthread_join(t, &ret);
    CHECK((intptr_t)ret == 1, "timedlock on a held mutex: expected ETIMEDOUT after >= 5 ms, got %d",
          (int)(intptr_t)ret);
    /* and success when it is released before the deadline */
    pthread_create(&t, NULL, timed_once, (void *)(intptr_t)2000000000);
    struct timespec ms20 = {0, 20000000};
    nanosleep(&ms20, NULL);
    pthread_mutex_unlock(&m_timed);
    pthread_join(t, &ret);
    CHECK((intptr_t)ret == 2, "timedlock released before the deadline: expected 0, got %d",
          (int)(intptr_t)ret);
    /* an already expired deadline on a free mutex still locks it */
    struct timespec past = {0, 0};
    int r = pthread_mutex_timedlock(&m_timed, &past);
    CHECK(r == 0, "timedlock of a free mutex with a past deadline returned %d", r);
    if (r == 0)
        pthread_mutex_unlock(&m_timed);
    printf("%-28s ETIMEDOUT %s\n", "(f) timedlock codes", failures ? "FAIL" : "ok");
}

/* ---- spin-lock conversion stress ---- */

#define NINIT 4
#define NSTATIC 4
#define NPHASE 6
static pthread_spinlock_t init_locks[NINIT];
#if defined(__x86_64__) || defined(__i386__)
#define NATIVE_SPIN_UNLOCKED 1
#else
#define NATIVE_SPIN_UNLOCKED 0
#endif
/* never passed to pthread_spin_init: statically the native unlocked value */
static pthread_spinlock_t static_locks[NSTATIC] = {NATIVE_SPIN_UNLOCKED, NATIVE_SPIN_UNLOCKED,
                                               NATIVE_SPIN_UNLOCKED, NATIVE_SPIN_UNLOCKED};
static uint64_t init_count[NINIT], static_count[NSTATIC];
static uint64_t init_done[64][NINIT], static_done[64][NSTATIC];
static pthread_barrier_t barrier;

static void *convert_worker(void *arg) {
    long id = (long)arg;
    uint64_t x = (uint64_t)id * 2654435761u + 1;
    long per_phase = iters / NPHASE + 1;
    for (int ph = 0; ph < NPHASE; ph++) {
        for (long i = 0; i < per_phase; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            unsigned pick = (unsigned)(x >> 33);
            int stat = pick & 1;
            unsigned k = (pick >> 1) % (stat ? NSTATIC : NINIT);
            pthread_spinlock_t *l = stat ? &static_locks[k] : &init_locks[k];
            uint64_t *c = stat ? &static_count[k] : &init_count[k];
            uint64_t *done = stat ? &static_done[id][k] : &init_done[id][k];
            switch ((pick >> 8) % 3) {
            case 0: {
                int r = pthread_spin_lock(l);
                CHECK(r == 0, "spin lock returned %d", r);
                break;
            }
            case 1: { /* trylock until it works */
                int r;
                while ((r = pthread_spin_trylock(l)) != 0)
                    if (r != EBUSY) {
                        CHECK(0, "spin trylock returned %d", r);
                        return NULL;
                    }
                break;
            }
            default: /* a single trylock: increment only if it worked */
                if (pthread_spin_trylock(l) != 0)
                    continue;
                break;
            }
            (*c)++;
            (*done)++;
            int r = pthread_spin_unlock(l);
            CHECK(r == 0, "spin unlock returned %d", r);
        }
        pthread_barrier_wait(&barrier);
        if (id == 0) {
            for (int k = 0; k < NINIT; k++) {
                int r = pthread_spin_destroy(&init_locks[k]);
                CHECK(r == 0, "spin destroy returned %d", r);
                r = pthread_spin_init(&init_locks[k], ph % 2 ? PTHREAD_PROCESS_SHARED
                                                            : PTHREAD_PROCESS_PRIVATE);
                CHECK(r == 0, "spin init returned %d", r);
            }
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

/* A spin word the program zeroed itself holds the native encoding: on x86 that is "locked",
 * so trylock must say EBUSY until someone unlocks it; elsewhere it is unlocked. */
static pthread_spinlock_t zero_word;

static void test_zero_word(void) {
    int r = pthread_spin_trylock(&zero_word);
#if NATIVE_SPIN_UNLOCKED == 1
    CHECK(r == EBUSY, "trylock of a zeroed (natively locked) x86 spin word returned %d, "
                      "expected EBUSY", r);
    r = pthread_spin_unlock(&zero_word);
    CHECK(r == 0, "unlock of a zeroed spin word returned %d", r);
    r = pthread_spin_trylock(&zero_word);
#endif
    CHECK(r == 0, "trylock of an unlocked native spin word returned %d", r);
    r = pthread_spin_trylock(&zero_word);
    CHECK(r == EBUSY, "second trylock of a native spin word returned %d, expected EBUSY", r);
    pthread_spin_unlock(&zero_word);
    r = pthread_spin_lock(&zero_word);
    CHECK(r == 0, "lock of a native spin word returned %d", r);
    pthread_spin_unlock(&zero_word);
    printf("%-28s %s\n", "native zeroed spin word", failures ? "FAIL" : "ok");
}

static void test_spin_conversion(void) {
    for (int k = 0; k < NINIT; k++)
        pthread_spin_init(&init_locks[k], PTHREAD_PROCESS_PRIVATE);
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    run_threads(convert_worker);
    pthread_barrier_destroy(&barrier);
    uint64_t got = 0, want = 0;
    for (int k = 0; k < NINIT; k++) {
        uint64_t w = 0;
        for (int t = 0; t < nthreads; t++)
            w += init_done[t][k];
        CHECK(init_count[k] == w, "initialised spin lock %d: count %llu, expected %llu", k,
              (unsigned long long)init_count[k], (unsigned long long)w);
        got += init_count[k];
        want += w;
    }
    report("spin conversion (init'ed)", got, want);
    got = want = 0;
    for (int k = 0; k < NSTATIC; k++) {
        uint64_t w = 0;
        for (int t = 0; t < nthreads; t++)
            w += static_done[t][k];
        CHECK(static_count[k] == w, "static spin lock %d: count %llu, expected %llu", k,
              (unsigned long long)static_count[k], (unsigned long long)w);
        got += static_count[k];
        want += w;
    }
    report("spin conversion (static)", got, want);
    /* every lock must be free at the end */
    for (int k = 0; k < NINIT; k++) {
        int r = pthread_spin_trylock(&init_locks[k]);
        CHECK(r == 0, "initialised spin lock %d not free at the end (trylock %d)", k, r);
        if (r == 0) {
            r = pthread_spin_trylock(&init_locks[k]);
            CHECK(r == EBUSY, "trylock of a held spin lock returned %d, expected EBUSY", r);
            pthread_spin_unlock(&init_locks[k]);
        }
        pthread_spin_destroy(&init_locks[k]);
    }
    for (int k = 0; k < NSTATIC; k++) {
        int r = pthread_spin_trylock(&static_locks[k]);
        CHECK(r == 0, "static spin lock %d not free at the end (trylock %d)", k, r);
        if (r == 0)
            pthread_spin_unlock(&static_locks[k]);
    }
}

/* ---- (g) process-shared locks ---- */

struct shared {
    pthread_mutex_t m;
    pthread_spinlock_t s;
    uint64_t c_m, c_s;
};
static struct shared *shm;

static void *shared_worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        int r = pthread_mutex_lock(&shm->m);
        CHECK(r == 0, "process-shared mutex lock returned %d", r);
        shm->c_m++;
        pthread_mutex_unlock(&shm->m);
        r = pthread_spin_lock(&shm->s);
        CHECK(r == 0, "process-shared spin lock returned %d", r);
        shm->c_s++;
        pthread_spin_unlock(&shm->s);
    }
    return NULL;
}

static void test_process_shared(void) {
    shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&shm->m, &a);
    pthread_mutexattr_destroy(&a);
    pthread_spin_init(&shm->s, PTHREAD_PROCESS_SHARED);
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        exit(2);
    }
    int saved = nthreads;
    nthreads = 2;
    run_threads(shared_worker);
    nthreads = saved;
    if (child == 0)
        _exit(failures ? 1 : 0);
    int st = 0;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        CHECK(0, "process-shared child: wait status %#x", st);
    }
    report("(g) process-shared mutex", shm->c_m, 4 * (uint64_t)iters);
    report("(g) process-shared spin", shm->c_s, 4 * (uint64_t)iters);
    pthread_spin_destroy(&shm->s);
    pthread_mutex_destroy(&shm->m);
    munmap(shm, sizeof *shm);
}

static int want(const char *parts, const char *name) {
    if (strcmp(parts, "all") == 0)
        return 1;
    size_t n = strlen(name);
    for (const char *p = parts; (p = strstr(p, name)) != NULL; p += n)
        if ((p == parts || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atol(argv[2]) : 100000;
    if (nthreads < 1 || nthreads > 64 || iters < 1) {
        fprintf(stderr, "usage: counters_stress [threads] [iters]\n");
        return 2;
    }
    const char *parts = argc > 3 ? argv[3] : "all";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (want(parts, "kinds"))
        test_mutex_kinds();

    if (want(parts, "spin")) {
        pthread_spin_init(&s_lock, PTHREAD_PROCESS_PRIVATE);
        run_threads(spin_worker);
        report("(d) spin lock", c_spin, (uint64_t)nthreads * iters);
        pthread_spin_destroy(&s_lock);
    }

    if (want(parts, "trylock")) {
        pthread_spin_init(&s_try, PTHREAD_PROCESS_PRIVATE);
        run_threads(trylock_worker);
        report("(e) mutex trylock loop", c_mtry, (uint64_t)nthreads * iters);
        report("(e) spin trylock loop", c_stry, (uint64_t)nthreads * iters);
        printf("%-28s mutex EBUSY=%llu spin EBUSY=%llu\n", "(e) trylock failures",
               (unsigned long long)busy_m, (unsigned long long)busy_s);
        pthread_spin_destroy(&s_try);
    }

    if (want(parts, "timed"))
        test_timedlock();
    if (want(parts, "zero"))
        test_zero_word();
    if (want(parts, "convert"))
        test_spin_conversion();
    if (want(parts, "shared"))
        test_process_shared();

    if (failures) {
        printf("counters_stress: %d FAILURES\n", failures);
        return 1;
    }
    printf("counters_stress: ok\n");
    return 0;
}
