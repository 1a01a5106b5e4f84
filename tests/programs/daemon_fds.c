/* daemon_fds: a daemon-style program that does something to every descriptor above 2 at
 * start, as systemd services, sshd and many servers do, then runs contended threads: the
 * profile must survive it whole.
 *
 * Usage: daemon_fds MODE [rounds=150]
 * MODE says what is done to descriptors 3 and up (stdout is then reopened with dup2):
 *   close_range  close_range(3, ~0U, 0)
 *   closefrom    closefrom(3)
 *   close_loop   close(fd) for every fd below the descriptor limit
 *   dup2         dup2(/dev/null, fd) for every fd from 3 to 1023
 *   dup3         dup3(/dev/null, fd, O_CLOEXEC) for every fd from 3 to 1023
 *   fcntl        clears FD_CLOEXEC and the status flags (F_SETFL 0) of every open fd, then
 *                re-executes itself (MODE exec_child), which checks that no descriptor of the
 *                first image's part crossed the exec
 *   raw_close    syscall(SYS_close_range, 3, ~0U, 0): past any interposition
 *   raw_dup2     syscall(SYS_dup2, /dev/null, fd) for every fd from 3 to 1023, and closes them
 *                after the workload
 * MODE_late (close_range_late, dup2_late): the same, done while the threads run.
 * Then THREADS threads take `table_lock` ROUNDS times each and compute in update_table()
 * inside it (HOLD_NS of CPU on average), and in prepare_entry() outside it (the same). Each
 * piece lasts between half and one and a half HOLD_NS, drawn from a fixed sequence per
 * thread: with pieces of one length, a sampling period near it (1 ms at 1000 Hz) would meet
 * every round at nearly the same phase, and one function's share of the samples would be
 * that phase's, not its share of the time.
 *
 * Prints "mode=.. threads=.. rounds=.." (deterministic; after the exec, with " leaked_parts=N",
 * the descriptors of the first image's part still open) and
 * "truth update_ns=.. prepare_ns=.. wait_ns=.. blame_ns=.." (CPU time inside, outside, the
 * time spent in pthread_mutex_lock, and the blame truth: over every wait, its overlap with
 * the holds of table_lock, from return of the lock call to the unlock call, as
 * truth_log.h's truth_mutex_totals() has it; a woken waiter not yet running overlaps no
 * hold, and on a loaded machine such waits are long).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "truth_log.h" /* now_ns(), cpu_ns() */

#define THREADS 3
#define HOLD_NS 1000000ull

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int rounds = 150;
static volatile uint64_t sink;

struct counts {
    uint64_t update_ns, prepare_ns, wait_ns;
    uint64_t draw; /* the state of this thread's sequence of piece lengths */
    tlog_t *log;
};

/* The next piece's length: uniform in [HOLD_NS / 2, 3 * HOLD_NS / 2), a 64-bit LCG's high
 * bits. */
static uint64_t piece_ns(struct counts *c) {
    c->draw = c->draw * 6364136223846793005ull + 1442695040888963407ull;
    return HOLD_NS / 2 + (c->draw >> 33) % HOLD_NS;
}

