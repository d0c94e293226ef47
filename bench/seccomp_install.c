/* What installing the sandbox's seccomp program costs, and what it adds
 * to a system call: each of COUNT forked children sets no_new_privs,
 * installs the program (timed) and then makes 20,000 getppid calls
 * (timed). PROGRAM names a generated header (runbox-seccomp-compile):
 *
 *   cc -O2 -I. -DPROGRAM='"build/generated/seccomp_program.h"' bench/seccomp_install.c \
 *      -o /tmp/seccomp-install && /tmp/seccomp-install 300
 *
 * Another build's header (its build/generated) compares two programs. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include PROGRAM

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 300;
    struct sock_fprog program = {
        .len = sizeof rbx_seccomp_program / sizeof rbx_seccomp_program[0],
        .filter = (struct sock_filter *)rbx_seccomp_program};
    double install = 0, call = 0;
    for (int i = 0; i < count; i++) {
        int pipefd[2];
        if (pipe(pipefd) != 0)
            return 1;
        pid_t child = fork();
        if (child == 0) {
            double took[2];
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            double a = now_us();
            if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0)
                _exit(3);
            double b = now_us();
            for (int k = 0; k < 20000; k++)
                syscall(SYS_getppid);
            took[0] = b - a;
            took[1] = (now_us() - b) / 20000 * 1000;
            _exit(write(pipefd[1], took, sizeof took) == sizeof took ? 0 : 4);
        }
        double took[2] = {0, 0};
        close(pipefd[1]);
        ssize_t n = read(pipefd[0], took, sizeof took);
        close(pipefd[0]);
        int status;
        waitpid(child, &status, 0);
        if (n != sizeof took || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "the child failed to install the program\n");
            return 1;
        }
        install += took[0];
        call += took[1];
    }
    printf("%u instructions: install %.1f us, getppid under it %.1f ns (means of %d)\n",
           program.len, install / count, call / count, count);
    return 0;
}
