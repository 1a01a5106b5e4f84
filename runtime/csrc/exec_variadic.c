/* The variadic exec functions, interposed for the blameprof runtime.
 *
 * glibc's execl/execlp/execle call its internal __execve directly, bypassing any
 * interposed execve, so the runtime would not get to flush the image's profile before it is
 * replaced. Stable Rust cannot define variadic functions, so these three live here: each
 * gathers its arguments into an array on the stack (as glibc does) and calls the vector form,
 * which the runtime interposes. The exported execl/execlp/execle are naked Rust functions
 * that jump here with the caller's registers untouched (see src/exec_variadic.rs). */
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#define COUNT_ARGS(first, ap, n)                                                      \
    do {                                                                              \
        va_list copy;                                                                 \
        va_copy(copy, ap);                                                            \
        n = 1;                                                                        \
        if ((const void *)(first) != NULL)                                            \
            while (va_arg(copy, const char *) != NULL) n++;                           \
        va_end(copy);                                                                 \
    } while (0)

#define FILL_ARGS(argv, first, ap, n)                                                 \
    do {                                                                              \
        argv[0] = (char *)first;                                                      \
        for (size_t i = 1; i < n; i++) argv[i] = va_arg(ap, char *);                  \
        argv[n] = NULL;                                                               \
        if ((const void *)(first) != NULL) (void)va_arg(ap, char *); /* the final NULL */ \
    } while (0)

int blameprof_execl(const char *path, const char *arg, ...) {
    va_list ap;
    size_t n;
    va_start(ap, arg);
    COUNT_ARGS(arg, ap, n);
    char *argv[n + 1];
    FILL_ARGS(argv, arg, ap, n);
    va_end(ap);
    return execv(path, argv);
}

int blameprof_execlp(const char *file, const char *arg, ...) {
    va_list ap;
    size_t n;
    va_start(ap, arg);
    COUNT_ARGS(arg, ap, n);
    char *argv[n + 1];
    FILL_ARGS(argv, arg, ap, n);
    va_end(ap);
    return execvp(file, argv);
}

int blameprof_execle(const char *path, const char *arg, ...) {
    va_list ap;
    size_t n;
    va_start(ap, arg);
    COUNT_ARGS(arg, ap, n);
    char *argv[n + 1];
    FILL_ARGS(argv, arg, ap, n);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
