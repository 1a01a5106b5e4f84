/* file_limit: a program that limits the size of the files it may write (RLIMIT_FSIZE, as a
 * shell's `ulimit -f` does), then computes: the profile's part stops growing at the limit,
 * as on a full disk. It keeps SIGXFSZ's default action (death): a write past the limit by
 * the runtime would kill it.
 *
 * Usage: file_limit [limit_kib=48] [cpu_ms=1500]
 * Prints "truth crunch_ns=N" (its CPU time in crunch()).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "truth_log.h" /* cpu_ns() */

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t crunch(uint64_t budget_ns) {
    uint64_t t0 = cpu_ns(), x = sink;
    while (cpu_ns() - t0 < budget_ns)
        for (int i = 0; i < 5000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
    return cpu_ns() - t0;
}

int main(int argc, char **argv) {
    rlim_t limit = (rlim_t)(argc > 1 ? atoi(argv[1]) : 48) << 10;
    uint64_t budget = (uint64_t)(argc > 2 ? atoi(argv[2]) : 1500) * 1000000ull;
    struct rlimit r = {limit, limit};
    if (setrlimit(RLIMIT_FSIZE, &r) != 0) {
        perror("setrlimit");
        return 1;
    }
    uint64_t spent = crunch(budget);
    printf("truth crunch_ns=%llu\n", (unsigned long long)spent);
    return 0;
}
