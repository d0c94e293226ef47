/* The prepared mount namespace (see template.h). */
#include "sandbox/template.h"
#include "base/error.h"
#include "runbox.h"
#include "sandbox/mount.h"
#include "sandbox/mount_ns.h"
#include "sandbox/template_pin.h"
#include "base/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Installing or removing packages changes these directories' times: the
 * namespace holds copies of /etc's files, and overlayfs wants its lower
 * layer left alone, so a change means a new namespace. */
static const char *const stamps[] = {"/usr",
                                     "/usr/bin",
                                     "/usr/lib",
                                     "/usr/lib/x86_64-linux-gnu",
                                     "/usr/lib/aarch64-linux-gnu",
                                     "/etc",
                                     "/etc/ssl/certs",
                                     "/etc/alternatives"};
#define CHECK_EVERY_MS 1000

time_t rbx_template_host_stamp(void)
{
    time_t latest = 0;
    for (size_t i = 0; i < sizeof stamps / sizeof stamps[0]; i++) {
        struct stat st;
        if (stat(stamps[i], &st) == 0) {
            if (st.st_mtim.tv_sec > latest)
                latest = st.st_mtim.tv_sec;
            if (st.st_ctim.tv_sec > latest)
                latest = st.st_ctim.tv_sec;
        }
    }
    return latest;
}

/* The builder: PID 1 of a new PID namespace, in a new mount namespace. It
 * says "R" once the root is ready (or "E<what failed>"), then waits to be
 * told to go: its namespace must live until runbox holds it. */
static int builder(const rbx_root_plan *plan, int ready_fd, int go_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const char *step = "";
    if (rbx_root_prepare_template(plan, &step) != 0) {
        char message[256] = "E";
        size_t at = 1;
        const char *parts[] = {step, ": ", strerror(errno)};
        for (size_t i = 0; i < 3; i++)
            for (const char *p = parts[i]; *p && at < sizeof message - 1; p++)
                message[at++] = *p;
        (void)!write(ready_fd, message, at);
        return 1;
    }
    char go;
    (void)!write(ready_fd, "R", 1);
    (void)!read(go_fd, &go, 1);
    return 0;
}

static int build(const rbx_root_plan *plan, char *why, size_t why_size)
{
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) != 0)
        return snprintf(why, why_size, "cannot create a pipe: %s", strerror(errno)), -1;
    if (pipe2(go, O_CLOEXEC) != 0) {
        snprintf(why, why_size, "cannot create a pipe: %s", strerror(errno));
        close(ready[0]);
        close(ready[1]);
        return -1;
    }
    (void)rbx_root_init_program(); /* open before the copy, which reads it */
    /* A plain clone: a copy of a multi-threaded server runs no atfork
     * handlers, and the builder calls only system calls. */
    pid_t pid =
        (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid == 0)
        _exit(builder(plan, ready[1], go[0]));
    close(ready[1]);
    close(go[0]);
    int ns = -1;
    char answer[256] = "";
    ssize_t n = pid > 0 ? read(ready[0], answer, sizeof answer - 1) : -1;
    if (pid < 0) {
        snprintf(why, why_size, "cannot create its namespaces: %s", strerror(errno));
    } else if (n == 1 && answer[0] == 'R') {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)pid);
        ns = open(path, O_RDONLY | O_CLOEXEC);
        if (ns < 0)
            snprintf(why, why_size, "cannot open %s: %s", path, strerror(errno));
    } else {
        answer[n > 0 ? n : 0] = 0;
        snprintf(why, why_size, "cannot build its root: %.150s",
                 answer[0] == 'E' ? answer + 1 : "the builder died");
    }
    (void)!write(go[1], "g", 1);
    close(go[1]);
    close(ready[0]);
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    return ns;
}

/* Bumped when what a template holds changes, so that a runbox of another
 * version never uses one it did not build. */
/* 2: resolv.conf names runbox's resolver, 127.0.0.53; 3: /usr's overlay names
 * paths of the root only; 4: runbox-init is a file of the root */
#define TEMPLATE_LAYOUT 4

/* The pinned namespace's name: the host's stamp, then a hash (FNV-1a) of
 * the plan (plain data, zeroed before it was filled), the version and the
 * layout. The plan is taken eight bytes at a time: byte by byte, its 54 KB
 * were 65 us of every cold `runbox run`. */
