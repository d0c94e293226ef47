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

/* What init does once the program runs, as the namespace's PID 1: reaps
 * every process, writes how program ended to status_fd, and exits, which
 * makes the kernel kill whatever else is left in the namespace. Inline:
 * init (spawn.c) and runbox-init (reaper.c) run this one loop. */
static inline _Noreturn void rbx_init_reap(int status_fd, pid_t program)
{
    for (;;) {
        int status;
        struct rusage usage;
        pid_t pid = wait4(-1, &status, __WALL, &usage);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            _exit(1);
        if (pid == program) {
            rbx_exit_report report = {.wait_status = status, .usage = usage};
            (void)!write(status_fd, &report, sizeof report);
            _exit(0);
        }
    }
}

#endif
