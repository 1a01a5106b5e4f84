/* tailcall_nocfi: code the unwinder has no unwind information for, so that nothing proves
 * where it was called from (the companion of tailcall.c: what call paths can and cannot
 * recover).
 *
 * usage: tailcall_nocfi [CPU_SECONDS_PER_PHASE=0.3]
 *
 * Phases, each repeated until it has used its CPU time:
 *   asm_phase: calls spin_nocfi, hand-written assembly without CFI directives (the module
 *              has no .eh_frame entry for it), which spins;
 *   jit_phase: calls machine code copied into an anonymous executable mapping (in no
 *              module), which spins, then calls back into jit_callback, which spins too.
 *
 * Ground truth (CLOCK_THREAD_CPUTIME_ID); the last stdout line is
 *   truth asm_ns=A jit_ns=J callback_ns=C
 * where J is the time in the mapped code itself (its calls minus the callback's time).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* spin_nocfi(n): n iterations of a loop (n > 0). No .cfi_startproc: no unwind entry. */
__asm__(".text\n"
        ".globl spin_nocfi\n"
        ".type spin_nocfi, @function\n"
        "spin_nocfi:\n"
        "    mov %rdi, %rax\n"
        "1:  sub $1, %rax\n"
        "    jnz 1b\n"
        "    ret\n"
        ".size spin_nocfi, .-spin_nocfi\n");
void spin_nocfi(long n);

static unsigned long long asm_ns, jit_ns, callback_ns;
static volatile unsigned long sink;

static unsigned long long cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

__attribute__((noipa)) void jit_callback(long n)
{
    unsigned long long t0 = cpu_ns();
    unsigned long x = 5;
    for (long i = 0; i < n; i++) {
        x = x * 7 + (unsigned long)i;
        sink = x;
    }
    callback_ns += cpu_ns() - t0;
}

/* jit(spins, callback_iterations): spins, then calls jit_callback(callback_iterations). */
typedef void (*jit_fn)(long, long);

static jit_fn make_jit(void)
{
    static const unsigned char head[] = {
        0x48, 0x89, 0xf8,       /* mov %rdi,%rax */
        0x48, 0x83, 0xe8, 0x01, /* 1: sub $1,%rax */
        0x75, 0xfa,             /* jnz 1b */
        0x48, 0x83, 0xec, 0x08, /* sub $8,%rsp (align the stack for the call) */
        0x48, 0x89, 0xf7,       /* mov %rsi,%rdi */
        0x48, 0xb8,             /* movabs $jit_callback,%rax */
    };
    static const unsigned char tail[] = {
        0xff, 0xd0,             /* call *%rax */
        0x48, 0x83, 0xc4, 0x08, /* add $8,%rsp */
        0xc3,                   /* ret */
    };
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    uint64_t callback = (uint64_t)(uintptr_t)jit_callback;
    memcpy(code, head, sizeof head);
    memcpy(code + sizeof head, &callback, sizeof callback);
    memcpy(code + sizeof head + sizeof callback, tail, sizeof tail);
    return (jit_fn)(void *)code;
}

__attribute__((noipa)) void asm_phase(double secs)
{
    unsigned long long start = cpu_ns(), end = start + (unsigned long long)(secs * 1e9);
    while (cpu_ns() < end)
        spin_nocfi(200000);
    asm_ns += cpu_ns() - start;
}

__attribute__((noipa)) void jit_phase(jit_fn jit, double secs)
{
    unsigned long long start = cpu_ns(), end = start + (unsigned long long)(secs * 1e9);
    unsigned long long before = callback_ns;
    while (cpu_ns() < end)
        jit(200000, 100000);
    jit_ns += cpu_ns() - start - (callback_ns - before);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.3;
    asm_phase(secs);
    jit_phase(make_jit(), secs);
    printf("truth asm_ns=%llu jit_ns=%llu callback_ns=%llu\n", asm_ns, jit_ns, callback_ns);
    return 0;
}
