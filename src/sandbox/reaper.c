/* runbox-init: what a sandbox's init becomes once its program runs.
 *
 * Init is a clone of runbox: until it has built the root and started the
 * program it needs runbox's code, but from then on it only reaps. Kept as
 * it was, it held a copy of runbox's address space (a server's: its heap,
 * its threads' stacks) for the whole execution, and tearing that copy
 * down when init exited was on the way to every result: the program had
 * ended, runbox waited for init. Init now executes this small static
 * program instead, right after the program started (before the program's
 * code arrives, in a prepared sandbox): the copy goes then, beside the
 * program, and what exits at the end is this.
 *
 *   runbox-init STATUS_FD PROGRAM_PID
 *
 * As PID 1 of the sandbox's PID namespace it reaps every process; when
 * PROGRAM_PID ends it writes the rbx_exit_report to STATUS_FD and exits,
 * which makes the kernel kill whatever else is left in the namespace. */
#include "sandbox/exit_report.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static long number(const char *text)
{
    char *end;
    errno = 0;
    long n = text ? strtol(text, &end, 10) : -1;
    return text && !errno && end != text && !*end && n >= 0 ? n : -1;
}

int main(int argc, char **argv)
{
    long status_fd = argc == 3 ? number(argv[1]) : -1;
    long program = argc == 3 ? number(argv[2]) : -1;
    if (status_fd < 0 || program <= 0)
        return 2;
    /* As init was: never outliving runbox (execve keeps the parent-death
     * signal, but set it again rather than rely on that), not dumpable
     * (execve made it dumpable again). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_DUMPABLE, 0);
    struct pollfd parent = {.fd = (int)status_fd, .events = POLLOUT};
    if (poll(&parent, 1, 0) < 0 || (parent.revents & POLLERR))
        _exit(1); /* runbox is gone: its end of the status pipe closed */
    rbx_init_reap((int)status_fd, (pid_t)program);
}
