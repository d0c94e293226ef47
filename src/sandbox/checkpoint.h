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
    /* runbox's end of the kernel's channel, a descriptor of init; -1: a
     * command's sandbox, which has none. */
    int channel_fd;
    /* The pipes runbox reads (the tree's ends go to new pipes); a
     * terminal's sandbox has no stdout or stderr pipe (0). */
    unsigned long long stdout_pipe, stderr_pipe, status_pipe;
    /* The pipe runbox writes the program's stdin to, or 0. */
    unsigned long long stdin_pipe;
    /* A terminal's slave (its st_rdev and st_dev), or 0: criu takes it as
     * an external tty, and the restore gives the tree a new one. */
    unsigned long long tty_rdev, tty_dev;
    size_t mount_count;
    struct {
        char inside[RBX_ROOT_PATH_MAX]; /* where the sandbox sees it */
        bool is_dir;
    } mounts[RBX_CHECKPOINT_MOUNTS];
} rbx_checkpoint;

/* Whether this sandbox can be checkpointed at all (see above); else why. */
bool rbx_checkpoint_possible(const rbx_sandbox *sandbox, const rbx_sandbox_spec *spec, char *why,
                             size_t why_size);

/* What of the tree runbox holds outside it, beside the sandbox's output
 * pipes: a kernel's channel, or a command's stdin or terminal. */
typedef struct rbx_checkpoint_outside {
    int channel_fd; /* see rbx_checkpoint; -1: none */
    int stdin_fd;   /* runbox's end of the program's stdin pipe, or -1 */
    int master_fd;  /* the terminal's master, or -1 */
} rbx_checkpoint_outside;

/* Dumps the sandbox's tree into dir (an empty directory; criu's log is
 * dir/dump.log) with criu (a path), and ends the tree: the caller then
 * reaps and closes the sandbox as after a kill. On failure err has criu's
 * error, and the tree keeps running, without its network if it had one:
 * the caller stops it, or takes the network back (rbx_sandbox_network_back). */
rbx_status rbx_sandbox_checkpoint(rbx_sandbox *sandbox, const rbx_checkpoint_outside *outside,
                                  const char *criu, const char *dir, rbx_checkpoint *out,
                                  rbx_error *err);

/* After a checkpoint that failed: the network it took down, back (as a
 * restore gives it), where the spec has one. */
rbx_status rbx_sandbox_network_back(const rbx_sandbox_spec *spec, rbx_sandbox *sandbox,
                                    rbx_error *err);

/* Restores the tree dumped in dir as a running sandbox (its driver as it
 * was), with spec's limits and root (spec->template_ns open, its request's
 * session and scratch paths the ones the tree had). The restored init is a
 * child of the calling thread, which it dies with, as a started one does.
 * A command's stdin comes back as a new pipe (sandbox->stdin_fd, written
 * as a started one's is), its terminal as spec->terminal_fd: the slave of
 * a new pseudo-terminal whose master the caller holds. */
rbx_status rbx_sandbox_restore(const rbx_sandbox_spec *spec, const rbx_checkpoint *cp,
                               const char *criu, const char *dir, rbx_sandbox *sandbox,
                               rbx_error *err);

#endif
