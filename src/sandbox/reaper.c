/* runbox-init: what a sandbox's init becomes once its program runs.
 *
 * Init is a clone of runbox: until it has built the root and started the
 * program it needs runbox's code, but from then on it only reaps. It runs
 * in runbox's own memory, cloned from a starter thread that sleeps until
 * init executes (starter.h), or, with RUNBOX_INIT=copy, in a copy of it
 * that, kept, would have been torn down on the way to every result. Either
 * way init executes this small static program right after the program
 * started (before the program's code arrives, in a prepared sandbox), and
 * what exits at the end is this.
 *
 *   runbox-init STATUS_FD PROGRAM_PID
 *
 * As PID 1 of the sandbox's PID namespace it reaps every process; when
 * PROGRAM_PID ends it writes the rbx_exit_report to STATUS_FD and exits,
 * which makes the kernel kill whatever else is left in the namespace.
 *
 * It is its own start, with no C library (on x86-64 and arm64; elsewhere
 * it is a static program of libc's): a static libc's start alone cost
 * 0.43 ms of CPU per execution here (`perf stat -r 300`), most of it
 * asking the CPU what it is (cpuid, which traps to the hypervisor in a
 * VM), against 0.08 ms for a program that only exits. */
#if defined(__x86_64__) || defined(__aarch64__)
#define RBX_FREESTANDING 1
#include <errno.h>
#include <linux/prctl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

static long sys(long nr, long a, long b, long c, long d)
{
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
#else
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#endif
}

static _Noreturn void sys_exit(int code)
{
    for (;;)
        sys(SYS_exit_group, code, 0, 0, 0);
}

static long sys_wait4(int *status, struct rusage *usage)
{
    return sys(SYS_wait4, -1, (long)status, __WALL, (long)usage);
}

static long sys_wait4_nohang(int *status)
{
    return sys(SYS_wait4, -1, (long)status, __WALL | WNOHANG, 0);
}

#define RBX_REAP_WAIT4 sys_wait4
#define RBX_REAP_WAIT4_NOHANG sys_wait4_nohang
#define RBX_REAP_WRITE(fd, data, len) ((void)sys(SYS_write, fd, (long)(data), (long)(len), 0))
#define RBX_REAP_EXIT sys_exit

/* What the compiler may call for a structure's copy, there being no libc.
 * Byte by byte through volatile: a compiler would make a plain loop a call
 * to memcpy, which is this. */
void *memcpy(void *to, const void *from, size_t n);
void *memset(void *to, int c, size_t n);

void *memcpy(void *to, const void *from, size_t n)
{
    volatile unsigned char *t = to;
    const volatile unsigned char *f = from;
    while (n--)
        *t++ = *f++;
    return to;
}

void *memset(void *to, int c, size_t n)
{
    volatile unsigned char *t = to;
    while (n--)
        *t++ = (unsigned char)c;
    return to;
}
#else
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "sandbox/exit_report.h"

/* A descriptor or pid in decimal, else -1. */
static long number(const char *text)
{
    long n = 0;
    if (!text || !*text)
        return -1;
    for (; *text; text++) {
        if (*text < '0' || *text > '9' || n > 100000000)
            return -1;
        n = n * 10 + (*text - '0');
    }
    return n;
}

static int run(int argc, char **argv)
{
    long status_fd = argc == 3 ? number(argv[1]) : -1;
    long program = argc == 3 ? number(argv[2]) : -1;
    if (status_fd < 0 || program <= 0)
        return 2;
    /* As init was: never outliving runbox (execve keeps the parent-death
     * signal, but set it again rather than rely on that). Dumpable (an
     * execve in a new user namespace may leave it not): its memory is
     * this small program's, nothing of runbox's, and the program runs as
     * another uid without capabilities (it cannot read init's memory
     * either way); a checkpoint of a restored sandbox (hibernation) needs
     * init to be dumpable, since the restorer's user namespace, not the
     * sandbox's, owns its memory then. */
    struct pollfd parent = {.fd = (int)status_fd, .events = POLLOUT};
#ifdef RBX_FREESTANDING
    sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0);
    sys(SYS_prctl, PR_SET_DUMPABLE, 1, 0, 0);
    struct timespec now = {0, 0}; /* ppoll: arm64 has no poll */
    if (sys(SYS_ppoll, (long)&parent, 1, (long)&now, 0) < 0 || (parent.revents & POLLERR))
        return 1; /* runbox is gone: its end of the status pipe closed */
#else
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_DUMPABLE, 1);
    if (poll(&parent, 1, 0) < 0 || (parent.revents & POLLERR))
        return 1;
#endif
    rbx_init_reap((int)status_fd, (pid_t)program);
}

#ifdef RBX_FREESTANDING
/* The kernel's entry: argc, then argv, on the stack. */
__attribute__((used)) static _Noreturn void start(long *stack)
{
    sys_exit(run((int)stack[0], (char **)(stack + 1)));
}

#if defined(__x86_64__)
__asm__(".text\n.global _start\n_start:\n"
        "  xor %ebp, %ebp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call start\n  hlt\n");
#else
__asm__(".text\n.global _start\n_start:\n"
        "  mov x29, #0\n  mov x30, #0\n  mov x0, sp\n  bl start\n  brk #0\n");
#endif
#else
int main(int argc, char **argv)
{
    return run(argc, argv);
}
#endif
