/* peak_rss: the scoreboard's peak-RSS wrapper.
 *
 * Usage: peak_rss FILE -- program args...
 *
 * Forks and execs the program, waits for it, writes its peak RSS (KiB, `ru_maxrss` from
 * wait4) to FILE and exits with its status (128 + signal if killed). Placed between
 * `blameprof run --` and the program, the CLI's own memory is left out.
 *
 * Written in C and kept small on purpose: a child's `ru_maxrss` includes the memory it had
 * before its exec, which a fork copies from its parent. A Rust wrapper (std, an allocator,
 * the profiler's runtime preloaded into it too) put a floor of about 1.5 MiB under every
 * measurement and hid the runtime's cost on the smallest programs. Not vfork: a vfork child
 * takes its parent's whole peak with it through the exec.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: peak_rss FILE -- program args...\n");
        return 255;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("peak_rss: fork");
        return 255;
    }
    if (pid == 0) {
        execvp(argv[3], argv + 3);
        perror("peak_rss: exec");
        _exit(127);
    }
    int status;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("peak_rss: wait4");
            return 255;
        }
    }
    FILE *out = fopen(argv[1], "w");
    if (!out || fprintf(out, "%ld\n", usage.ru_maxrss) < 0 || fclose(out) != 0) {
        perror("peak_rss: cannot write the result");
        return 255;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