static void compute(uint64_t ns) {
    uint64_t x = sink, start = cpu_ns();
    while (cpu_ns() - start < ns)
        for (int i = 0; i < 2000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
}

__attribute__((noinline)) void update_table(struct counts *c) {
    uint64_t t0 = cpu_ns();
    compute(piece_ns(c));
    c->update_ns += cpu_ns() - t0;
}

__attribute__((noinline)) void prepare_entry(struct counts *c) {
    uint64_t t0 = cpu_ns();
    compute(piece_ns(c));
    c->prepare_ns += cpu_ns() - t0;
}

static void *worker(void *arg) {
    struct counts *c = arg;
    for (int i = 0; i < rounds; i++) {
        prepare_entry(c);
        uint64_t w0 = now_ns();
        pthread_mutex_lock(&table_lock);
        uint64_t h0 = now_ns();
        c->wait_ns += h0 - w0;
        update_table(c);
        uint64_t h1 = now_ns();
        pthread_mutex_unlock(&table_lock);
        log_iv(c->log, 0, w0, h0, h1);
    }
    return NULL;
}

/* Descriptors open now that name a part of the first image (`<pid>.bpp`). */
static int leaked_parts(void) {
    char want[64], link[4096], path[64];
    snprintf(want, sizeof want, "/%d.bpp", (int)getpid());
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len <= 0)
            continue;
        link[len] = 0;
        size_t k = strlen(want);
        if ((size_t)len >= k && strcmp(link + len - k, want) == 0)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static int fd_limit(void) {
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    return r.rlim_cur > 65536 ? 65536 : (int)r.rlim_cur;
}

static void unsettle(const char *mode, char *self, char *rounds_arg) {
    int devnull = open("/dev/null", O_RDWR);
    if (!strcmp(mode, "close_range")) {
        close_range(3, ~0U, 0);
    } else if (!strcmp(mode, "closefrom")) {
        closefrom(3);
    } else if (!strcmp(mode, "close_loop")) {
        for (int fd = 3; fd < fd_limit(); fd++)
            close(fd);
    } else if (!strcmp(mode, "dup2")) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != devnull)
                dup2(devnull, fd);
    } else if (!strcmp(mode, "dup3")) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != devnull)
                dup3(devnull, fd, O_CLOEXEC);
    } else if (!strcmp(mode, "fcntl")) {
        for (int fd = 3; fd < 1024; fd++) {
            fcntl(fd, F_SETFD, 0);
            fcntl(fd, F_SETFL, 0);
        }
        char *args[] = {self, "exec_child", rounds_arg, NULL};
        execv("/proc/self/exe", args);
        perror("execv");
        exit(3);
    } else if (!strcmp(mode, "raw_close")) {
        syscall(SYS_close_range, 3, ~0U, 0);
    } else if (!strcmp(mode, "raw_dup2")) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != devnull)
                syscall(SYS_dup2, devnull, fd);
    } else if (strcmp(mode, "exec_child") != 0) {
        fprintf(stderr, "unknown mode %s\n", mode);
        exit(2);
    }
    /* Reopen stdout, as daemons do (here onto what it was). */
    int out = dup(1);
    dup2(out, 1);
    close(out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: daemon_fds MODE [rounds]\n");
        return 2;
    }
    char rounds_arg[16];
    if (argc > 2)
        rounds = atoi(argv[2]);
    snprintf(rounds_arg, sizeof rounds_arg, "%d", rounds);
    /* MODE_late: the same once the workers run (their perf timers' descriptors exist). */
    char mode[32];
    snprintf(mode, sizeof mode, "%s", argv[1]);
    char *late = strstr(mode, "_late");
    if (late)
        *late = 0;
    else
        unsettle(mode, argv[0], rounds_arg);
    pthread_t t[THREADS];
    struct counts c[THREADS] = {0};
    tlog_t *logs = truth_alloc_logs(THREADS, (size_t)rounds);
    if (!logs)
        return 2;
    for (int i = 0; i < THREADS; i++) {
        c[i].log = &logs[i];
        c[i].draw = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        pthread_create(&t[i], NULL, worker, &c[i]);
    }
    if (late) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        unsettle(mode, argv[0], rounds_arg);
    }
    struct counts sum = {0};
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        sum.update_ns += c[i].update_ns;
        sum.prepare_ns += c[i].prepare_ns;
        sum.wait_ns += c[i].wait_ns;
    }
    if (!strcmp(argv[1], "raw_dup2"))
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    printf("mode=%s threads=%d rounds=%d", argv[1], THREADS, rounds);
    if (!strcmp(argv[1], "exec_child"))
        printf(" leaked_parts=%d", leaked_parts());
    printf("\n");
    uint64_t blame[1] = {0}, idle[1] = {0}, held[1] = {0}, count[1] = {0};
    if (truth_mutex_totals(logs, THREADS, "daemon_fds", blame, idle, held, count, NULL) != 0)
        return 2;
    printf("truth update_ns=%llu prepare_ns=%llu wait_ns=%llu blame_ns=%llu\n",
           (unsigned long long)sum.update_ns, (unsigned long long)sum.prepare_ns,
           (unsigned long long)sum.wait_ns, (unsigned long long)blame[0]);
    return 0;
}
