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
 *   kernel [CPU_SECONDS=0.4]
 *       a pthread spends CPU_SECONDS of its CPU time in kernel_work, almost all of it in the
 *       kernel: it reads /dev/zero a megabyte at a time (the kernel clears the buffer) and
 *       computes in user mode for about 1% of its time (its own getrusage keeps the share).
 *       A perf task clock counts user-mode time only, so such a thread is sampled a few times
 *       in all. Prints "truth kernel_work_ns=N user_ns=U" (N: the thread CPU time of the
 *       call, U: its user-mode part).
 * Exit status 0, or 1 after a message on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

/* ---- kernel ---- */

static unsigned long long kernel_ns_want, kernel_ns_took, kernel_user_ns;

static unsigned long long user_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (unsigned long long)ru.ru_utime.tv_sec * 1000000000ULL +
           (unsigned long long)ru.ru_utime.tv_usec * 1000ULL;
}

__attribute__((noinline, noclone)) unsigned long long kernel_work(unsigned long long ns) {
    static char buf[1 << 20];
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0) {
        fail("open /dev/zero", errno);
        exit(1);
    }
    unsigned long long start = thread_cpu_ns(), user0 = user_ns(), now = start;
    volatile unsigned long x = 1;
    while (now - start < ns) {
        if (read(fd, buf, sizeof buf) < 0) {
            fail("read /dev/zero", errno);
            exit(1);
        }
        now = thread_cpu_ns();
        /* About 1% in user mode: compute while the user part is under it. */
        while ((user_ns() - user0) * 100 < now - start)
            for (long i = 0; i < 20000; i++)
                x = x * 13UL + (unsigned long)i;
    }
    kernel_user_ns = user_ns() - user0;
    close(fd);
    return thread_cpu_ns() - start;
}

static void *kernel_thread(void *unused) {
    (void)unused;
    kernel_ns_took = kernel_work(kernel_ns_want);
    return NULL;
}

static int run_kernel(double secs) {
    kernel_ns_want = (unsigned long long)(secs * 1e9);
    pthread_t t;
    int rc = pthread_create(&t, NULL, kernel_thread, NULL);
    if (rc)
        return fail("pthread_create", rc);
    pthread_join(t, NULL);
    printf("truth kernel_work_ns=%llu user_ns=%llu\n", kernel_ns_took, kernel_user_ns);
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
    if (strcmp(mode, "kernel") == 0)
        return run_kernel(argc > 2 ? atof(argv[2]) : 0.4);
    fprintf(stderr, "usage: thread_life short|clone|rename|kernel [ARGS]\n");
    return 2;
}
