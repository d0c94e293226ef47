/* The uids a sandbox's processes have inside and on the host. */
#ifndef RBX_SANDBOX_UIDS_H
#define RBX_SANDBOX_UIDS_H

/* Inside every sandbox the program runs as RBX_SANDBOX_UID. When runbox
 * runs as root, sandbox uid N maps to host uid RBX_HOST_UID_BASE + N, far
 * from any real account; otherwise it maps to the caller's own uid. */
#define RBX_SANDBOX_UID 1000
#define RBX_HOST_UID_BASE 3000000
/* As root, each sandbox's user namespace is owned by host uid
 * RBX_OWNER_UID_BASE + the id of the thread that made it (unique among
 * live threads): the kernel charges what a namespace's processes hold
 * (inotify instances, queued signals, message queue bytes) to its owner,
 * so every sandbox gets a budget of its own instead of sharing root's. */
#define RBX_OWNER_UID_BASE 3100000

#endif
