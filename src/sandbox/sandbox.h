/* The sandbox: where one execution runs. spawn.c starts it (namespaces, an
 * init of runbox's own as PID 1, the program below it); supervise.c watches
 * it (output, deadline, cancellation) until nothing of it is left. */
#ifndef RBX_SANDBOX_H
#define RBX_SANDBOX_H

#include "base/capture.h"
#include "base/trace.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/exit_report.h"
#include "sandbox/mount.h"
#include "sandbox/net.h"

#include <sys/resource.h>
#include <sys/types.h>

struct rbx_egress_plan;
struct rbx_egress_guard;
struct rbx_egress_report;

typedef struct rbx_sandbox_spec {
    const char *interpreter; /* absolute path */
    char *const *argv;
    char *const *envp;
    const rbx_root_plan *root;     /* the system paths to show, read-only */
    rbx_root_request root_request; /* the session, binds, and who builds the root */
    int code_fd;                   /* becomes fd 3 of the program (unless bare) */
    /* A program that is not a bootstrap (a process, processes/): it gets
     * fds 0, 1 and 2 only (code_fd is ignored); a failure before its
     * execve is still reported, on a descriptor closed by the execve. */
    bool bare;
    /* With terminal: fds 0-2 of the program are terminal_fd, the slave of
     * a pseudo-terminal runbox holds the master of, and its controlling
     * terminal (the sandbox has no stdout or stderr pipes then). */
    bool terminal;
    int terminal_fd;
    const char *cwd; /* the program's working directory inside; NULL: RBX_SANDBOX_HOME */
    bool with_stdin;               /* else stdin is /dev/null */
    bool stdin_is_code_fd;         /* a kernel that reads its commands on stdin (bash) */
    /* A kernel's channel (code_fd a socket, runbox's end channel_ours_fd):
     * where init executes runbox-init, init makes the channel anew inside
     * the sandbox's network namespace and keeps runbox's end of it at
     * channel_ours_fd, for runbox to take (rbx_sandbox.channel_inside).
     * A channel of the sandbox's own namespace, held within its tree, is
     * one a checkpoint of the tree can carry (hibernation). */
    bool channel_inside;
    int channel_ours_fd;
    rbx_net_mode network;
    /* With the network outside: the egress policy the sandbox enforces
     * (sandbox/egress_rules.h); it must outlive the sandbox. NULL: none. */
    const struct rbx_egress_plan *egress;
    rbx_cgroup_limits limits; /* enforced by a cgroup where there is one, else rlimits */
    uint64_t file_size_max;   /* RLIMIT_FSIZE */
    rbx_trace *trace;         /* NULL unless tracing */
    bool is_root;
    int template_ns; /* the prepared mount namespace (template.h), or -1: the
                        sandbox builds its root in a copy of the host's */
} rbx_sandbox_spec;

typedef struct rbx_sandbox {
    pid_t pid; /* the sandbox's init, as the host sees it */
    int pidfd;
    int stdin_fd;             /* our end of the program's stdin, or -1 */
    int stdout_fd, stderr_fd; /* read ends (-1 with a terminal) */
    int report_fd;            /* the bootstrap's R/S report, or E<message> from setup */
    int status_fd;            /* init writes rbx_exit_report here */
    rbx_net_helper net;       /* the network helper, when the network is on */
    struct rbx_egress_guard *egress; /* its policy's rules and resolver, or NULL */
    rbx_cgroup *cgroup;       /* NULL where cgroups are not available */
    /* Init made the channel (spec.channel_inside): runbox's end is
     * channel_ours_fd of init, to take with pidfd_getfd. */
    bool channel_inside;
    /* Init executed runbox-init (with a starter): a small program a
     * checkpoint can carry, not a copy of runbox's memory. */
    bool init_executed;
} rbx_sandbox;


rbx_status rbx_sandbox_start(const rbx_sandbox_spec *spec, rbx_sandbox *sandbox, rbx_error *err);
/* Kills every process of the sandbox (killing init ends its PID namespace). */
void rbx_sandbox_kill(rbx_sandbox *sandbox);
/* The program's pid as the host sees it (init's only child), or -1. */
pid_t rbx_sandbox_program(const rbx_sandbox *sandbox);
/* Reaps init; fills report and returns true when init reported the program's end. */
bool rbx_sandbox_reap(rbx_sandbox *sandbox, rbx_exit_report *report);
void rbx_sandbox_close(rbx_sandbox *sandbox);
/* Adds what the egress policy refused since the last call (nothing when
 * the sandbox has no policy). */
void rbx_sandbox_egress_report(rbx_sandbox *sandbox, struct rbx_egress_report *report);

/* supervise.c */
typedef struct rbx_watch {
    double timeout_s;
    int cancel_fd;
    int kill_fd; /* the engine's own cancel (rbx_session_cancel), or -1 */
    const char *stdin_data;
    size_t stdin_len;
    rbx_output_fn on_output;
    void *user;
    rbx_capture *out, *err;
    char report[65536]; /* what the bootstrap or setup reported */
    size_t report_len;
    /* A bootstrap that keeps its report open after "R" (languages/runtime.h:
     * results_channel) writes the program's rich outputs there: what
     * follows the "R" goes here, not into report. Non-zero: cancel. */
    int (*on_channel)(void *user, const char *data, size_t len);
    void *channel_user;
    bool timed_out, cancelled;
    rbx_trace *trace; /* NULL unless tracing */
    /* The execution ends with its last process, not with init's exit: the
     * caller reaps init later (a prepared sandbox's keeper does). */
    bool leave_init;
} rbx_watch;

/* Runs the poll loop until the sandbox is gone; fills watch and report. */
bool rbx_supervise(rbx_sandbox *sandbox, rbx_watch *watch, rbx_exit_report *report);

#endif
