/* Building the sandbox's root. Every mount here happens in the sandbox's
 * own mount namespace, made private first, so nothing propagates back to
 * the host. The new root is a small tmpfs that ends read-only; host system
 * paths are bind-mounted read-only, nosuid and nodev; the session directory
 * comes in through a file descriptor, so no host path walk can be
 * redirected by a link (and its host path need not be reachable at all). */
#include "sandbox/mount.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The host's /tmp is covered by the new root while it is built: only the
 * session (by fd) and system paths (outside /tmp) are taken from the host. */
#define NEW_ROOT "/tmp"

/* What the runtimes need from the host, read-only. Top-level links such as
 * /bin -> usr/bin are recreated as links. /etc is not shown whole: only
 * what the dynamic linker, TLS, name resolution and the interpreters read. */
static const char *const default_paths[] = {
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/inputrc",
    "/etc/pip.conf",
    "/etc/xdg/pip",
    NULL,
};

/* The sandbox's own account database: one user, the session's owner. */
static const char passwd_text[] = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                  "user:x:1000:1000:runbox:" RBX_SANDBOX_HOME ":/bin/bash\n"
                                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group_text[] = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n";

static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};

/* What of /proc is covered (see rbx_proc_mask), Docker's masked paths
 * among them. What runtimes read stays: cpuinfo, meminfo, stat, uptime,
 * loadavg, version, filesystems, self, net (the sandbox's own), sys. */
static const char *const proc_masked[] = {
    "cmdline",    "config.gz", "modules",   "kallsyms",  "partitions", "diskstats",
    "swaps",      "locks",     "interrupts", "devices",  "consoles",   "timer_list",
    "sched_debug", "keys",     "key-users", "bootconfig", "softirqs",  "iomem",
    "ioports",    "misc",      "dma",       "mtrr",      "latency_stats", "timer_stats",
    "kcore",      "sysrq-trigger", "acpi",  "scsi",      "asound",     "bus",
    "driver",     "tty",       "irq",       "fs",        "pressure",   NULL,
};

static void plan_proc_masks(rbx_root_plan *plan)
{
    for (const char *const *name = proc_masked; *name && plan->mask_count < RBX_PROC_MASKS_MAX;
         name++) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%s", *name);
        if (lstat(path, &st) != 0 || !(st.st_mode & S_IROTH))
            continue;
        rbx_proc_mask *mask = &plan->masks[plan->mask_count++];
        snprintf(mask->name, sizeof mask->name, "%s", *name);
        mask->is_dir = S_ISDIR(st.st_mode);
    }
}

void rbx_root_plan_build(rbx_root_plan *plan, const char *const *paths, size_t tmp_size_mb,
                         size_t home_size_mb)
{
    memset(plan, 0, sizeof *plan);
    plan->tmp_size_mb = tmp_size_mb ? tmp_size_mb : 256;
    plan->home_size_mb = home_size_mb ? home_size_mb : 1024;
    for (const char *const *p = paths ? paths : default_paths; *p; p++) {
        if (plan->count == RBX_ROOT_MAX_STEPS || strlen(*p) >= RBX_ROOT_PATH_MAX || (*p)[0] != '/')
            continue;
        struct stat st;
        if (lstat(*p, &st) != 0)
            continue;
        rbx_root_step *step = &plan->steps[plan->count];
        snprintf(step->inside, sizeof step->inside, "%s", *p);
        if (S_ISLNK(st.st_mode) && strchr(*p + 1, '/') == NULL) {
            ssize_t n = readlink(*p, step->host, sizeof step->host - 1);
            if (n <= 0)
                continue;
            step->host[n] = 0;
            step->kind = ROOT_SYMLINK;
        } else {
            /* Deeper links (/etc/resolv.conf -> ...) are bound as what they point to. */
            if (stat(*p, &st) != 0)
                continue;
            snprintf(step->host, sizeof step->host, "%s", *p);
            step->is_dir = S_ISDIR(st.st_mode);
            /* Only what the sandbox's user could read anyway is copied (by
             * init, which no longer is the host's root when it copies). */
            bool small = S_ISREG(st.st_mode) && st.st_size <= RBX_ROOT_COPY_MAX;
            step->kind = small && (st.st_mode & S_IROTH) ? ROOT_COPY : ROOT_BIND_RO;
        }
        plan->count++;
    }
    plan_proc_masks(plan);
}

