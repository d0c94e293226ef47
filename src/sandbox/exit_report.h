/* What a sandbox's init tells runbox when the program ends: written once
 * on the status pipe by init (sandbox/spawn.c) or by the reaper it becomes
 * (sandbox/reaper.c), read by runbox (rbx_sandbox_reap). Plain C: the
 * reaper includes nothing else of runbox. */
#ifndef RBX_EXIT_REPORT_H
#define RBX_EXIT_REPORT_H

#include <errno.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct rbx_exit_report {
    int wait_status;
    struct rusage usage;
} rbx_exit_report;

/* How the loop below waits, writes and exits: through libc, unless the
 * includer (runbox-init, which has no libc: reaper.c) names its own. The
 * wait returns the pid, or a negative errno. */
#ifndef RBX_REAP_WAIT4
static inline long rbx_reap_wait4(int *status, struct rusage *usage)
{
    pid_t pid = wait4(-1, status, __WALL, usage);
    return pid < 0 ? -errno : pid;
}
#define RBX_REAP_WAIT4 rbx_reap_wait4
#define RBX_REAP_WRITE(fd, data, len) ((void)!write(fd, data, len))
#define RBX_REAP_EXIT _exit
#endif

/* What init does once the program runs, as the namespace's PID 1: reaps
 * every process, writes how program ended to status_fd, and exits, which
 * makes the kernel kill whatever else is left in the namespace. Inline:
 * init (spawn.c) and runbox-init (reaper.c) run this one loop. */
static inline _Noreturn void rbx_init_reap(int status_fd, pid_t program)
{
    for (;;) {
        int status;
        struct rusage usage;
        long pid = RBX_REAP_WAIT4(&status, &usage);
        if (pid == -EINTR)
            continue;
        if (pid < 0)
            RBX_REAP_EXIT(1);
        if (pid == program) {
            rbx_exit_report report;
            report.wait_status = status;
            report.usage = usage;
            RBX_REAP_WRITE(status_fd, &report, sizeof report);
            RBX_REAP_EXIT(0);
        }
    }
}

#endif
