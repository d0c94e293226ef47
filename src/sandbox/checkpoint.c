/* A kernel's sandbox to disk and back with criu (see checkpoint.h). */
#include "sandbox/checkpoint.h"
#include "base/error.h"
#include "egress/dns.h"
#include "egress/policy.h"
#include "egress/rules.h"
#include "sandbox/cgroup.h"
#include "sandbox/net.h"
#include "sandbox/template.h"
#include "sandbox/uids.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/mount.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long criu may take to dump or restore a tree (a kernel of a few
 * hundred MB writes in well under this). */
#define CRIU_WAIT_MS 120000
#define CRIU_ARGS 32 + 2 * RBX_CHECKPOINT_MOUNTS
#define PATH_SIZE 4400
/* What a restore hands to the tree: stdout, stderr, the exit report, stdin
 * and a terminal at most. */
#define RESTORE_KEPT 5

bool rbx_checkpoint_possible(const rbx_sandbox *sandbox, const rbx_sandbox_spec *spec, char *why,
                             size_t why_size)
{
    const char *no = NULL;
    if (!spec->is_root)
        no = "runbox is not root (criu must be)";
    else if (!sandbox->channel_inside && !spec->bare)
        no = "its init did not make the kernel's channel (no runbox-init in its root)";
    else if (spec->bare && !sandbox->init_executed)
        no = "its init is a copy of runbox, not runbox-init (none in its root)";
    else if (spec->network == RBX_NET_HOST)
        no = "it shares the host's network";
    else if (spec->template_ns < 0)
        no = "there is no prepared namespace to restore its root from";
    if (no)
        snprintf(why, why_size, "%s", no);
    return no == NULL;
}

/* --- running criu ------------------------------------------------------------------------- */

/* The first line of criu's log that says Error, but for its probes of
 * the host it shrugs off and its closing "... FAILED.": the cause, not
 * its consequences. Else its last line. */
static void log_error(const char *dir, const char *log, char *out, size_t size)
{
    static const char *const shrugged[] = {"kerndat", "net.c:1253", "RLIMIT_NOFILE for self",
                                           "FAILED."};
    char path[PATH_SIZE];
    snprintf(path, sizeof path, "%s/%s", dir, log);
    snprintf(out, size, "criu left no log at %.300s", path);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0])
            continue;
        bool error = strstr(line, "Error") != NULL;
        for (size_t i = 0; error && i < sizeof shrugged / sizeof shrugged[0]; i++)
            error = !strstr(line, shrugged[i]);
        snprintf(out, size, "%.300s", line + strspn(line, " "));
        if (error)
            break;
    }
    fclose(f);
}

typedef int (*child_setup)(void *arg);

/* Runs criu (argv) in a child that first calls setup (system calls only:
 * runbox has other threads). Returns criu's exit status, or -1 with errno
 * (ETIMEDOUT once it was killed for taking too long). after_fork runs in
 * the parent while the child waits, when not NULL. */
static int run_criu(const char *criu, char *const *argv, child_setup setup, void *arg,
                    int (*after_fork)(pid_t child, void *arg))
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* criu goes with the thread that runs it (a runbox that dies). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
            _exit(126);
        if (setup && setup(arg) != 0)
            _exit(125);
        /* criu runs the host's tools by name (iptables-save for a network
         * namespace, where the kernel has iptables; ip; tar), most of them
         * in sbin, which the PATH of the runbox that started this one, a
         * user's shell's, may lack. */
        static char *const env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                                    "/sbin:/bin",
                                    "LC_ALL=C", NULL};
        execve(criu, argv, env);
        _exit(127);
    }
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (after_fork && after_fork(pid, arg) != 0) {
        int error = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (pidfd >= 0)
            close(pidfd);
        errno = error;
        return -1;
    }
    int64_t deadline = rbx_now_ms() + CRIU_WAIT_MS;
    bool timed_out = false;
    while (pidfd >= 0) {
        int64_t left = deadline - rbx_now_ms();
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int n = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {
            timed_out = true;
            kill(pid, SIGKILL);
        }
        break;
    }
    if (pidfd >= 0)
        close(pidfd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        errno = ETIMEDOUT;
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Keeps every capability across a change of uid (and into an execve, as
 * ambient ones): criu checks that it holds them. */
static int keep_capabilities(void)
{
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &header, data) != 0)
        return -1;
    data[0].inheritable = data[0].permitted;
    data[1].inheritable = data[1].permitted;
    if (syscall(SYS_capset, &header, data) != 0)
        return -1;
    for (int cap = 0; cap < 64; cap++)
        if (data[cap / 32].permitted & (1u << (cap % 32)))
            (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0);
    return prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP);
}

