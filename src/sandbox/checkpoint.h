/* A kernel's sandbox to disk and back (hibernation, issue 34), with criu.
 *
 * A checkpoint writes the sandbox's whole process tree (its namespaces,
 * memory, descriptors, seccomp filter and limits) into a directory and
 * ends the tree. A restore puts the tree back, in a fresh cgroup with the
 * spec's limits, its mounts taken again from the same places a new sandbox
 * takes them (the prepared namespace, the session's directory, the
 * scratch space), and hands back a running rbx_sandbox as a start would.
 * docs/hibernation-notes.md says why each step is as it is.
 *
 * Who runs criu: as root, but under the sandbox's namespace owner (the
 * per-thread uid spawn.c makes namespaces under, so that their counts are
 * not root's): a dump runs as that uid with root's capabilities ambient
 * (prlimit on the tree needs its owner where root lacks CAP_SYS_RESOURCE);
 * a restore runs as uid 0 of a user namespace of its own, owned by that
 * uid and mapping every id to itself, so the restored sandbox's user
 * namespace (a child of it) is charged to that uid, never to root.
 *
 * With the network on, the checkpoint takes the sandbox's tap device,
 * egress rules and resolver down first (criu cannot carry a device whose
 * descriptor is outside the tree; its open connections are lost, and a
 * tree that holds a TCP connection is refused by criu), and the restore
 * makes them anew, as a start does, before the tree runs again.
 *
 * Root only, with a prepared namespace (template.c), and only for a
 * sandbox whose init executed the root's runbox-init and made the
 * kernel's channel itself (rbx_sandbox.channel_inside): the caller checks
 * rbx_checkpoint_possible first. */
#ifndef RBX_SANDBOX_CHECKPOINT_H
#define RBX_SANDBOX_CHECKPOINT_H

#include "runbox.h"
#include "sandbox/mount.h"
#include "sandbox/sandbox.h"

#include <stdbool.h>
#include <stddef.h>

/* Mounts a checkpoint names as the host's (criu's "external" mounts). */
#define RBX_CHECKPOINT_MOUNTS 48

/* What a restore needs beside the directory's images: the caller keeps it
 * (as JSON) with them. */
typedef struct rbx_checkpoint {
    int channel_fd; /* runbox's end of the kernel's channel, a descriptor of init */
    /* The pipes runbox reads (the tree's ends go to new pipes). */
    unsigned long long stdout_pipe, stderr_pipe, status_pipe;
    size_t mount_count;
    struct {
        char inside[RBX_ROOT_PATH_MAX]; /* where the sandbox sees it */
        bool is_dir;
    } mounts[RBX_CHECKPOINT_MOUNTS];
} rbx_checkpoint;

/* Whether this sandbox can be checkpointed at all (see above); else why. */
bool rbx_checkpoint_possible(const rbx_sandbox *sandbox, const rbx_sandbox_spec *spec, char *why,
                             size_t why_size);

/* Dumps the sandbox's tree into dir (an empty directory; criu's log is
 * dir/dump.log) with criu (a path), and ends the tree: the caller then
 * reaps and closes the sandbox as after a kill. channel_fd: see above. On
 * failure err has criu's error, and the tree keeps running, without its
 * network if it had one: the caller stops it. */
rbx_status rbx_sandbox_checkpoint(rbx_sandbox *sandbox, int channel_fd, const char *criu,
                                  const char *dir, rbx_checkpoint *out, rbx_error *err);

/* Restores the tree dumped in dir as a running sandbox (its driver as it
 * was), with spec's limits and root (spec->template_ns open, its request's
 * session and scratch paths the ones the tree had). The restored init is a
 * child of the calling thread, which it dies with, as a started one does. */
rbx_status rbx_sandbox_restore(const rbx_sandbox_spec *spec, const rbx_checkpoint *cp,
                               const char *criu, const char *dir, rbx_sandbox *sandbox,
                               rbx_error *err);

#endif
