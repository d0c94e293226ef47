/* A thread steps into a mount namespace and back, around a clone: how a
 * sandbox starts in its root's prepared namespace (template.c, spawn.c)
 * and how the network helper starts in runbox's own (net.c). */
#ifndef RBX_SANDBOX_MOUNT_NS_H
#define RBX_SANDBOX_MOUNT_NS_H

#include <stdbool.h>

typedef struct rbx_ns_switch {
    bool active;
    int home_ns, cwd;
} rbx_ns_switch;

int rbx_mount_ns_enter(int ns_fd, rbx_ns_switch *saved);
void rbx_mount_ns_leave(rbx_ns_switch *saved);

#endif
