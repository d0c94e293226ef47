/* The sandbox's filesystem: a new root built from scratch on a tmpfs. The
 * plan (which host paths to show, read-only) is computed once per engine in
 * the parent; the child only replays it with system calls. */
#ifndef RBX_MOUNT_H
#define RBX_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

/* Where the session's directory appears inside: also the cwd and HOME. */
#define RBX_SANDBOX_HOME "/home/user"

#define RBX_ROOT_MAX_STEPS 64
#define RBX_ROOT_PATH_MAX 256

typedef enum rbx_root_step_kind {
    ROOT_BIND_RO,   /* a host directory or file, read-only, nosuid, nodev */
    ROOT_SYMLINK,   /* a link as the host has it (/bin -> usr/bin) */
} rbx_root_step_kind;

typedef struct rbx_root_step {
    rbx_root_step_kind kind;
    bool is_dir;
    char host[RBX_ROOT_PATH_MAX];    /* source path on the host, or the link's target */
    char inside[RBX_ROOT_PATH_MAX];  /* path inside the sandbox */
} rbx_root_step;

typedef struct rbx_root_plan {
    size_t count;
    rbx_root_step steps[RBX_ROOT_MAX_STEPS];
    size_t tmp_size_mb;
    size_t home_size_mb;  /* the tmpfs home of one-off runs */
} rbx_root_plan;

/* Parent side: which of the default system paths (or `paths`, a
 * NULL-terminated list, when given) exist on this host. */
void rbx_root_plan_build(rbx_root_plan *plan, const char *const *paths, size_t tmp_size_mb,
                         size_t home_size_mb);

/* Child side (no allocation): builds the new root on a tmpfs, binds the
 * session's work directory at RBX_SANDBOX_HOME (a fresh sized tmpfs there
 * when session_path is NULL: a one-off run), pivots into it and detaches
 * the old root. With become_root, switches to the namespace's uid 0 once
 * the session directory is open. On failure returns -1 with errno set and
 * *step naming what failed. */
int rbx_root_enter(const rbx_root_plan *plan, const char *session_path, bool become_root,
                   bool network, const char **step);

#endif
