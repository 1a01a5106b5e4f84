/* mutex_fields: what a program can see of its mutexes must be the same profiled or not (the
 * runtime takes glibc's fast path for plain mutexes itself). Prints, deterministically:
 *   - a plain mutex's fields while held and after (owner = the holder's thread id, users,
 *     lock word), trylock's EBUSY, destroy's result, while the process is single-threaded
 *     (glibc then uses plain loads and stores, and so does the runtime);
 *   - the same counted by 4 threads contending on one plain mutex (exact total, fields back
 *     to zero), with a condition variable handing a token around the same mutex (glibc's
 *     internal unlock and relock mixed with the interposed ones);
 *   - errorcheck (EDEADLK, EPERM) and recursive (count, EPERM) mutexes;
 *   - a fork child's hold (its own thread id as owner).
 * On stderr, not compared: "inline: N", what `blameprof_rt_plain_mutex_inline()` says when
 * the runtime is loaded (1: its fast path is on), or "inline: none".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/single_threaded.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 200000
#define HANDOFFS 2000

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
static long counter;
static int turn;
static int owner_ok = 1;

static void fields(const char *what, pthread_mutex_t *m)
{
    printf("%s: lock=%d owner=%s users=%u count=%u\n", what, m->__data.__lock,
           m->__data.__owner == 0 ? "0" : (m->__data.__owner == gettid() ? "me" : "other"),
           m->__data.__nusers, m->__data.__count);
}

static void *contend(void *arg)
{
    int me = (int)(long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&shared);
        if (shared.__data.__owner != gettid())
            owner_ok = 0;
        counter++;
        pthread_mutex_unlock(&shared);
    }
    for (int i = 0; i < HANDOFFS; i++) {
        pthread_mutex_lock(&shared);
        while (turn != me)
            pthread_cond_wait(&turn_cv, &shared);
        if (shared.__data.__owner != gettid())
            owner_ok = 0;
        turn = (turn + 1) % THREADS;
        counter++;
        pthread_cond_broadcast(&turn_cv);
        pthread_mutex_unlock(&shared);
    }
    return NULL;
}

int main(void)
{
    int (*probe)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "blameprof_rt_plain_mutex_inline");
    if (probe)
        fprintf(stderr, "inline: %d\n", probe());
    else
        fprintf(stderr, "inline: none\n");

    /* Single-threaded so far (profiled too: the runtime starts no thread), so glibc, and the
     * runtime's fast path, take and release a plain mutex without atomic instructions. */
    printf("single threaded: %d\n", __libc_single_threaded != 0);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    fields("plain fresh", &m);
    printf("lock: %d\n", pthread_mutex_lock(&m));
    fields("plain held", &m);
    printf("trylock held: %s\n", pthread_mutex_trylock(&m) == EBUSY ? "EBUSY" : "other");
    printf("unlock: %d\n", pthread_mutex_unlock(&m));
    fields("plain released", &m);
    printf("trylock free: %d\n", pthread_mutex_trylock(&m));
    fields("plain tried", &m);
    printf("unlock: %d\n", pthread_mutex_unlock(&m));
    printf("destroy: %d\n", pthread_mutex_destroy(&m));

    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, contend, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("contended: counter=%ld owner_ok=%d\n", counter, owner_ok);
    fields("contended after", &shared);
    printf("destroy: %d\n", pthread_mutex_destroy(&shared));

    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_t e;
    pthread_mutex_init(&e, &a);
    printf("errorcheck lock: %d\n", pthread_mutex_lock(&e));
    printf("errorcheck relock: %s\n", pthread_mutex_lock(&e) == EDEADLK ? "EDEADLK" : "other");
    fields("errorcheck held", &e);
    printf("errorcheck unlock: %d\n", pthread_mutex_unlock(&e));
    printf("errorcheck unlock again: %s\n", pthread_mutex_unlock(&e) == EPERM ? "EPERM" : "other");
    printf("destroy: %d\n", pthread_mutex_destroy(&e));

    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_t r;
    pthread_mutex_init(&r, &a);
    for (int i = 0; i < 3; i++)
        pthread_mutex_lock(&r);
    fields("recursive held 3", &r);
    for (int i = 0; i < 3; i++)
        pthread_mutex_unlock(&r);
    printf("recursive unlock again: %s\n", pthread_mutex_unlock(&r) == EPERM ? "EPERM" : "other");
    fields("recursive released", &r);
    printf("destroy: %d\n", pthread_mutex_destroy(&r));

    pthread_mutex_t f = PTHREAD_MUTEX_INITIALIZER;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        pthread_mutex_lock(&f);
        fields("fork child held", &f);
        pthread_mutex_unlock(&f);
        fields("fork child released", &f);
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    printf("child status: %d\n", WEXITSTATUS(status));
    return 0;
}
