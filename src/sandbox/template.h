/* The prepared mount namespace (as root): the sandbox's root built once,
 * in a namespace of its own that holds nothing else. A sandbox's mount
 * namespace is a copy of whatever namespace its creator is in: the thread
 * that starts a sandbox steps into this one for the clone alone, so each
 * sandbox copies a handful of mounts instead of the host's whole table
 * (hundreds on a Kubernetes node, thousands with many mounted things), and
 * has nothing to build or to detach. */
#ifndef RBX_TEMPLATE_H
#define RBX_TEMPLATE_H

#include "sandbox/mount.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct rbx_template {
    int ns_fd;       /* the namespace, -1 before it is built or when it cannot be */
    time_t stamp;    /* what the host's system paths looked like when it was built */
    int64_t checked; /* when that was last compared (monotonic ms) */
    char why[200];   /* why there is none, for runbox check */
    /* Where namespaces are pinned for every runbox process on the state
     * directory (template_pin.h); "" to build one per process. */
    char pin_dir[4096];
} rbx_template;

/* The namespace: the one pinned in t->pin_dir for this plan and these
 * system paths, else built (a child of runbox, root on the host, in new
 * mount and PID namespaces, builds the root and pivots into it) and pinned;
 * built again when the host's system paths changed since (a package was
 * installed). Returns the namespace's fd, or -1 with t->why. Call with the
 * engine's lock held. */
int rbx_template_ready(rbx_template *t, const rbx_root_plan *plan);
/* What the host's system paths look like now (their latest change, in
 * seconds): a namespace, or a plan, made before it is made again. */
time_t rbx_template_host_stamp(void);
void rbx_template_free(rbx_template *t);

/* Parent side: the request's host directories as detached mounts, with
 * their attributes set, for the child to move into place (the child, in a
 * copy of the prepared namespace, could not reach the host's paths).
 * Returns 0, or -1 with errno and the request's trees closed. */
int rbx_template_detach_dirs(rbx_root_request *request);
void rbx_template_close_dirs(rbx_root_request *request);

/* A prepared sandbox's home becomes host_dir (a session's directory), in
 * the mount namespace of the process pidfd refers to (its init): the home
 * it was prepared with is detached. Root only. Returns 0, or -1 with errno. */
int rbx_template_replace_home(int pidfd, const char *host_dir);

#endif
