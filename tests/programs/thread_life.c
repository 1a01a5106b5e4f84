/* thread_life: threads that live briefly, that pthread does not know, and that rename
 * themselves; each computes in a function of its own that measures its own CPU time.
 *
 * usage: thread_life MODE [ARGS]
 *   short [THREADS=400] [CPU_US=3000]
 *       THREADS threads, 8 alive at a time, each computing for CPU_US microseconds of its CPU
 *       time in short_work and exiting (half return from their routine, half call
 *       pthread_exit); prints "truth short_work_ns=N threads=THREADS" (N: the sum).
 *   clone [CPU_SECONDS=0.4]
 *       one thread started by raw clone(2) (no pthread_create, no TLS of its own) computes in
 *       clone_work while the main thread computes in main_work; the main thread waits for it
 *       with the kernel's CLONE_CHILD_CLEARTID futex wake. Prints
 *       "truth main_work_ns=N clone_work_ns=M".
 *   rename [CPU_SECONDS=0.4]
 *       a pthread renames itself "renamed-worker" (pthread_setname_np) after it started, then
 *       computes in renamed_work; the main thread renames itself "renamed-main" and computes
 *       in main_work. Prints "truth renamed_work_ns=N main_work_ns=M" and
 *       "thread_life: names renamed-worker renamed-main".
 * Exit status 0, or 1 after a message on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned long long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

/* Spins for `ns` of the calling thread's CPU time; returns the CPU time it took. */
#define SPIN_FN(name, mult)                                                                    \
    __attribute__((noinline, noclone)) unsigned long long name(unsigned long long ns) {        \
        unsigned long long start = thread_cpu_ns(), until = start + ns;                        \
        volatile unsigned long x = 1;                                                          \
        while (thread_cpu_ns() < until)                                                        \
            for (long i = 0; i < 2000; i++)                                                    \
                x = x * (mult) + (unsigned long)i;                                             \
        return thread_cpu_ns() - start;                                                        \
    }

SPIN_FN(short_work, 3UL)
SPIN_FN(clone_work, 5UL)
SPIN_FN(main_work, 7UL)
SPIN_FN(renamed_work, 11UL)

static int fail(const char *what, int err) {
    fprintf(stderr, "thread_life: %s: %s\n", what, strerror(err));
    return 1;
}

/* ---- short ---- */

static unsigned long long short_ns_each, *took;

static void *short_thread(void *slot) {
    unsigned long long *mine = slot;
    *mine = short_work(short_ns_each);
    if ((mine - took) % 2 == 1)
        pthread_exit(NULL);
    return NULL;
}

static int run_short(int threads, long cpu_us) {
    enum { ALIVE = 8 };
    short_ns_each = (unsigned long long)cpu_us * 1000ULL;
    took = calloc((size_t)threads, sizeof *took);
    if (!took)
        return fail("calloc", errno);
    for (int base = 0; base < threads; base += ALIVE) {
        pthread_t t[ALIVE];
        int n = threads - base < ALIVE ? threads - base : ALIVE;
        for (int i = 0; i < n; i++) {
            int rc = pthread_create(&t[i], NULL, short_thread, &took[base + i]);
            if (rc)
                return fail("pthread_create", rc);
        }
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
    }
    unsigned long long sum = 0;
    for (int i = 0; i < threads; i++)
        sum += took[i];
    printf("truth short_work_ns=%llu threads=%d\n", sum, threads);
    return 0;
}

/* ---- clone ---- */

static unsigned long long clone_ns_want;
static volatile unsigned long long clone_ns_took;

/* Runs on a stack of its own, with the creator's TLS: it calls nothing that touches errno
 * or other thread-local state, and ends with the exit system call (not pthread_exit). */
static int clone_thread(void *unused) {
    (void)unused;
    clone_ns_took = clone_work(clone_ns_want);
    syscall(SYS_exit, 0);
    return 0;
}

static int run_clone(double secs) {
    enum { STACK = 1 << 20 };
    char *stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED)
        return fail("mmap", errno);
    clone_ns_want = (unsigned long long)(secs * 1e9);
    static volatile pid_t child_tid; /* the kernel zeroes it and wakes us when it exits */
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
    pid_t tid = clone(clone_thread, stack + STACK, flags, NULL, (pid_t *)&child_tid, NULL,
                      (pid_t *)&child_tid);
    if (tid < 0)
        return fail("clone", errno);
    unsigned long long main_ns = main_work(clone_ns_want);
    pid_t seen;
    while ((seen = child_tid) != 0)
        syscall(SYS_futex, &child_tid, FUTEX_WAIT, seen, NULL, NULL, 0);
    printf("truth main_work_ns=%llu clone_work_ns=%llu\n", main_ns, clone_ns_took);
    return 0;
}

/* ---- rename ---- */

static unsigned long long rename_ns_want, renamed_ns_took;

static void *renamed_thread(void *unused) {
    (void)unused;
    int rc = pthread_setname_np(pthread_self(), "renamed-worker");
    if (rc) {
        fail("pthread_setname_np", rc);
        exit(1);
    }
    renamed_ns_took = renamed_work(rename_ns_want);
    return NULL;
}

static int run_rename(double secs) {
    rename_ns_want = (unsigned long long)(secs * 1e9);
    pthread_t t;
    int rc = pthread_create(&t, NULL, renamed_thread, NULL);
    if (rc)
        return fail("pthread_create", rc);
    rc = pthread_setname_np(pthread_self(), "renamed-main");
    if (rc)
        return fail("pthread_setname_np", rc);
    unsigned long long main_ns = main_work(rename_ns_want);
    pthread_join(t, NULL);
    char me[16] = "";
    pthread_getname_np(pthread_self(), me, sizeof me);
    printf("truth renamed_work_ns=%llu main_work_ns=%llu\n", renamed_ns_took, main_ns);
    printf("thread_life: names renamed-worker %s\n", me);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "short") == 0)
        return run_short(argc > 2 ? atoi(argv[2]) : 400, argc > 3 ? atol(argv[3]) : 3000);
    if (strcmp(mode, "clone") == 0)
        return run_clone(argc > 2 ? atof(argv[2]) : 0.4);
    if (strcmp(mode, "rename") == 0)
        return run_rename(argc > 2 ? atof(argv[2]) : 0.4);
    fprintf(stderr, "usage: thread_life short|clone|rename [ARGS]\n");
    return 2;
}