/* The uid that owns the user namespace of process pid, or of its
 * ancestor that is a child of runbox's own: a restored sandbox's user
 * namespace is a child of its restorer's (see checkpoint.h), whose owner
 * holds every capability over both. */
static int namespace_owner(pid_t pid, uid_t *owner)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat own, parent;
    if (fd < 0 || stat("/proc/self/ns/user", &own) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    for (int depth = 0; depth < 32; depth++) {
        int up = ioctl(fd, NS_GET_PARENT);
        if (up < 0 || fstat(up, &parent) != 0) {
            if (up >= 0)
                close(up);
            break;
        }
        if (parent.st_ino == own.st_ino && parent.st_dev == own.st_dev) {
            close(up);
            int rc = ioctl(fd, NS_GET_OWNER_UID, owner);
            close(fd);
            return rc;
        }
        close(fd);
        fd = up;
    }
    close(fd);
    errno = EPERM;
    return -1;
}

/* --- the network -------------------------------------------------------------------------- */

typedef struct egress_sockets {
    int nl, dns; /* dns < -1: not wanted */
} egress_sockets;

/* In the sandbox's network namespace: a netlink socket for its rules and,
 * when wanted, the resolver's on its loopback, as init makes them for a
 * new sandbox (spawn.c); runbox holds both. */
static int open_egress_sockets(void *arg)
{
    egress_sockets *s = arg;
    s->nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (s->nl < 0)
        return -1;
    if (s->dns < -1)
        return 0;
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(53)};
    s->dns = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->dns >= 0 && inet_pton(AF_INET, RBX_SANDBOX_NAMESERVER, &at.sin_addr) == 1 &&
        bind(s->dns, (struct sockaddr *)&at, sizeof at) == 0)
        return 0;
    int error = errno;
    close(s->nl);
    if (s->dns >= 0)
        close(s->dns);
    s->nl = s->dns = -1;
    errno = error;
    return -1;
}

static int sockets_in(int pidfd, int *nl, int *dns)
{
    egress_sockets s = {.nl = -1, .dns = dns ? -1 : -2};
    int rc = rbx_net_in_sandbox(pidfd, open_egress_sockets, &s);
    *nl = s.nl;
    if (dns)
        *dns = s.dns;
    return rc;
}

/* Before a checkpoint: the sandbox's tap device goes (its only descriptor
 * is the network helper's, outside the tree: criu cannot carry it), with
 * the egress policy's rules and resolver, which a restore makes anew. Its
 * open connections are lost. */
static int detach_network(rbx_sandbox *sandbox)
{
    if (sandbox->egress) {
        int nl;
        if (sockets_in(sandbox->pidfd, &nl, NULL) != 0)
            return -1;
        int rc = rbx_egress_rules_remove(nl);
        close(nl);
        if (rc != 0)
            return -1;
        rbx_egress_guard_stop(sandbox->egress);
        sandbox->egress = NULL;
    }
    rbx_net_helper_stop(&sandbox->net);
    if (rbx_net_tap_remove(sandbox->pidfd) != 0)
        return -1;
    /* The device goes once the kernel has let go of it (an RCU grace
     * period or so after its last descriptor closed). */
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%d/net/dev", (int)sandbox->pid);
    for (int64_t until = rbx_now_ms() + 2000; rbx_now_ms() < until; usleep(2000)) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n < 0)
            return -1;
        text[n] = 0;
        if (!strstr(text, "tap0:"))
            return 0;
    }
    errno = EBUSY;
    return -1;
}