/* --- child side: system calls only -------------------------------------------------- */

static char *join(char *buf, size_t size, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb + 1 > size)
        return NULL;
    memcpy(buf, a, la);
    memcpy(buf + la, b, lb + 1);
    return buf;
}

static int make_file(const char *path, const char *content)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    size_t len = content ? strlen(content) : 0;
    ssize_t n = len ? write(fd, content, len) : 0;
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

static int set_attr(const char *path, unsigned set, bool recursive)
{
    struct mount_attr attr = {.attr_set = set};
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr,
                        sizeof attr);
}

/* Binds src at dst (inside the new root), then sets attrs on it (none:
 * the caller sets them later, for many mounts at once). */
static int bind_ro(const char *src, const char *dst, bool is_dir, unsigned attrs)
{
    /* Its parent exists: the caller made it. */
    if (is_dir ? mkdir(dst, 0755) != 0 && errno != EEXIST : make_file(dst, NULL) != 0)
        return -1;
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0)
        return -1;
    return attrs ? set_attr(dst, attrs, true) : 0;
}

/* Copies a host file into the new root (sendfile: no buffer, no allocation). */
static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    /* A regular file comes whole in one call; a short count means its end. */
    ssize_t n = out < 0 ? -1 : RBX_ROOT_COPY_MAX;
    while (n == RBX_ROOT_COPY_MAX)
        n = sendfile(out, in, NULL, RBX_ROOT_COPY_MAX);
    int saved = errno;
    close(in);
    if (out >= 0)
        close(out);
    errno = saved;
    return n >= 0 ? 0 : -1;
}

static int build_system(const rbx_root_plan *plan, const char **step)
{
    char dst[RBX_ROOT_PATH_MAX + 16], parent[RBX_ROOT_PATH_MAX + 16], made[sizeof parent] = "";
    for (size_t i = 0; i < plan->count; i++) {
        const rbx_root_step *s = &plan->steps[i];
        *step = s->inside;
        if (!join(dst, sizeof dst, NEW_ROOT, s->inside))
            return -1;
        /* Parents of a file (/etc for /etc/hosts) are plain directories;
         * consecutive steps mostly share theirs. */
        strcpy(parent, dst);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = 0;
            if (strcmp(parent, made) != 0 && rbx_mkdir_p(parent, 0755) != 0)
                return -1;
            strcpy(made, parent);
        }
        if (s->kind == ROOT_SYMLINK) {
            if (symlink(s->host, dst) != 0 && errno != EEXIST)
                return -1;
        } else if (s->kind == ROOT_COPY) {
            if (copy_file(s->host, dst) != 0)
                return -1;
        } else if (bind_ro(s->host, dst, s->is_dir, 0) != 0) {
            return -1; /* made read-only with the whole root, in seal_system() */
        }
    }
    return 0;
}

/* A minimal /dev: the harmless character devices, bound from the host's,
 * standard links, and a private /dev/shm. */
static int build_dev(const char **step)
{
    *step = "/dev";
    if (mount("runbox-dev", NEW_ROOT "/dev", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=64k,nr_inodes=64") != 0)
        return -1;
    char src[64], dst[64];
    for (const char *const *d = devices; *d; d++) {
        *step = *d;
        if (!join(src, sizeof src, "/dev/", *d) || !join(dst, sizeof dst, NEW_ROOT "/dev/", *d))
            return -1;
        if (access(src, F_OK) != 0)
            continue;
        if (bind_ro(src, dst, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC) != 0)
            return -1;
    }
    *step = "/dev links";
    if (symlink("/proc/self/fd", NEW_ROOT "/dev/fd") ||
        symlink("/proc/self/fd/0", NEW_ROOT "/dev/stdin") ||
        symlink("/proc/self/fd/1", NEW_ROOT "/dev/stdout") ||
        symlink("/proc/self/fd/2", NEW_ROOT "/dev/stderr"))
        return -1;
    *step = "/dev/shm";
    if (mkdir(NEW_ROOT "/dev/shm", 0755) != 0 ||
        mount("runbox-shm", NEW_ROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
              "mode=1777,size=64m") != 0)
        return -1;
    return set_attr(NEW_ROOT "/dev", MOUNT_ATTR_RDONLY, false);
}

/* Appends a decimal number to buf (no snprintf in the child). */
static void append_number(char *buf, size_t size, size_t value)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value && n < sizeof digits);
    size_t at = strlen(buf);
    while (n && at < size - 1)
        buf[at++] = digits[--n];
    buf[at] = 0;
}