static void pin_name(char *out, size_t size, time_t stamp, const rbx_root_plan *plan)
{
    uint64_t hash = RBX_DIGEST_START;
    const unsigned char *bytes = (const unsigned char *)plan;
    size_t at = 0;
    for (; at + sizeof(uint64_t) <= sizeof *plan; at += sizeof(uint64_t)) {
        uint64_t word;
        memcpy(&word, bytes + at, sizeof word);
        hash = (hash ^ word) * 1099511628211ull; /* FNV-1a's prime, a word a step */
    }
    hash = rbx_digest_add(hash, bytes + at, sizeof *plan - at);
    hash = rbx_digest_add(hash, RBX_VERSION, strlen(RBX_VERSION));
    const int layout = TEMPLATE_LAYOUT;
    hash = rbx_digest_add(hash, &layout, sizeof layout);
    /* The programs it holds copies of (runbox-init): a new build of one
     * is a new namespace. */
    for (size_t i = 0; i < plan->count; i++) {
        struct stat st;
        if (!plan->steps[i].executable || stat(plan->steps[i].host, &st) != 0)
            continue;
        const uint64_t parts[] = {(uint64_t)st.st_ino, (uint64_t)st.st_size,
                                  (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec};
        hash = rbx_digest_add(hash, parts, sizeof parts);
    }
    /* The root's own part of the name: an image's tree, or "" for the
     * host's. Pins of one root and one stamp differ only by the build that
     * made them (its version, its runbox-init). */
    uint64_t root = rbx_template_root_digest(plan->tree);
    snprintf(out, size, "mnt-%lld-%016llx-%016llx", (long long)stamp, (unsigned long long)root,
             (unsigned long long)hash);
}

/* The pinned namespace, else one built here (and pinned, when it can be:
 * a runbox that cannot still uses its own). */
static int pinned_or_built(rbx_template *t, const rbx_root_plan *plan, time_t stamp)
{
    if (!t->pin_dir[0])
        return build(plan, t->why, sizeof t->why);
    char name[96];
    pin_name(name, sizeof name, stamp, plan);
    int ns = rbx_template_pin_open(t->pin_dir, name);
    if (ns >= 0)
        return ns;
    int lock = rbx_template_pin_lock(t->pin_dir);
    ns = rbx_template_pin_open(t->pin_dir, name); /* another built it meanwhile */
    if (ns < 0) {
        ns = build(plan, t->why, sizeof t->why);
        /* The pins it replaces go: built for system paths that are gone,
         * or by another build for this root (one pin a root, or the host's
         * mount table would gain a line every upgrade). */
        if (ns >= 0 && lock >= 0 && rbx_template_pin(t->pin_dir, name, ns) == 0)
            rbx_template_unpin(t->pin_dir, name);
    }
    if (lock >= 0)
        rbx_lock_release(lock);
    return ns;
}

int rbx_template_ready(rbx_template *t, const rbx_root_plan *plan)
{
    int64_t now = rbx_now_ms();
    if (t->ns_fd >= 0 && now - t->checked < CHECK_EVERY_MS)
        return t->ns_fd;
    if (t->ns_fd < 0 && t->why[0])
        return -1; /* it could not be built: not tried again for every execution */
    time_t stamp = rbx_template_host_stamp();
    t->checked = now;
    if (t->ns_fd >= 0 && stamp == t->stamp)
        return t->ns_fd;
    int fresh = pinned_or_built(t, plan, stamp);
    if (fresh < 0)
        return t->ns_fd; /* the one we had, if any, still serves */
    if (t->ns_fd >= 0)
        close(t->ns_fd); /* sandboxes made from it hold copies, not it */
    t->ns_fd = fresh;
    t->stamp = stamp;
    t->why[0] = 0;
    return t->ns_fd;
}

void rbx_template_free(rbx_template *t)
{
    if (t->ns_fd >= 0)
        close(t->ns_fd);
    t->ns_fd = -1;
}

/* A copy of the mount at path, detached from every namespace, private,
 * with attrs set. The last component is never a link. */
static int detach(const char *path, unsigned attrs)
{
    int tree = (int)syscall(SYS_open_tree, AT_FDCWD, path,
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
    if (tree < 0)
        return -1;
    struct mount_attr attr = {.attr_set = attrs, .propagation = MS_PRIVATE};
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
        int error = errno;
        close(tree);
        errno = error;
        return -1;
    }
    return tree;
}

void rbx_template_close_dirs(rbx_root_request *request)
{
    int *trees[2 + RBX_MAX_BINDS] = {&request->home_tree, &request->tmp_tree};
    for (size_t i = 0; i < RBX_MAX_BINDS; i++)
        trees[2 + i] = &request->bind_trees[i];
    for (size_t i = 0; i < 2 + RBX_MAX_BINDS; i++)
        if (*trees[i] >= 0) {
            close(*trees[i]);
            *trees[i] = -1;
        }
}

int rbx_template_detach_dirs(rbx_root_request *request)
{
    const unsigned common = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    request->from_template = true;
    request->home_tree = request->tmp_tree = -1;
    for (size_t i = 0; i < RBX_MAX_BINDS; i++)
        request->bind_trees[i] = -1;
    if ((request->session_path &&
         (request->home_tree = detach(request->session_path, common)) < 0) ||
        (request->tmp_path && (request->tmp_tree = detach(request->tmp_path, common)) < 0))
        goto fail;
    for (size_t i = 0; i < request->bind_count; i++) {
        const rbx_bind *b = &request->binds[i];
        if ((request->bind_trees[i] =
                 detach(b->host, common | (b->writable ? 0 : MOUNT_ATTR_RDONLY))) < 0)
            goto fail;
    }
    return 0;
fail:;
    int error = errno;
    rbx_template_close_dirs(request);
    errno = error;
    return -1;
}

int rbx_template_replace_home(int pidfd, const char *host_dir)
{
    int tree = detach(host_dir, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (tree < 0)
        return -1;
    /* setns with a pidfd and CLONE_NEWNS joins that process's mount
     * namespace alone; the thread's root becomes the sandbox's root. */
    rbx_ns_switch saved;
    int rc = rbx_mount_ns_enter(pidfd, &saved);
    if (rc == 0) {
        /* Detached, not stacked: the sandbox's mount table then looks as
         * a cold start's would. The program's cwd keeps the old one alive
         * until its bootstrap steps into the new one. */
        rc = (int)syscall(SYS_umount2, RBX_SANDBOX_HOME, 2 /* MNT_DETACH; <sys/mount.h> and
                                                                <linux/mount.h> clash */);
        if (rc == 0)
            rc = (int)syscall(SYS_move_mount, tree, "", AT_FDCWD, RBX_SANDBOX_HOME,
                              MOVE_MOUNT_F_EMPTY_PATH);
        rbx_mount_ns_leave(&saved);
    }
    int error = errno;
    close(tree);
    errno = error;
    return rc;
}
