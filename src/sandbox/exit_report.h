/* What a sandbox's init tells runbox when the program ends: written once
 * on the status pipe by init (sandbox/spawn.c) or by the reaper it becomes
 * (sandbox/reaper.c), read by runbox (rbx_sandbox_reap). Plain C: the
 * reaper includes nothing else of runbox. */
#ifndef RBX_EXIT_REPORT_H
#define RBX_EXIT_REPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct rbx_exit_report {
    int wait_status;
    struct rusage usage;
    /* Init had no other child left when the program ended: no process of
     * the execution is left but init, which exits next. */
    int last;
} rbx_exit_report;

/* Whether n bytes read are a whole report. An init restored from a
 * checkpoint taken by an earlier runbox (hibernation) writes the report
 * without its last field: that one is whole too, with last 0. */
static inline bool rbx_exit_report_whole(rbx_exit_report *report, long n)
{
    if (n == (long)offsetof(rbx_exit_report, last))
        report->last = 0;
    return n == (long)sizeof *report || n == (long)offsetof(rbx_exit_report, last);
}

/* How the loop below waits, writes and exits: through libc, unless the
 * includer (runbox-init, which has no libc: reaper.c) names its own. The
 * wait returns the pid, or a negative errno. */
#ifndef RBX_REAP_WAIT4
static inline long rbx_reap_wait4(int *status, struct rusage *usage)
{
    pid_t pid = wait4(-1, status, __WALL, usage);
    return pid < 0 ? -errno : pid;
}
static inline long rbx_reap_wait4_nohang(int *status)
{
    pid_t pid = wait4(-1, status, __WALL | WNOHANG, NULL);
    return pid < 0 ? -errno : pid;
}
#define RBX_REAP_WAIT4 rbx_reap_wait4
#define RBX_REAP_WAIT4_NOHANG rbx_reap_wait4_nohang
#define RBX_REAP_WRITE(fd, data, len) ((void)!write(fd, data, len))
#define RBX_REAP_EXIT _exit
#endif

/* Whether init has no child left, reaping those that ended. Every process
 * of the namespace descends from init, and an orphan is init's child by
 * the time its parent can be reaped: none left means no process but init.
 * One call without waiting, whatever the host runs (kill(-1) would walk
 * every process of the host). */
static inline int rbx_init_alone(void)
{
    for (;;) {
        int status;
        long pid = RBX_REAP_WAIT4_NOHANG(&status);
        if (pid == -ECHILD)
            return 1;
        if (pid != -EINTR && pid <= 0)
            return 0; /* children still run: init's exit kills them */
    }
}

/* What init does once the program runs, as the namespace's PID 1: reaps
 * every process, writes how program ended to status_fd, and exits, which
 * makes the kernel kill whatever else is left in the namespace. The report
 * says whether anything was (rbx_exit_report.last): where nothing was,
 * runbox may answer before init's exit has torn the namespaces down.
 * Inline: init (spawn.c) and runbox-init (reaper.c) run this one loop. */
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
            report.last = rbx_init_alone();
            RBX_REAP_WRITE(status_fd, &report, sizeof report);
            RBX_REAP_EXIT(0);
        }
    }
}

#endif