/* The root's own files and every mount point, created while it is still
 * writable: after seal_system() nothing in it can be created. */
static int build_skeleton(const rbx_root_request *request, const char **step)
{
    *step = "/etc/passwd";
    if (rbx_mkdir_p(NEW_ROOT "/etc", 0755) != 0 ||
        make_file(NEW_ROOT "/etc/passwd", passwd_text) != 0 ||
        make_file(NEW_ROOT "/etc/group", group_text) != 0 ||
        make_file(NEW_ROOT "/etc/hostname", RBX_SANDBOX_HOSTNAME "\n") != 0)
        return -1;
    /* The host's resolver may be on its loopback, which the sandbox cannot
     * reach: names go to the network helper's forwarder instead. */
    *step = "/etc/resolv.conf";
    if (request->nameserver &&
        make_file(NEW_ROOT "/etc/resolv.conf", "nameserver " RBX_SANDBOX_NAMESERVER "\n") != 0)
        return -1;
    *step = "mount points";
    static const char *const points[] = {NEW_ROOT "/dev", NEW_ROOT "/tmp", NEW_ROOT "/proc",
                                         NEW_ROOT RBX_SANDBOX_HOME};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++)
        if (rbx_mkdir_p(points[i], 0755) != 0)
            return -1;
    char dst[RBX_ROOT_PATH_MAX + 16];
    for (size_t i = 0; i < request->bind_count; i++)
        if (!join(dst, sizeof dst, NEW_ROOT, request->binds[i].inside) ||
            rbx_mkdir_p(dst, 0755) != 0)
            return -1;
    return 0;
}

/* One call makes the root and every system bind in it read-only, nosuid
 * and nodev (instead of one call per mount). */