/* After a restore, as release_init gives a new sandbox its network: the
 * tap device, the egress policy's rules and resolver, the helper. */
static rbx_status attach_network(const rbx_sandbox_spec *spec, rbx_sandbox *sandbox,
                                 rbx_error *err)
{
    int tap = rbx_net_tap(sandbox->pidfd, err);
    if (tap < 0)
        return err->status;
    if (spec->egress) {
        int nl, dns;
        if (sockets_in(sandbox->pidfd, &nl, &dns) != 0) {
            close(tap);
            return rbx_fail(err, RBX_ESYSTEM, "cannot open the egress policy's sockets: %s",
                            strerror(errno));
        }
        if (rbx_egress_plan_has_rules(spec->egress) &&
            rbx_egress_rules_install(nl, spec->egress, err) != RBX_OK) {
            close(nl);
            close(dns);
            close(tap);
            return err->status;
        }
        sandbox->egress = rbx_egress_guard_start(nl, dns, spec->egress, err);
        if (!sandbox->egress) {
            close(tap);
            return err->status;
        }
    }
    return rbx_net_helper_start(tap, &sandbox->net, err);
}

rbx_status rbx_sandbox_network_back(const rbx_sandbox_spec *spec, rbx_sandbox *sandbox,
                                    rbx_error *err)
{
    if (spec->network != RBX_NET_OUTSIDE || sandbox->net.link)
        return RBX_OK; /* none, or never taken down */
    return attach_network(spec, sandbox, err);
}

/* --- the checkpoint ----------------------------------------------------------------------- */

static int pipe_inode(int fd, unsigned long long *ino)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
        return -1;
    *ino = (unsigned long long)st.st_ino;
    return 0;
}

/* The tree's mounts criu cannot carry in its images: every one but the
 * root (rebuilt from the prepared namespace), proc and the tmpfs the
 * sandbox made itself (criu keeps their contents); /dev is the prepared
 * namespace's (device nodes cannot be made inside a user namespace). */
static int find_external_mounts(pid_t pid, rbx_checkpoint *cp)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[2048];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        char mountpoint[RBX_ROOT_PATH_MAX], fstype[64];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %383s", mountpoint) != 1 ||
            sscanf(dash + 3, "%63s", fstype) != 1) {
            rc = -1;
            break;
        }
        if (!strcmp(mountpoint, "/") || !strcmp(fstype, "proc") ||
            (!strcmp(fstype, "tmpfs") && strcmp(mountpoint, "/dev") != 0))
            continue;
        /* Mount points are runbox's own paths: none has a character
         * mountinfo escapes. */
        if (strchr(mountpoint, '\\') || cp->mount_count == RBX_CHECKPOINT_MOUNTS) {
            errno = E2BIG;
            rc = -1;
            break;
        }
        char inside[PATH_SIZE];
        snprintf(inside, sizeof inside, "/proc/%d/root%s", (int)pid, mountpoint);
        struct stat st;
        if (lstat(inside, &st) != 0) {
            rc = -1;
            break;
        }
        snprintf(cp->mounts[cp->mount_count].inside, RBX_ROOT_PATH_MAX, "%s", mountpoint);
        cp->mounts[cp->mount_count++].is_dir = S_ISDIR(st.st_mode);
    }
    fclose(f);
    return rc;
}

typedef struct dump_child {
    uid_t owner;
} dump_child;

static int dump_setup(void *arg)
{
    dump_child *c = arg;
    if (keep_capabilities() != 0)
        return -1;
    /* Real and effective: iptables, which criu runs, refuses a process
     * whose two differ. */
    return (int)syscall(SYS_setresuid, c->owner, c->owner, -1);
}

