/* One call on a kernel: the code goes to the driver, its output and rich
 * outputs stream back until the driver says it is done. At the deadline the
 * kernel is interrupted (its state survives); code that does not yield
 * within the grace is stopped with its kernel (state lost), and so is a
 * kernel that dies meanwhile. */
#ifndef RBX_KERNEL_CALL_H
#define RBX_KERNEL_CALL_H

#include "egress/policy.h"
#include "kernels/kernels.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/kernel.h"
#include "sandbox/sandbox.h"
#include "sessions/storage.h"

/* A kernel, as kernels.c keeps it. */
typedef struct rbx_kernel {
    struct rbx_kernel *next;
    rbx_engine *engine;
    char session_id[RBX_SESSION_ID_MAX + 1];
    const rbx_runtime *runtime;
    struct rbx_root *root;  /* the image it runs on */
    char env_key[64];       /* the requirements' environment it runs with, or "" */
    int env_use_fd;         /* holds that environment while the kernel lives */
    bool network;           /* started with the outside reachable */
    rbx_egress_plan egress; /* ... under this policy */
    char *egress_key;       /* the request's egress_allow it was started with, or NULL */
    rbx_cgroup_limits limits;
    /* Its sandbox, and what its spec points into. */
    rbx_sandbox_spec spec;
    char **envp;
    const char *argv[8];
    char env_dir[4500];
    char work_path[4400];
    rbx_scratch scratch;
    rbx_kernel_box box;
    int lock_fd;   /* <session>/kernel-<language>.lock, held while it lives */
    bool was_lost; /* the lock file said the session's last kernel went unasked */
    bool was_hibernated;       /* ... that it hibernated (hibernation.h) */
    char restart_why[360];     /* why it starts afresh, when it does (the result says) */
    struct rbx_checkpoint *checkpoint; /* the checkpoint to restore it from, or NULL */
    char checkpoint_dir[4600];
    bool just_restored; /* restored for the call now being taken */
    int64_t restore_ms;
    pthread_t keeper;
    bool keeper_started;
    int wake[2];             /* closing wake[1] tells the keeper to stop the kernel */
    rbx_status start_status; /* -1 while starting */
    rbx_error start_err;
    bool busy;
    bool dead;
    int64_t last_used_ms;
    int64_t calls;
} rbx_kernel;

/* Runs the call; *lost says the kernel had to go (the caller stops it). */
rbx_status rbx_kernel_call_run(rbx_engine *engine, rbx_kernel *k, const rbx_kernel_call *call,
                               rbx_result *result, bool *lost, rbx_error *err);

#endif
