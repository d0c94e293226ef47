/* A kernel's sandbox: a sandbox that outlives one execution (stateful
 * sessions). It is started like any other, with the same namespaces, root,
 * cgroup and seccomp; its program is the runtime's kernel driver, which
 * talks with runbox on one socket (fd 3 inside; bash also reads its
 * commands there, on stdin), and whose stdout and stderr are the sandbox's
 * pipes, kept open from one execution to the next. */
#ifndef RBX_KERNEL_BOX_H
#define RBX_KERNEL_BOX_H

#include "runbox.h"
#include "sandbox/sandbox.h"

typedef struct rbx_kernel_box {
    rbx_sandbox sandbox;
    int channel;       /* runbox's end of the driver's socket */
    pid_t program;     /* the driver, as the host sees it (init's child) */
    int program_pidfd; /* for its interrupts */
    int channel_in_init; /* where init holds runbox's end of the channel, or -1 */
} rbx_kernel_box;

/* Starts the sandbox with spec (its code_fd is set here), writes greeting
 * to the channel (bash's driver comes that way; NULL: none), and waits up
 * to ready_s for the driver to say it is ready. On failure err says why,
 * with what the driver printed. */
struct rbx_checkpoint;
/* Restores a kernel box checkpointed from a started one (checkpoint.h:
 * rbx_sandbox_checkpoint with box->channel_in_init), its driver ready. */
rbx_status rbx_kernel_box_restore(const rbx_sandbox_spec *spec, const struct rbx_checkpoint *cp,
                                  const char *criu, const char *dir, rbx_kernel_box *box,
                                  rbx_error *err);

rbx_status rbx_kernel_box_start(const rbx_sandbox_spec *spec, const char *greeting,
                                size_t greeting_len, double ready_s, rbx_kernel_box *box,
                                rbx_error *err);
/* Sends all of data to the driver. Returns 0, or -1 when it is gone. */
int rbx_kernel_box_send(rbx_kernel_box *box, const char *data, size_t len);
/* SIGINT to the driver (with group: to its whole process group, the
 * shell's foreground job among them). Returns 0 or -1. */
int rbx_kernel_box_interrupt(const rbx_kernel_box *box, bool group);
/* Whether init is still there (a kernel can die between executions). */
bool rbx_kernel_box_alive(const rbx_kernel_box *box);
/* Kills every process of it, reaps init, closes everything. */
void rbx_kernel_box_stop(rbx_kernel_box *box);

#endif
