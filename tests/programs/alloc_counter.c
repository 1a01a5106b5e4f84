/* alloc_counter: a preloadable shared library that counts heap calls made inside the
 * profiler's signal handler.
 *
 * Build: gcc -O2 -g -shared -fPIC -o alloc_counter.so alloc_counter.c -ldl
 * Use:   LD_PRELOAD=alloc_counter.so blameprof run ... (the profiler prepends its runtime)
 *
 * Every malloc-family call asks `int blameprof_rt_in_signal_handler(void)` (exported by the
 * profiler runtime, looked up once with dlsym(RTLD_DEFAULT) outside any allocation recursion;
 * absent means 0) and counts the calls made while it returns nonzero. At exit it writes
 *   alloc_counter: pid=P exe=PATH probe=found|missing in_handler_allocs=N total_calls=M
 * to stderr. free(NULL) is not counted; everything else (free included) is.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*aligned_alloc_fn)(size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef void *(*valloc_fn)(size_t);
typedef int (*probe_fn)(void);

static malloc_fn real_malloc;
static calloc_fn real_calloc;
static realloc_fn real_realloc;
static free_fn real_free;
static posix_memalign_fn real_posix_memalign;
static aligned_alloc_fn real_aligned_alloc;
static memalign_fn real_memalign;
static valloc_fn real_valloc;
static valloc_fn real_pvalloc;

/* 0 = not looked up, 1 = lookup in progress, 2 = done (probe may still be NULL). */
static atomic_int probe_state;
static probe_fn probe;
static atomic_ulong in_handler_calls, total_calls;
static atomic_int resolved;

static __thread int guard __attribute__((tls_model("initial-exec")));

/* Bootstrap arena for allocations made by dlsym() before the real functions are known. */
static char boot_buf[64 * 1024] __attribute__((aligned(64)));
static atomic_size_t boot_used;

static int is_boot(const void *p)
{
    return (const char *)p >= boot_buf && (const char *)p < boot_buf + sizeof boot_buf;
}

static void *boot_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    for (;;) {
        size_t used = atomic_load(&boot_used);
        size_t start = (used + align - 1) & ~(align - 1);
        if (start + n > sizeof boot_buf)
            return NULL;
        if (atomic_compare_exchange_weak(&boot_used, &used, start + n))
            return boot_buf + start; /* static storage is zeroed: fine for calloc */
    }
}

static void resolve_real(void)
{
    if (atomic_load_explicit(&resolved, memory_order_acquire))
        return;
    guard++;
    real_malloc = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
    real_calloc = (calloc_fn)dlsym(RTLD_NEXT, "calloc");
    real_realloc = (realloc_fn)dlsym(RTLD_NEXT, "realloc");
    real_free = (free_fn)dlsym(RTLD_NEXT, "free");
    real_posix_memalign = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (aligned_alloc_fn)dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = (memalign_fn)dlsym(RTLD_NEXT, "memalign");
    real_valloc = (valloc_fn)dlsym(RTLD_NEXT, "valloc");
    real_pvalloc = (valloc_fn)dlsym(RTLD_NEXT, "pvalloc");
    guard--;
    if (real_malloc && real_calloc && real_realloc && real_free)
        atomic_store_explicit(&resolved, 1, memory_order_release);
}

/* Records one heap call; returns nonzero if the real functions are usable. */
static int note_call(void)
{
    if (guard) /* inside our own dlsym/probe: bootstrap path, not counted */
        return atomic_load(&resolved);
    guard++;
    resolve_real();
    int expected = 0;
    if (atomic_load(&probe_state) == 0 && atomic_compare_exchange_strong(&probe_state, &expected, 1)) {
        probe = (probe_fn)dlsym(RTLD_DEFAULT, "blameprof_rt_in_signal_handler");
        atomic_store(&probe_state, 2);
    }
    atomic_fetch_add(&total_calls, 1);
    if (atomic_load(&probe_state) == 2 && probe && probe())
        atomic_fetch_add(&in_handler_calls, 1);
    guard--;
    return atomic_load(&resolved);
}

void *malloc(size_t n)
{
    if (!note_call())
        return boot_alloc(n, 16);
    return real_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    if (!note_call()) {
        if (size && n > SIZE_MAX / size)
            return NULL;
        return boot_alloc(n * size, 16);
    }
    return real_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    if (!note_call() || is_boot(p)) {
        void *q = atomic_load(&resolved) ? real_malloc(n) : boot_alloc(n, 16);
        if (q && p) {
            size_t avail = (size_t)(boot_buf + sizeof boot_buf - (char *)p);
            memcpy(q, p, n < avail ? n : avail);
        }
        return q;
    }
    return real_realloc(p, n);
}

void free(void *p)
{
    if (!p || is_boot(p))
        return;
    note_call();
    real_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!note_call() || !real_posix_memalign) {
        *out = boot_alloc(n, align);
        return *out ? 0 : 12 /* ENOMEM */;
    }
    return real_posix_memalign(out, align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    if (!note_call() || !real_aligned_alloc)
        return boot_alloc(n, align);
    return real_aligned_alloc(align, n);
}

void *memalign(size_t align, size_t n)
{
    if (!note_call() || !real_memalign)
        return boot_alloc(n, align);
    return real_memalign(align, n);
}

void *valloc(size_t n)
{
    if (!note_call() || !real_valloc)
        return boot_alloc(n, 4096);
    return real_valloc(n);
}

void *pvalloc(size_t n)
{
    if (!note_call() || !real_pvalloc)
        return boot_alloc((n + 4095) & ~(size_t)4095, 4096);
    return real_pvalloc(n);
}

/* Resolve early, so the first lookup never happens inside somebody's signal handler. */
__attribute__((constructor)) static void alloc_counter_init(void)
{
    note_call();
    atomic_fetch_sub(&total_calls, 1);
}

__attribute__((destructor)) static void alloc_counter_report(void)
{
    char exe[512];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    char line[800];
    int n = snprintf(line, sizeof line,
                     "alloc_counter: pid=%d exe=%s probe=%s in_handler_allocs=%lu total_calls=%lu\n",
                     (int)getpid(), exe, probe ? "found" : "missing",
                     (unsigned long)atomic_load(&in_handler_calls),
                     (unsigned long)atomic_load(&total_calls));
    if (n > 0)
        (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
