/* Building the sandbox's root (see mount.h). Every mount here happens in a
 * mount namespace of the sandbox's own (or of the prepared namespace being
 * built), made private first, so nothing propagates back to the host. Host
 * system paths come in read-only, nosuid and nodev; the session's directory
 * comes in through a descriptor or a detached mount, so no host path walk
 * can be redirected by a link (and its host path need not be reachable). */
#include "sandbox/mount.h"
#include "base/fsutil.h"
#include "sandbox/credentials.h"
#include "sandbox/net.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
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
    "/etc/python3.12",
    "/etc/python3.13",
    "/etc/inputrc",
    "/etc/pip.conf",
    "/etc/xdg/pip",
    "/etc/matplotlibrc",
    "/etc/fonts", /* fontconfig's, for matplotlib's text */
    "/etc/npmrc",
    NULL,
};

/* The host's configuration rather than its software: which certificate
 * authorities to trust (a proxy's own among them), where package mirrors
 * are, names of hosts, the time zone. A sandbox on an image still takes
 * these from the host, so an image built anywhere works behind this
 * host's proxy and mirrors. */
static const char *const host_config[] = {
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pip.conf",
    "/etc/xdg/pip",
    "/etc/npmrc",
    "/etc/hosts",
    "/etc/localtime",
    "/etc/timezone",
    NULL,
};

static bool is_host_config(const char *path)
{
    for (const char *const *p = host_config; *p; p++)
        if (!strcmp(*p, path))
            return true;
    return false;
}

/* The sandbox's own account database: one user, the session's owner. */
static const char passwd_text[] = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                  "user:x:1000:1000:runbox:" RBX_SANDBOX_HOME ":/bin/bash\n"
                                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group_text[] = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n";

/* The harmless character devices, with their numbers for the prepared
 * namespace, which makes its own nodes (a sandbox binds the host's). */
