/* The sandbox's filesystem: a root built from scratch on a tmpfs, read-only,
 * with the host's system paths, its own /dev, /proc, /tmp and the session's
 * directory as its home.
 *
 * Two ways to the same root. As root, the root is built once per engine in
 * a prepared mount namespace (template.c), and each sandbox's namespace is
 * a copy of that small one: only its own /proc, /tmp, home and binds are
 * mounted per execution, so its cost does not depend on how many mounts the
 * host has. Otherwise (an ordinary user) each sandbox copies the host's
 * namespace and builds the root in it (prepare), then takes its session
 * (assign) and pivots into it. The plan (which host paths the root shows)
 * is computed once per engine in the parent; the child replays it with
 * system calls only. */
#ifndef RBX_MOUNT_H
#define RBX_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

/* Where the session's directory appears inside: also the cwd and HOME. */
#define RBX_SANDBOX_HOME "/home/user"
/* runbox-init, which a sandbox's init executes (spawn.c), copied into
 * every root: a program of the sandbox's own files, whose process a
 * checkpoint (hibernation) can carry and a restore find again. */
#define RBX_SANDBOX_INIT "/.runbox/runbox-init"
/* The sandbox's host name (also in its /etc/hostname). */
#define RBX_SANDBOX_HOSTNAME "runbox"

#define RBX_ROOT_MAX_STEPS 64
#define RBX_ROOT_PATH_MAX 384

typedef enum rbx_root_step_kind {
    ROOT_BIND_RO, /* a host directory or file, read-only, nosuid, nodev */
    ROOT_COPY,    /* a small world-readable file, copied into the root */
    ROOT_SYMLINK, /* a link as the host has it (/bin -> usr/bin) */
} rbx_root_step_kind;

/* Files up to this size are copied rather than bound: a copy costs less
 * than a mount, and every mount is paid again when the sandbox ends. */
#define RBX_ROOT_COPY_MAX (128 * 1024)

typedef struct rbx_root_step {
    rbx_root_step_kind kind;
    bool is_dir;
    bool in_image;                  /* host is relative to the plan's tree */
    bool executable;                /* a ROOT_COPY that is a program */
    char host[RBX_ROOT_PATH_MAX];   /* source path on the host, or the link's target */
    char inside[RBX_ROOT_PATH_MAX]; /* path inside the sandbox */
} rbx_root_step;

/* Entries of the sandbox's own /proc that would show the host (its boot
 * line, kernel configuration, disks, devices, modules, other processes'
 * locks, the host's pressure): covered, /dev/null over files and an empty
 * read-only directory over directories. Only the world-readable ones are
 * listed: the sandbox's user cannot read the others anyway. */
#define RBX_PROC_MASKS_MAX 40

typedef struct rbx_proc_mask {
    char name[24]; /* below /proc */
    bool is_dir;
} rbx_proc_mask;

/* Mount points the root always has (dependency environments: every
 * runtime's place for one), beside /home/user, /tmp, /proc, /dev/shm. */
#define RBX_ROOT_MAX_POINTS 8

typedef struct rbx_root_plan {
    /* An image's tree (its real path), or "" for the host's paths. Steps
     * from an image name their host path relative to it: the builder opens
     * the tree before it covers /tmp, where a store may be, and reaches
     * them through that descriptor. */
    char tree[RBX_ROOT_PATH_MAX];
    size_t count;
    rbx_root_step steps[RBX_ROOT_MAX_STEPS];
    size_t mask_count;
    rbx_proc_mask masks[RBX_PROC_MASKS_MAX];
    size_t point_count;
    char points[RBX_ROOT_MAX_POINTS][RBX_ROOT_PATH_MAX];
    size_t tmp_size_mb;
    size_t home_size_mb; /* the tmpfs home of one-off runs, where no scratch space is made */
} rbx_root_plan;

/* Parent side: which of the default system paths (or `paths`, a
 * NULL-terminated list, when given) exist on this host, or in image_tree
 * (an image's tree; NULL: the host's). False when there is no /usr. */
bool rbx_root_plan_build(rbx_root_plan *plan, const char *const *paths, size_t tmp_size_mb,
                         size_t home_size_mb, const char *image_tree);
/* Adds a mount point every root has (a runtime's environment). */
void rbx_root_plan_add_point(rbx_root_plan *plan, const char *inside);

/* A host directory shown inside one sandbox (a dependency environment). */
typedef struct rbx_bind {
    const char *host;
    const char *inside;
    bool writable;
} rbx_bind;

#define RBX_MAX_BINDS 2

/* What one sandbox's root holds beyond the plan. */
typedef struct rbx_root_request {
    const char *session_path; /* its home: a session's work/ or a scratch home; NULL: a tmpfs */
    const char *tmp_path;     /* its /tmp: scratch space; NULL: a tmpfs */
    rbx_bind binds[RBX_MAX_BINDS];
    size_t bind_count;
    bool become_root; /* switch to the namespace's uid 0 once host paths are open */
    bool nameserver;  /* /etc/resolv.conf names runbox's resolver */
    /* A sandbox a checkpoint may take (a kernel's: hibernation): its boot
     * id's file keeps its name in /dev/shm, where criu finds it (an
     * unlinked file there is restored empty). */
    bool boot_id_named;
    /* With a prepared namespace (template.c): the above as mounts the
     * parent detached from the host (open_tree), -1 where there is none.
     * The child moves them into place: no host path is opened in it. */
    bool from_template;
    int home_tree, tmp_tree;
    int bind_trees[RBX_MAX_BINDS];
} rbx_root_request;

/* runbox-init's descriptor (O_PATH, opened on first use, kept): the
 * parent calls it before it makes a child that builds a root, and keeps
 * it open in that child (spawn.c's reaper); -1 where there is none. */
int rbx_root_init_program(void);

/* Child side (no allocation): makes the sandbox's root and enters it. From
 * a prepared namespace, mounts its own parts in place; otherwise builds
 * the whole root on a tmpfs, binds the session at RBX_SANDBOX_HOME and the
 * request's binds, pivots into it and detaches the old root. On failure
 * returns -1 with errno set and *step naming what failed. */
int rbx_root_enter(const rbx_root_plan *plan, const rbx_root_request *request, const char **step);

/* The steps the prepared namespace is built with (template.c), in a child
 * of runbox that is root on the host: the system (copies instead of
 * binds, where it can), /dev with its own device nodes, sealed read-only,
 * then pivoted into. Returns 0, or -1 with errno and *step. */
int rbx_root_prepare_template(const rbx_root_plan *plan, const char **step);

#endif