/* The slave of the terminal whose master is master_fd: criu's name for it. */
static int tty_of(int master_fd, unsigned long long *rdev, unsigned long long *dev)
{
    int slave = ioctl(master_fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    int rc = slave >= 0 ? fstat(slave, &st) : -1;
    if (slave >= 0)
        close(slave);
    if (rc != 0)
        return -1;
    *rdev = (unsigned long long)st.st_rdev;
    *dev = (unsigned long long)st.st_dev;
    return 0;
}

rbx_status rbx_sandbox_checkpoint(rbx_sandbox *sandbox, const rbx_checkpoint_outside *outside,
                                  const char *criu, const char *dir, rbx_checkpoint *out,
                                  rbx_error *err)
{
    *out = (rbx_checkpoint){.channel_fd = outside->channel_fd};
    pid_t init = sandbox->pid;
    bool terminal = outside->master_fd >= 0;
    if ((!terminal && (pipe_inode(sandbox->stdout_fd, &out->stdout_pipe) ||
                       pipe_inode(sandbox->stderr_fd, &out->stderr_pipe))) ||
        pipe_inode(sandbox->status_fd, &out->status_pipe) ||
        (outside->stdin_fd >= 0 && pipe_inode(outside->stdin_fd, &out->stdin_pipe)))
        return rbx_fail(err, RBX_ESYSTEM, "the sandbox's input or output is not a pipe");
    if (terminal && tty_of(outside->master_fd, &out->tty_rdev, &out->tty_dev) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot find the sandbox's terminal: %s",
                        strerror(errno));
    if (find_external_mounts(init, out) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot read the kernel's mounts: %s", strerror(errno));
    if (detach_network(sandbox) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot take the kernel's network down: %s",
                        strerror(errno));
    dump_child c = {0};
    if (namespace_owner(init, &c.owner) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot read the kernel's user namespace: %s",
                        strerror(errno));
    char pid_text[16], keys[RBX_CHECKPOINT_MOUNTS][RBX_ROOT_PATH_MAX + 40], tty_key[64];
    snprintf(pid_text, sizeof pid_text, "%d", (int)init);
    char *argv[CRIU_ARGS];
    size_t n = 0;
    argv[n++] = "criu";
    argv[n++] = "dump";
    argv[n++] = "--tree";
    argv[n++] = pid_text;
    argv[n++] = "--images-dir";
    argv[n++] = (char *)dir;
    argv[n++] = "--log-file";
    argv[n++] = "dump.log";
    /* As the namespace's owner (see checkpoint.h); the network lock
     * (iptables rules around the dump) needs the host's root and is
     * pointless here: the tree has no connections out. */
    argv[n++] = "--unprivileged";
    argv[n++] = "--network-lock";
    argv[n++] = "skip";
    for (size_t i = 0; i < out->mount_count; i++) {
        snprintf(keys[i], sizeof keys[i], "mnt[%s]:m%zu", out->mounts[i].inside, i);
        argv[n++] = "--external";
        argv[n++] = keys[i];
    }
    if (terminal) {
        snprintf(tty_key, sizeof tty_key, "tty[%llx:%llx]", out->tty_rdev, out->tty_dev);
        argv[n++] = "--external";
        argv[n++] = tty_key;
    }
    argv[n] = NULL;
    int rc = run_criu(criu, argv, dump_setup, &c, NULL);
    int error = errno;
    if (rc < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot run criu to checkpoint the kernel: %s",
                        strerror(error));
    if (rc != 0) {
        char why[400];
        log_error(dir, "dump.log", why, sizeof why);
        return rbx_fail(err, RBX_ESYSTEM, "criu could not checkpoint the kernel (exit %d): %s", rc,
                        why);
    }
    return RBX_OK;
}

/* --- the restore -------------------------------------------------------------------------- */

typedef struct restore_child {
    int cgroup_fds[RBX_CGROUP_MAX_FDS];
    size_t cgroup_count;
    int template_ns;
    const char *stage; /* an empty directory the child mounts a tmpfs on, privately */
    char root_path[PATH_SIZE];
    size_t count;
    const char *inside[RBX_CHECKPOINT_MOUNTS];
    bool is_dir[RBX_CHECKPOINT_MOUNTS];
    int tree[RBX_CHECKPOINT_MOUNTS]; /* the request's detached dirs; -1: the prepared one's */
    char path[RBX_CHECKPOINT_MOUNTS][PATH_SIZE];
    uid_t owner;
    int to_child, from_child; /* the uid map handshake: the child's ends */
    int child_said, tell_child; /* ... and the parent's */
    int keep[RESTORE_KEPT];   /* the new pipes' ends (and terminal) criu hands to the tree */
    size_t kept;
    char why[160];            /* the child's failure, as it said it */
} restore_child;

static int clone_tree(const char *path)
{
    return (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
}

static int attach_tree(int tree, const char *at)
{
    return (int)syscall(SYS_move_mount, tree, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH);
}

/* In the child: criu sees the host's files (itself, ip, the images) in a
 * private copy of the host's mount namespace, where a tmpfs on the stage
 * holds the tree's mounts as a new sandbox would have them: the prepared
 * namespace's root, /usr and /dev, the session's directory, the scratch
 * space and the binds. Then a user namespace of the owner's, mapping every
 * id to itself (written by the parent), as its root, with a mount
 * namespace of its own there: the restored tree's namespaces are made
 * below it. And a cgroup namespace, made after the kernel's new cgroup
 * was joined, so that the tree sees that cgroup as its root, as a new
 * sandbox does: criu restores a tree's own cgroup namespace only when it
 * manages cgroups, which it cannot do in a user namespace, so the tree
 * keeps the restorer's. That namespace belongs to the restorer's user
 * namespace, an ancestor of the tree's, where the tree has no
 * capability; criu checkpoints the tree again with it. */
static int restore_failed(restore_child *c, const char *step)
{
    /* System calls only: the decimal errno by hand. */
    char text[128] = "E";
    size_t n = 1;
    int error = errno;
    for (const char *p = step; *p && n < 100; p++)
        text[n++] = *p;
    text[n++] = ':';
    text[n++] = ' ';
    char digits[12];
    int d = 0;
    do
        digits[d++] = (char)('0' + error % 10);
    while ((error /= 10) > 0 && d < 11);
    while (d > 0)
        text[n++] = digits[--d];
    (void)!write(c->from_child, text, n);
    return -1;
}

static int restore_setup(void *arg)
{
    restore_child *c = arg;
    if (rbx_cgroup_join(c->cgroup_fds, c->cgroup_count) != 0)
        return restore_failed(c, "join the kernel's cgroup");
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("runbox-stage", c->stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0)
        return restore_failed(c, "make a mount namespace to restore in");
    int own = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (own < 0 || mkdir(c->root_path, 0755) != 0)
        return restore_failed(c, "make the stage");
    for (size_t i = 0; i < c->count; i++) {
        int made = c->is_dir[i] ? mkdir(c->path[i], 0755)
                                : close(open(c->path[i], O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
        if (made != 0)
            return restore_failed(c, "make a mount point on the stage");
    }
    if (setns(c->template_ns, CLONE_NEWNS) != 0)
        return restore_failed(c, "enter the prepared namespace");
    int root = clone_tree("/");
    for (size_t i = 0; i < c->count; i++)
        if (c->tree[i] < 0 && (c->tree[i] = clone_tree(c->inside[i])) < 0)
            return restore_failed(c, "take a mount of the prepared namespace");
    if (root < 0 || setns(own, CLONE_NEWNS) != 0 || attach_tree(root, c->root_path) != 0)
        return restore_failed(c, "put the root on the stage");
    for (size_t i = 0; i < c->count; i++)
        if (attach_tree(c->tree[i], c->path[i]) != 0)
            return restore_failed(c, "put a mount on the stage");
    char go;
    if (keep_capabilities() != 0 || syscall(SYS_setresuid, -1, c->owner, -1) != 0 ||
        unshare(CLONE_NEWUSER) != 0)
        return restore_failed(c, "make the restorer's user namespace");
    if (write(c->from_child, "u", 1) != 1 || read(c->to_child, &go, 1) != 1)
        return -1;
    if (syscall(SYS_setresgid, 0, 0, 0) != 0 || syscall(SYS_setresuid, 0, 0, 0) != 0 ||
        unshare(CLONE_NEWNS) != 0 || unshare(CLONE_NEWCGROUP) != 0)
        return restore_failed(c, "become the restorer");
    for (size_t i = 0; i < c->kept; i++)
        if (fcntl(c->keep[i], F_SETFD, 0) != 0)
            return restore_failed(c, "pass the sandbox's pipes");
    return 0;
}

static int write_map(pid_t pid, const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    static const char identity[] = "0 0 4294967295\n";
    ssize_t n = write(fd, identity, sizeof identity - 1);
    close(fd);
    return n == (ssize_t)sizeof identity - 1 ? 0 : -1;
}

/* In the parent: the child's user namespace maps every id to itself. */
static int map_restorer(pid_t child, void *arg)
{
    restore_child *c = arg;
    char said[160];
    ssize_t n = read(c->child_said, said, sizeof said - 1);
    if (n != 1 || said[0] != 'u') {
        said[n > 0 ? n : 0] = 0;
        snprintf(c->why, sizeof c->why, "cannot %s", n > 1 ? said + 1 : "start criu");
        errno = EPROTO;
        return -1;
    }
    if (write_map(child, "uid_map") != 0 || write_map(child, "gid_map") != 0)
        return -1;
    return write(c->tell_child, "g", 1) == 1 ? 0 : -1;
}

/* Which detached directory of the request a mount of the tree is, else -1. */
static int request_tree(const rbx_root_request *request, const char *inside)
{
    if (!strcmp(inside, RBX_SANDBOX_HOME))
        return request->home_tree;
    if (!strcmp(inside, "/tmp"))
        return request->tmp_tree;
    for (size_t i = 0; i < request->bind_count; i++)
        if (!strcmp(inside, request->binds[i].inside))
            return request->bind_trees[i];
    return -1;
}

static void close_pair(int *fds)
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    fds[0] = fds[1] = -1;
}

static pid_t read_pid_file(const char *dir)
{
    char path[PATH_SIZE], text[32] = "";
    snprintf(path, sizeof path, "%s/restored.pid", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    return n > 0 ? (pid_t)strtol(text, NULL, 10) : -1;
}

rbx_status rbx_sandbox_restore(const rbx_sandbox_spec *spec, const rbx_checkpoint *cp,
                               const char *criu, const char *dir, rbx_sandbox *sandbox,
                               rbx_error *err)
{
    *sandbox = (rbx_sandbox){.pid = -1, .pidfd = -1, .stdin_fd = -1, .stdout_fd = -1,
                             .stderr_fd = -1, .report_fd = -1, .status_fd = -1};
    int out[2] = {-1, -1}, errs[2] = {-1, -1}, status[2] = {-1, -1}, in[2] = {-1, -1};
    int down[2] = {-1, -1}, up[2] = {-1, -1};
    restore_child *c = calloc(1, sizeof *c);
    rbx_root_request request = spec->root_request;
    request.home_tree = request.tmp_tree = -1;
    for (size_t i = 0; i < RBX_MAX_BINDS; i++)
        request.bind_trees[i] = -1;
    char stage[] = "/tmp/runbox-restore-XXXXXX", why[256];
    bool staged = false;
    rbx_status result = RBX_OK;
    if (!c)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    if ((cp->stdout_pipe && pipe2(out, O_CLOEXEC)) ||
        (cp->stderr_pipe && pipe2(errs, O_CLOEXEC)) || pipe2(status, O_CLOEXEC) ||
        (cp->stdin_pipe && pipe2(in, O_CLOEXEC)) ||
        pipe2(down, O_CLOEXEC) || pipe2(up, O_CLOEXEC) ||
        (in[1] >= 0 && fcntl(in[1], F_SETFL, O_NONBLOCK) != 0)) {
        result = rbx_fail(err, RBX_ESYSTEM, "cannot create pipes: %s", strerror(errno));
        goto out;
    }
    if (cp->tty_rdev && spec->terminal_fd < 0) {
        result = rbx_fail(err, RBX_EINVAL, "the sandbox had a terminal and is given none");
        goto out;
    }
    if (out[1] >= 0)
        (void)fcntl(out[1], F_SETPIPE_SZ, 1 << 20);
    if (rbx_cgroup_probe()->mode != RBX_CGROUP_NONE &&
        rbx_cgroup_create(&spec->limits, &sandbox->cgroup, why, sizeof why) != 0) {
        result = rbx_fail(err, RBX_ESYSTEM, "cannot create the kernel's cgroup: %s", why);
        goto out;
    }
    if (rbx_template_detach_dirs(&request) != 0) {
        result = rbx_fail(err, RBX_ESYSTEM, "cannot detach the session's directories: %s",
                          strerror(errno));
        goto out;
    }
    /* A place any uid may walk to (the restored tree's root opens its
     * mounts there), empty on the host: the child's tmpfs on it is private. */
    if (!mkdtemp(stage) || chmod(stage, 0755) != 0) {
        result = rbx_fail(err, RBX_ESYSTEM, "cannot make a directory in /tmp: %s",
                          strerror(errno));
        goto out;
    }
    staged = true;
    if (sandbox->cgroup) {
        int n = rbx_cgroup_enter_fds(sandbox->cgroup, c->cgroup_fds, RBX_CGROUP_MAX_FDS);
        c->cgroup_count = n > 0 ? (size_t)n : 0;
    }
    c->template_ns = spec->template_ns;
    c->stage = stage;
    snprintf(c->root_path, sizeof c->root_path, "%s/root", stage);
    c->count = cp->mount_count;
    for (size_t i = 0; i < cp->mount_count; i++) {
        c->inside[i] = cp->mounts[i].inside;
        c->is_dir[i] = cp->mounts[i].is_dir;
        c->tree[i] = request_tree(&request, cp->mounts[i].inside);
        snprintf(c->path[i], sizeof c->path[i], "%s/m%zu", stage, i);
    }
    c->owner = RBX_OWNER_UID_BASE + (uid_t)syscall(SYS_gettid);
    c->to_child = down[0];
    c->from_child = up[1];
    c->child_said = up[0];
    c->tell_child = down[1];
    /* The tree's ends of new pipes (and the new terminal) in place of the
     * ones it had, each named as criu saw the old one. */
    char inherit[RESTORE_KEPT][96];
    const struct {
        unsigned long long id; /* 0: the tree had none */
        int fd;
    } pipes[] = {{cp->stdout_pipe, out[1]},
                 {cp->stderr_pipe, errs[1]},
                 {cp->status_pipe, status[1]},
                 {cp->stdin_pipe, in[0]}};
    for (size_t i = 0; i < sizeof pipes / sizeof pipes[0]; i++)
        if (pipes[i].id) {
            snprintf(inherit[c->kept], sizeof inherit[0], "fd[%d]:pipe:[%llu]", pipes[i].fd,
                     pipes[i].id);
            c->keep[c->kept++] = pipes[i].fd;
        }
    if (cp->tty_rdev) {
        snprintf(inherit[c->kept], sizeof inherit[0], "fd[%d]:tty[%llx:%llx]", spec->terminal_fd,
                 cp->tty_rdev, cp->tty_dev);
        c->keep[c->kept++] = spec->terminal_fd;
    }

    char root_arg[PATH_SIZE], pid_file[PATH_SIZE];
    char keys[RBX_CHECKPOINT_MOUNTS][PATH_SIZE + 40];
    snprintf(root_arg, sizeof root_arg, "%s", c->root_path);
    snprintf(pid_file, sizeof pid_file, "%s/restored.pid", dir);
    char *argv[CRIU_ARGS];
    size_t n = 0;
    argv[n++] = "criu";
    argv[n++] = "restore";
    argv[n++] = "--images-dir";
    argv[n++] = (char *)dir;
    argv[n++] = "--log-file";
    argv[n++] = "restore.log";
    argv[n++] = "--pidfile";
    argv[n++] = pid_file;
    argv[n++] = "--restore-detached";
    /* The tree's init becomes this thread's child, as a started one is:
     * its parent-death signal then follows this thread, not criu. */
    argv[n++] = "--restore-sibling";
    argv[n++] = "--unprivileged";
    argv[n++] = "--root";
    argv[n++] = root_arg;
    /* The cgroup is made and joined here, with the spec's limits. */
    argv[n++] = "--manage-cgroups=ignore";
    for (size_t i = 0; i < cp->mount_count; i++) {
        snprintf(keys[i], sizeof keys[i], "mnt[m%zu]:%s", i, c->path[i]);
        argv[n++] = "--external";
        argv[n++] = keys[i];
    }
    for (size_t i = 0; i < c->kept; i++) {
        argv[n++] = "--inherit-fd";
        argv[n++] = inherit[i];
    }
    argv[n] = NULL;
    (void)unlink(pid_file);
    int rc = run_criu(criu, argv, restore_setup, c, map_restorer);
    int error = errno;
    if (rc != 0) {
        char log[400];
        char said[160];
        ssize_t got = rc == 125 ? (fcntl(up[0], F_SETFL, O_NONBLOCK), read(up[0], said, 159)) : -1;
        if (got > 1 && said[0] == 'E')
            snprintf(log, sizeof log, "cannot %.*s", (int)got - 1, said + 1);
        else if (rc < 0)
            snprintf(log, sizeof log, "%s", c->why[0] ? c->why : strerror(error));
        else
            log_error(dir, "restore.log", log, sizeof log);
        result = rbx_fail(err, RBX_ESYSTEM, "criu could not restore the kernel (exit %d): %s",
                          rc, log);
        goto out;
    }
    sandbox->pid = read_pid_file(dir);
    sandbox->pidfd = sandbox->pid > 0 ? (int)syscall(SYS_pidfd_open, sandbox->pid, 0) : -1;
    if (sandbox->pidfd < 0) {
        result = rbx_fail(err, RBX_ESYSTEM, "cannot find the restored kernel: %s",
                          strerror(errno));
        if (sandbox->pid > 0)
            kill(sandbox->pid, SIGKILL);
        sandbox->pid = -1;
        goto out;
    }
    sandbox->stdout_fd = out[0];
    sandbox->stderr_fd = errs[0];
    sandbox->status_fd = status[0];
    sandbox->stdin_fd = in[1];
    out[0] = errs[0] = status[0] = in[1] = -1;
    sandbox->channel_inside = cp->channel_fd >= 0;
    sandbox->init_executed = true;
    if (spec->network == RBX_NET_OUTSIDE && attach_network(spec, sandbox, err) != RBX_OK) {
        result = err->status;
        rbx_sandbox_kill(sandbox);
        rbx_sandbox_reap(sandbox, NULL);
        rbx_sandbox_close(sandbox);
        goto out;
    }
out:
    if (staged)
        (void)rmdir(stage);
    rbx_template_close_dirs(&request);
    free(c);
    close_pair(out);
    close_pair(errs);
    close_pair(status);
    close_pair(in);
    close_pair(down);
    close_pair(up);
    if (result != RBX_OK) {
        rbx_cgroup_destroy(sandbox->cgroup);
        sandbox->cgroup = NULL;
    }
    return result;
}