static const struct device {
    const char *name;
    unsigned major, minor;
} devices[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
               {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
#define DEVICE_COUNT (sizeof devices / sizeof devices[0])

/* What of /proc is covered (see rbx_proc_mask), Docker's masked paths
 * among them. What runtimes read stays: cpuinfo, meminfo, stat, uptime,
 * loadavg, version, filesystems, self, net (the sandbox's own), sys.
 * Init's command line too (1/...: init is PID 1 when it mounts /proc):
 * from the program's execve to init's, init's memory is runbox's own
 * (sandbox/starter.h), whose arguments the kernel would show there. */
static const char *const proc_masked[] = {
    "cmdline",     "config.gz",     "modules",    "kallsyms",   "partitions",    "diskstats",
    "swaps",       "locks",         "interrupts", "devices",    "consoles",      "timer_list",
    "sched_debug", "keys",          "key-users",  "bootconfig", "softirqs",      "iomem",
    "ioports",     "misc",          "dma",        "mtrr",       "latency_stats", "timer_stats",
    "kcore",       "sysrq-trigger", "acpi",       "scsi",       "asound",        "bus",
    "driver",      "tty",           "irq",        "fs",         "pressure",      "1/cmdline",
    "1/task/1/cmdline", NULL,
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

/* Where a system path of the root is on the host, and what it is: the
 * host's own path, or for an image the path resolved inside the image's
 * tree (its absolute links lead into the image, never out: RESOLVE_IN_ROOT),
 * through /proc/self/fd. *link is its own target when it is a top-level
 * link (/bin -> usr/bin), recreated as such. Returns false when it is not
 * there. */
static bool locate(const char *tree, const char *path, char *host, size_t host_size,
                   struct stat *st, char *link, size_t link_size)
{
    link[0] = 0;
    char own[RBX_ROOT_PATH_MAX * 2];
    if (snprintf(own, sizeof own, "%s%s", tree ? tree : "", path) >= (int)sizeof own ||
        lstat(own, st) != 0)
        return false;
    if (S_ISLNK(st->st_mode) && strchr(path + 1, '/') == NULL) {
        ssize_t n = readlink(own, link, link_size - 1);
        if (n <= 0)
            return false;
        link[n] = 0;
        return true;
    }
    if (!tree) {
        /* Deeper links (/etc/resolv.conf -> ...) are bound as what they point to. */
        if (stat(path, st) != 0)
            return false;
        snprintf(host, host_size, "%s", path);
        return true;
    }
    int root = open(tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return false;
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
    int fd = (int)syscall(SYS_openat2, root, path + 1, &how, sizeof how);
    close(root);
    if (fd < 0)
        return false;
    char proc[64], real[RBX_ROOT_PATH_MAX * 2];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, real, sizeof real - 1);
    bool ok = n > 0 && (size_t)n < sizeof real - 1 && fstat(fd, st) == 0;
    close(fd);
    if (!ok)
        return false;
    real[n] = 0;
    /* Relative to the tree (rbx_root_plan's tree). */
    size_t len = strlen(tree);
    if (strncmp(real, tree, len) || real[len] != '/' || strlen(real + len + 1) >= host_size)
        return false;
    snprintf(host, host_size, "%s", real + len + 1);
    return true;
}

/* runbox-init beside runbox, opened once (O_PATH): the root's copy is
 * read through it, since its path may be below /tmp, which the new root
 * covers while it is built. */
static int init_program = -1;
static pthread_once_t init_program_once = PTHREAD_ONCE_INIT;

static void open_init_program(void)
{
    char path[4096];
    if (rbx_program_beside("runbox-init", path, sizeof path) == 0)
        init_program = open(path, O_PATH | O_CLOEXEC);
}

int rbx_root_init_program(void)
{
    pthread_once(&init_program_once, open_init_program);
    return init_program;
}

/* runbox-init beside runbox, copied to RBX_SANDBOX_INIT (where there is
 * none, init executes nothing of the root's: see spawn.c). */
static void plan_init(rbx_root_plan *plan)
{
    rbx_root_step *step = &plan->steps[plan->count];
    struct stat st;
    if (plan->count == RBX_ROOT_MAX_STEPS ||
        rbx_program_beside("runbox-init", step->host, sizeof step->host) != 0 ||
        stat(step->host, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > RBX_ROOT_COPY_MAX ||
        !(st.st_mode & S_IROTH))
        return;
    snprintf(step->inside, sizeof step->inside, "%s", RBX_SANDBOX_INIT);
    step->kind = ROOT_COPY;
    step->executable = true;
    step->in_image = step->is_dir = false;
    plan->count++;
}

bool rbx_root_plan_build(rbx_root_plan *plan, const char *const *paths, size_t tmp_size_mb,
                         size_t home_size_mb, const char *image_tree)
{
    memset(plan, 0, sizeof *plan);
    plan->tmp_size_mb = tmp_size_mb ? tmp_size_mb : 256;
    plan->home_size_mb = home_size_mb ? home_size_mb : 1024;
    if (image_tree) {
        char real[PATH_MAX];
        size_t len = realpath(image_tree, real) ? strlen(real) : sizeof plan->tree;
        if (len >= sizeof plan->tree)
            return false;
        memcpy(plan->tree, real, len + 1);
    }
    bool has_usr = false;
    for (const char *const *p = paths ? paths : default_paths; *p; p++) {
        if (plan->count == RBX_ROOT_MAX_STEPS || strlen(*p) >= RBX_ROOT_PATH_MAX || (*p)[0] != '/')
            continue;
        struct stat st;
        rbx_root_step *step = &plan->steps[plan->count];
        char link[RBX_ROOT_PATH_MAX];
        step->in_image = image_tree && !is_host_config(*p);
        if (!locate(step->in_image ? plan->tree : NULL, *p, step->host, sizeof step->host, &st,
                    link, sizeof link))
            continue;
        snprintf(step->inside, sizeof step->inside, "%s", *p);
        if (link[0]) {
            snprintf(step->host, sizeof step->host, "%s", link);
            step->kind = ROOT_SYMLINK;
        } else {
            step->is_dir = S_ISDIR(st.st_mode);
            /* Only what the sandbox's user could read anyway is copied (by
             * init, which no longer is the host's root when it copies). */
            bool small = S_ISREG(st.st_mode) && st.st_size <= RBX_ROOT_COPY_MAX;
            step->kind = small && (st.st_mode & S_IROTH) ? ROOT_COPY : ROOT_BIND_RO;
            has_usr |= step->is_dir && !strcmp(*p, "/usr");
        }
        plan->count++;
    }
    plan_init(plan);
    plan_proc_masks(plan);
    return has_usr;
}

void rbx_root_plan_add_point(rbx_root_plan *plan, const char *inside)
{
    for (size_t i = 0; i < plan->point_count; i++)
        if (!strcmp(plan->points[i], inside))
            return;
    if (plan->point_count < RBX_ROOT_MAX_POINTS && strlen(inside) < RBX_ROOT_PATH_MAX)
        snprintf(plan->points[plan->point_count++], RBX_ROOT_PATH_MAX, "%s", inside);
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

/* Copies a host file into the new root (sendfile: no buffer, no
 * allocation). A regular file comes whole in calls of `chunk` bytes; a
 * short count means its end. */
static int copy_file(const char *src, const char *dst, mode_t mode, size_t chunk)
{
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* host paths of the plan */
    if (in < 0)
        return -1;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    ssize_t n = out < 0 ? -1 : (ssize_t)chunk;
    while (n == (ssize_t)chunk)
        n = sendfile(out, in, NULL, chunk);
    int saved = errno;
    close(in);
    if (out >= 0)
        close(out);
    errno = saved;
    return n >= 0 ? 0 : -1;
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

static void fd_path(char *buf, size_t size, int fd)
{
    strcpy(buf, "/proc/self/fd/");
    append_number(buf, size, (size_t)fd);
}

/* --- copying a host directory into the prepared namespace's root --------------------- */

/* The prepared namespace copies the small /etc directories it shows
 * (certificates, alternatives, Python's settings) once, instead of binding
 * each: fewer mounts for every sandbox to copy. Only what anyone may read
 * is copied (/etc/ssl/private stays out), and within bounds; past them the
 * directory is bound instead. */
#define TREE_MAX_DEPTH 6
#define TREE_MAX_ENTRIES 4096
#define TREE_MAX_BYTES (8u << 20)

typedef struct tree_budget {
    size_t entries, bytes;
} tree_budget;

struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int copy_tree_raw(const char *src, const char *dst, int depth, tree_budget *budget);

static int copy_entry_raw(const char *src, const char *dst, int depth, tree_budget *budget)
{
    struct stat st;
    if (lstat(src, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (++budget->entries > TREE_MAX_ENTRIES) {
        errno = EFBIG;
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        char target[RBX_ROOT_PATH_MAX * 2];
        ssize_t n = readlink(src, target, sizeof target - 1);
        if (n < 0)
            return -1;
        target[n] = 0;
        return symlink(target, dst);
    }
    if (!(st.st_mode & S_IROTH))
        return 0; /* not the sandbox's to read */
    if (S_ISDIR(st.st_mode)) {
        if (!(st.st_mode & S_IXOTH) || depth >= TREE_MAX_DEPTH)
            return 0;
        if (mkdir(dst, 0755) != 0)
            return -1;
        return copy_tree_raw(src, dst, depth + 1, budget);
    }
    if (!S_ISREG(st.st_mode))
        return 0;
    budget->bytes += (size_t)st.st_size;
    if (budget->bytes > TREE_MAX_BYTES) {
        errno = EFBIG;
        return -1;
    }
    return copy_file(src, dst, 0644, 1 << 20);
}

static int copy_tree_raw(const char *src, const char *dst, int depth, tree_budget *budget)
{
    int fd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    int rc = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        for (long at = 0; at < n && rc == 0;) {
            struct linux_dirent64 *entry = (void *)(buf + at);
            at += entry->d_reclen;
            const char *name = entry->d_name;
            if (!strcmp(name, ".") || !strcmp(name, ".."))
                continue;
            char from[RBX_ROOT_PATH_MAX * 2], to[RBX_ROOT_PATH_MAX * 2];
            if (!join(from, sizeof from, src, "/") || !join(to, sizeof to, dst, "/") ||
                strlen(from) + strlen(name) >= sizeof from ||
                strlen(to) + strlen(name) >= sizeof to) {
                errno = ENAMETOOLONG;
                rc = -1;
                break;
            }
            strcat(from, name);
            strcat(to, name);
            rc = copy_entry_raw(from, to, depth, budget);
        }
        if (rc != 0)
            break;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* --- the parts of the root ------------------------------------------------------------ */

/* /usr in the prepared namespace: an overlay of the host's /usr (read-only,
 * no upper layer), so that the sandbox's mount table names "runbox", not
 * the host's block device nor the path of an image's tree. The kernel
 * shows an overlay's options as they were given, so it is made after the
 * pivot, from paths of the new root: build_system() binds the host's /usr
 * at /usr, the overlay of it goes up at /tmp (overlayfs wants two lower
 * layers: the second is /tmp's own empty directory, which every sandbox
 * covers), the bind is detached (the overlay holds its layers) and the
 * overlay moves to /usr. Its options read "lowerdir=/usr:/tmp". */
static int overlay_usr(const rbx_root_plan *plan, const char **step)
{
    bool has_usr = false;
    for (size_t i = 0; i < plan->count; i++)
        has_usr |= plan->steps[i].is_dir && !strcmp(plan->steps[i].inside, "/usr");
    if (!has_usr)
        return 0;
    *step = "/usr";
    if (mount("runbox", "/tmp", "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
              "lowerdir=/usr:/tmp") != 0 ||
        umount2("/usr", MNT_DETACH) != 0 || mount("/tmp", "/usr", NULL, MS_MOVE, NULL) != 0)
        return -1;
    return 0;
}

static int build_system(const rbx_root_plan *plan, int tree_fd, bool template, const char **step)
{
    char dst[RBX_ROOT_PATH_MAX + 16], parent[RBX_ROOT_PATH_MAX + 16], made[sizeof parent] = "";
    char source[RBX_ROOT_PATH_MAX + 32];
    for (size_t i = 0; i < plan->count; i++) {
        const rbx_root_step *s = &plan->steps[i];
        *step = s->inside;
        const char *host = s->host;
        if (s->in_image && s->kind != ROOT_SYMLINK) {
            snprintf(source, sizeof source, "/proc/self/fd/%d/%s", tree_fd, s->host);
            host = source;
        } else if (s->executable) {
            if (init_program < 0)
                continue; /* not opened before this child was made: init runs runbox's */
            fd_path(source, sizeof source, init_program);
            host = source;
        }
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
        int rc;
        tree_budget budget = {0};
        if (s->kind == ROOT_SYMLINK)
            rc = symlink(s->host, dst) != 0 && errno != EEXIST ? -1 : 0;
        else if (s->kind == ROOT_COPY)
            rc = copy_file(host, dst, s->executable ? 0555 : 0644, RBX_ROOT_COPY_MAX);
        else if (template && s->is_dir && strcmp(s->inside, "/usr") != 0 &&
                 mkdir(dst, 0755) == 0 &&
                 copy_tree_raw(host, dst, 0, &budget) == 0)
            rc = 0;
        else /* made read-only with the whole root, in seal_system() */
            rc = bind_ro(host, dst, s->is_dir, 0);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* A minimal /dev: the harmless character devices, standard links and the
 * mount point of a private /dev/shm. The prepared namespace makes its own
 * nodes (it is root on the host then: no sandbox can make any); a sandbox
 * building its own root binds the host's. */
static int build_dev(bool template, const char **step)
{
    *step = "/dev";
    if (mount("runbox-dev", NEW_ROOT "/dev", "tmpfs",
              MS_NOSUID | MS_NOEXEC | (template ? 0 : MS_NODEV),
              "mode=0755,size=64k,nr_inodes=64") != 0)
        return -1;
    char src[64], dst[64];
    for (size_t i = 0; i < DEVICE_COUNT; i++) {
        *step = devices[i].name;
        if (!join(src, sizeof src, "/dev/", devices[i].name) ||
            !join(dst, sizeof dst, NEW_ROOT "/dev/", devices[i].name))
            return -1;
        if (access(src, F_OK) != 0)
            continue;
        if (template) {
            if (mknod(dst, S_IFCHR | 0666, makedev(devices[i].major, devices[i].minor)) != 0 ||
                chmod(dst, 0666) != 0) /* past the umask */
                return -1;
        } else if (bind_ro(src, dst, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC) != 0) {
            return -1;
        }
    }
    *step = "/dev links";
    if (symlink("/proc/self/fd", NEW_ROOT "/dev/fd") ||
        symlink("/proc/self/fd/0", NEW_ROOT "/dev/stdin") ||
        symlink("/proc/self/fd/1", NEW_ROOT "/dev/stdout") ||
        symlink("/proc/self/fd/2", NEW_ROOT "/dev/stderr"))
        return -1;
    *step = "/dev/shm";
    if (mkdir(NEW_ROOT "/dev/shm", 0755) != 0)
        return -1;
    return set_attr(NEW_ROOT "/dev", MOUNT_ATTR_RDONLY, false);
}

/* The root's own files and every mount point, created while it is still
 * writable: after seal_system() nothing in it can be created. */
static int build_skeleton(const rbx_root_plan *plan, const rbx_root_request *request,
                          const char **step)
{
    *step = "/etc/passwd";
    if (rbx_mkdir_p(NEW_ROOT "/etc", 0755) != 0 ||
        make_file(NEW_ROOT "/etc/passwd", passwd_text) != 0 ||
        make_file(NEW_ROOT "/etc/group", group_text) != 0 ||
        make_file(NEW_ROOT "/etc/hostname", RBX_SANDBOX_HOSTNAME "\n") != 0)
        return -1;
    /* Names go to runbox's resolver on the sandbox's own loopback, which
     * applies the egress policy (the host's resolver may be on the host's
     * loopback anyway, which the sandbox cannot reach). The prepared
     * namespace serves both kinds: without the network, nothing listens
     * there and a lookup fails at once. */
    *step = "/etc/resolv.conf";
    if ((!request || request->nameserver) &&
        make_file(NEW_ROOT "/etc/resolv.conf", "nameserver " RBX_SANDBOX_NAMESERVER "\n") != 0)
        return -1;
    *step = "mount points";
    static const char *const points[] = {NEW_ROOT "/dev", NEW_ROOT "/tmp", NEW_ROOT "/proc",
                                         NEW_ROOT RBX_SANDBOX_HOME};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++)
        if (rbx_mkdir_p(points[i], 0755) != 0)
            return -1;
    char dst[RBX_ROOT_PATH_MAX + 16];
    for (size_t i = 0; i < plan->point_count; i++)
        if (!join(dst, sizeof dst, NEW_ROOT, plan->points[i]) || rbx_mkdir_p(dst, 0755) != 0)
            return -1;
    for (size_t i = 0; request && i < request->bind_count; i++)
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
 * but read-only. root is "" or NEW_ROOT.
 *
 * The first file's cover (/dev/null) and the first directory's (an empty
 * tmpfs) are made read-only; every other cover is bound from one of those
 * two and is read-only as they are (a bind copies its source mount's
 * flags): one system call per mask instead of two. */
static int mask_proc(const rbx_root_plan *plan, const char *root, const char **step)
{
    char proc[RBX_ROOT_PATH_MAX], dev_null[RBX_ROOT_PATH_MAX];
    char dst[RBX_ROOT_PATH_MAX + 32], empty[RBX_ROOT_PATH_MAX + 32] = "",
                                      null[RBX_ROOT_PATH_MAX + 32] = "";
    if (!join(proc, sizeof proc, root, "/proc") ||
        !join(dev_null, sizeof dev_null, root, "/dev/null"))
        return -1;
    for (size_t i = 0; i < plan->mask_count; i++) {
        const rbx_proc_mask *mask = &plan->masks[i];
        *step = mask->name;
        if (!join(dst, sizeof dst, proc, "/") || strlen(dst) + strlen(mask->name) >= sizeof dst)
            return -1;
        strcat(dst, mask->name);
        char *first = mask->is_dir ? empty : null;
        int rc;
        if (first[0])
            rc = mount(first, dst, NULL, MS_BIND, NULL);
        else if (!mask->is_dir)
            rc = mount(dev_null, dst, NULL, MS_BIND, NULL);
        else
            rc = mount("runbox-masked", dst, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       "mode=0555,size=4k,nr_inodes=1");
        if (rc != 0 && errno != ENOENT) /* gone since the plan was made: nothing to cover */
            return -1;
        if (rc == 0 && !first[0]) {
            if (set_attr(dst, MOUNT_ATTR_RDONLY, false) != 0)
                return -1;
            strcpy(first, dst);
        }
    }
    *step = "/proc/sys";
    if (!join(dst, sizeof dst, proc, "/sys") || mount(dst, dst, NULL, MS_BIND, NULL) != 0)
        return -1;
    return set_attr(dst, MOUNT_ATTR_RDONLY, false);
}

/* The sandbox's own boot id. /proc/sys/kernel/random/boot_id is the
 * host's, the same in every sandbox and stable until the host reboots: a
 * program could tell which sandboxes share a host, or that the host stayed
 * up. A random one (a version 4 UUID, as the kernel makes) goes in a file
 * of the sandbox's /dev/shm, bound read-only over the host's, and the file
 * is unlinked: /dev/shm is empty again, and the bind holds the only name
 * of it. The bind cannot be undone inside: seccomp refuses umount, the
 * program has no capability, and a user namespace made below would get it
 * locked. root is "" (in place) or NEW_ROOT (before the pivot).
 *
 * In a sandbox a checkpoint may take (named), the file keeps its name,
 * /dev/shm/.boot_id: criu restores a tmpfs from its names, and the bind of
 * an unlinked file came back empty. It belongs to the namespace's root and
 * /dev/shm is sticky, so the program can neither remove nor replace it. */
static int own_boot_id(const char *root, bool named, const char **step)
{
    *step = "the sandbox's boot id";
    unsigned char bytes[16];
    if (syscall(SYS_getrandom, bytes, sizeof bytes, 0) != (long)sizeof bytes)
        return -1;
    bytes[6] = (unsigned char)((bytes[6] & 0x0f) | 0x40); /* version 4 */
    bytes[8] = (unsigned char)((bytes[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    static const char hex[] = "0123456789abcdef";
    char text[38];
    size_t at = 0;
    for (size_t i = 0; i < sizeof bytes; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            text[at++] = '-';
        text[at++] = hex[bytes[i] >> 4];
        text[at++] = hex[bytes[i] & 15];
    }
    text[at++] = '\n';
    text[at] = 0;
    char file[RBX_ROOT_PATH_MAX], dst[RBX_ROOT_PATH_MAX];
    if (!join(file, sizeof file, root, "/dev/shm/.boot_id") ||
        !join(dst, sizeof dst, root, "/proc/sys/kernel/random/boot_id"))
        return -1;
    if (make_file(file, text) != 0 || chmod(file, 0444) != 0)
        return -1;
    int rc = mount(file, dst, NULL, MS_BIND, NULL);
    if (rc == 0)
        rc = set_attr(dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                               MOUNT_ATTR_NOEXEC,
                      false);
    int saved = errno;
    if (!named || rc != 0)
        (void)unlink(file);
    errno = saved;
    /* A kernel without the file (no CONFIG_PROC_SYSCTL): nothing to cover. */
    return rc != 0 && errno == ENOENT ? 0 : rc;
}

/* Puts a host directory at dst: a detached mount (from the prepared
 * namespace's parent), or one opened here before the uid switch. */
static int attach(int tree, int fd, const char *dst, unsigned attrs)
{
    if (tree >= 0) {
        int rc = (int)syscall(SYS_move_mount, tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
        close(tree);
        return rc;
    }
    char src[32];
    fd_path(src, sizeof src, fd);
    int rc = mount(src, dst, NULL, MS_BIND, NULL);
    close(fd);
    return rc ? -1 : set_attr(dst, attrs, false);
}

static int mount_sized_tmpfs(const char *name, const char *dst, const char *prefix, size_t mb)
{
    char options[96];
    strcpy(options, prefix);
    append_number(options, sizeof options - 2, mb);
    strcat(options, "m");
    return mount(name, dst, "tmpfs", MS_NOSUID | MS_NODEV, options);
}

/* Descriptors of host directories a sandbox building its own root opens
 * before leaving the host's uid, which may be the only one allowed to
 * traverse the state directory. -1 where there is none. */
typedef struct host_dirs {
    int home, tmp, binds[RBX_MAX_BINDS];
} host_dirs;

/* What each sandbox mounts for itself, whichever way its root was made:
 * /proc of its own PID namespace (masked), /tmp, /dev/shm, its home and
 * its binds. root is "" (in place) or NEW_ROOT (before the pivot). */
static int mount_own_parts(const rbx_root_plan *plan, const rbx_root_request *request,
                           const host_dirs *dirs, const char *root, const char **step)
{
    char dst[RBX_ROOT_PATH_MAX + 32];
    *step = "/proc";
    if (!join(dst, sizeof dst, root, "/proc") ||
        mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 ||
        mask_proc(plan, root, step) != 0)
        return -1;
    *step = "/tmp";
    if (!join(dst, sizeof dst, root, "/tmp"))
        return -1;
    if (request->tmp_tree >= 0 || dirs->tmp >= 0
            ? attach(request->tmp_tree, dirs->tmp, dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
            : mount_sized_tmpfs("runbox-tmp", dst, "mode=1777,size=", plan->tmp_size_mb))
        return -1;
    *step = "/dev/shm";
    if (!join(dst, sizeof dst, root, "/dev/shm") ||
        mount("runbox-shm", dst, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") != 0 ||
        own_boot_id(root, request->boot_id_named, step) != 0)
        return -1;
    *step = RBX_SANDBOX_HOME;
    if (!join(dst, sizeof dst, root, RBX_SANDBOX_HOME))
        return -1;
    /* A one-off run without scratch space: its files live and die with
     * the sandbox. */
    if (request->home_tree >= 0 || dirs->home >= 0
            ? attach(request->home_tree, dirs->home, dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
            : mount_sized_tmpfs("runbox-home", dst,
                                "mode=0700,uid=1000,gid=1000,size=", plan->home_size_mb))
        return -1;
    for (size_t i = 0; i < request->bind_count; i++) {
        const rbx_bind *b = &request->binds[i];
        *step = b->inside;
        unsigned attrs =
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b->writable ? 0 : MOUNT_ATTR_RDONLY);
        if (!join(dst, sizeof dst, root, b->inside) ||
            attach(request->bind_trees[i], dirs->binds[i], dst, attrs) != 0)
            return -1;
    }
    return 0;
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

/* Opened in our own mount namespace (a bind needs a source there), and
 * before leaving the host's uid. The last component is never a link. */
static int open_host_dir(const char *path)
{
    return path ? open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
}

static int become_namespace_root(const char **step)
{
    /* Files are created in the new root: that needs a uid that exists in
     * the namespace. The host's uid 0 is left behind. */
    *step = "become the sandbox's root";
    return rbx_setgroups_none() != 0 || rbx_setresgid_uid(0) != 0 ? -1 : 0;
}

/* The root built in the sandbox's copy of the host's namespace. */
static int build_own_root(const rbx_root_plan *plan, const rbx_root_request *request,
                          const char **step)
{
    *step = "make mounts private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    host_dirs dirs = {.home = -1, .tmp = -1, .binds = {-1, -1}};
    *step = "open the session directory";
    if (request->session_path && (dirs.home = open_host_dir(request->session_path)) < 0)
        return -1;
    *step = "open the scratch directory";
    if (request->tmp_path && (dirs.tmp = open_host_dir(request->tmp_path)) < 0)
        return -1;
    for (size_t i = 0; i < request->bind_count; i++) {
        *step = request->binds[i].host;
        if ((dirs.binds[i] = open_host_dir(request->binds[i].host)) < 0)
            return -1;
    }
    *step = "open the image";
    int tree = plan->tree[0] ? open(plan->tree, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    if (plan->tree[0] && tree < 0)
        return -1;
    if (request->become_root && become_namespace_root(step) != 0)
        return -1;
    *step = "mount the new root";
    if (mount("runbox-root", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") != 0)
        return -1;
    if (build_skeleton(plan, request, step) || build_system(plan, tree, false, step) ||
        seal_system(step) || build_dev(false, step))
        return -1;
    if (tree >= 0)
        close(tree);
    if (mount_own_parts(plan, request, &dirs, NEW_ROOT, step) != 0)
        return -1;
    return pivot(step);
}

int rbx_root_enter(const rbx_root_plan *plan, const rbx_root_request *request, const char **step)
{
    if (!request->from_template)
        return build_own_root(plan, request, step);
    /* A copy of the prepared namespace: "/" is the sandbox's root already. */
    host_dirs none = {.home = -1, .tmp = -1, .binds = {-1, -1}};
    if (request->become_root && become_namespace_root(step) != 0)
        return -1;
    if (mount_own_parts(plan, request, &none, "", step) != 0)
        return -1;
    *step = "enter the root";
    return chdir("/");
}

int rbx_root_prepare_template(const rbx_root_plan *plan, const char **step)
{
    *step = "make mounts private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    *step = "open the image";
    int tree = plan->tree[0] ? open(plan->tree, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    if (plan->tree[0] && tree < 0)
        return -1;
    *step = "mount the new root";
    if (mount("runbox-root", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") != 0)
        return -1;
    if (build_skeleton(plan, NULL, step) || build_system(plan, tree, true, step) ||
        seal_system(step) || build_dev(true, step) || pivot(step) || overlay_usr(plan, step))
        return -1;
    if (tree >= 0)
        close(tree);
    /* A proc the sandboxes' own can be mounted over (the kernel lets a
     * user namespace mount proc only where one is fully visible), mounted
     * after the seal so that theirs may be writable. Its PID namespace is
     * the builder's, empty once the builder is gone. */
    *step = "/proc";
    return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}