static int seal_system(const char **step)
{
    *step = "make the system read-only";
    return set_attr(NEW_ROOT, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
}

/* Covers what of /proc shows the host (rbx_proc_mask); /proc/sys is kept
 * but read-only. proc is the sandbox's /proc, dev_null its /dev/null. */
static int mask_proc(const rbx_root_plan *plan, const char *proc, const char *dev_null,
                     const char **step)
{
    char dst[RBX_ROOT_PATH_MAX + 32], empty[RBX_ROOT_PATH_MAX + 32] = "";
    for (size_t i = 0; i < plan->mask_count; i++) {
        const rbx_proc_mask *mask = &plan->masks[i];
        *step = mask->name;
        if (!join(dst, sizeof dst, proc, "/") || strlen(dst) + strlen(mask->name) >= sizeof dst)
            return -1;
        strcat(dst, mask->name);
        int rc;
        if (!mask->is_dir)
            rc = mount(dev_null, dst, NULL, MS_BIND, NULL);
        else if (empty[0]) /* one empty directory, bound over the others */
            rc = mount(empty, dst, NULL, MS_BIND, NULL);
        else if ((rc = mount("runbox-masked", dst, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                             "mode=0555,size=4k,nr_inodes=1")) == 0)
            strcpy(empty, dst);
        if (rc != 0 && errno != ENOENT) /* gone since the plan was made: nothing to cover */
            return -1;
        if (rc == 0 && set_attr(dst, MOUNT_ATTR_RDONLY, false) != 0)
            return -1;
    }
    *step = "/proc/sys";
    if (!join(dst, sizeof dst, proc, "/sys") || mount(dst, dst, NULL, MS_BIND, NULL) != 0)
        return -1;
    return set_attr(dst, MOUNT_ATTR_RDONLY, false);
}

static int build_scratch(const rbx_root_plan *plan, const char **step)
{
    char options[64] = "mode=1777,size=";
    append_number(options, sizeof options - 2, plan->tmp_size_mb);
    strcat(options, "m");
    *step = "/tmp";
    if (mount("runbox-tmp", NEW_ROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, options) != 0)
        return -1;
    *step = "/proc";
    if (mount("proc", NEW_ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        return -1;
    return mask_proc(plan, NEW_ROOT "/proc", NEW_ROOT "/dev/null", step);
}

static int bind_session(const rbx_root_plan *plan, int session_fd, const char **step)
{
    *step = RBX_SANDBOX_HOME;
    if (session_fd < 0) {
        /* A one-off run: its files live and die with the sandbox. */
        char options[80] = "mode=0700,uid=1000,gid=1000,size=";
        append_number(options, sizeof options - 2, plan->home_size_mb);
        strcat(options, "m");
        return mount("runbox-home", NEW_ROOT RBX_SANDBOX_HOME, "tmpfs", MS_NOSUID | MS_NODEV,
                     options);
    }
    char src[32] = "/proc/self/fd/";
    append_number(src, sizeof src, (size_t)session_fd);
    if (mount(src, NEW_ROOT RBX_SANDBOX_HOME, NULL, MS_BIND, NULL) != 0)
        return -1;
    return set_attr(NEW_ROOT RBX_SANDBOX_HOME, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
}

static int pivot(const char **step)
{
    *step = "pivot_root";
    if (chdir(NEW_ROOT) != 0 || syscall(SYS_pivot_root, ".", ".") != 0)
        return -1;
    /* The old root is stacked under the new one: detach it entirely. */
    *step = "detach the old root";
    if (umount2(".", MNT_DETACH) != 0 || chdir("/") != 0)
        return -1;
    return 0;
}

/* Prepare: everything that does not depend on the session. A sandbox
 * prepared ahead of time would stop after this step and wait. */
static int prepare_root(const rbx_root_plan *plan, const rbx_root_request *request,
                        const char **step)
{
    *step = "mount the new root";
    if (mount("runbox-root", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") != 0)
        return -1;
    if (build_skeleton(request, step) || build_system(plan, step) || seal_system(step))
        return -1;
    return build_dev(step) || build_scratch(plan, step) ? -1 : 0;
}

/* Binds the request's host directories, opened before the uid switch. */
static int bind_extra(const rbx_root_request *request, const int *fds, const char **step)
{
    char src[32], dst[RBX_ROOT_PATH_MAX + 16];
    for (size_t i = 0; i < request->bind_count; i++) {
        const rbx_bind *b = &request->binds[i];
        *step = b->inside;
        strcpy(src, "/proc/self/fd/");
        append_number(src, sizeof src, (size_t)fds[i]);
        if (!join(dst, sizeof dst, NEW_ROOT, b->inside) ||
            mount(src, dst, NULL, MS_BIND, NULL) != 0 ||
            set_attr(dst,
                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b->writable ? 0 : MOUNT_ATTR_RDONLY),
                     false) != 0)
            return -1;
        close(fds[i]);
    }
    return 0;
}

/* Assign: the session's directory comes in, and the root is sealed. (A
 * prepared sandbox would receive it as a detached mount instead of a path.) */
static int assign_session(const rbx_root_plan *plan, const rbx_root_request *request,
                          int session_fd, const int *bind_fds, const char **step)
{
    int rc = bind_session(plan, session_fd, step);
    if (session_fd >= 0)
        close(session_fd);
    if (rc == 0)
        rc = bind_extra(request, bind_fds, step);
    return rc ? -1 : pivot(step);
}

/* Opened in our own mount namespace (a bind needs a source there), and
 * before leaving the host's uid, which may be the only one allowed to
 * traverse the state directory. The last component is never a link. */
static int open_host_dir(const char *path)
{
    return open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int rbx_root_enter(const rbx_root_plan *plan, const rbx_root_request *request, const char **step)
{
    *step = "make mounts private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    *step = "open the session directory";
    int session_fd = -1, bind_fds[RBX_MAX_BINDS];
    if (request->session_path && (session_fd = open_host_dir(request->session_path)) < 0)
        return -1;
    for (size_t i = 0; i < request->bind_count; i++) {
        *step = request->binds[i].host;
        if ((bind_fds[i] = open_host_dir(request->binds[i].host)) < 0)
            return -1;
    }
    if (request->become_root) {
        /* Files are created in the new root below: that needs a uid that
         * exists in the namespace. The host's uid 0 is left behind. */
        *step = "become the sandbox's root";
        if (rbx_setgroups_none() != 0 || rbx_setresgid_uid(0) != 0)
            return -1;
    }
    if (prepare_root(plan, request, step) != 0)
        return -1;
    return assign_session(plan, request, session_fd, bind_fds, step);
}
