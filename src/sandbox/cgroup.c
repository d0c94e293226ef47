/* Per-execution cgroups (see cgroup.h).
 *
 * Layout: on v1 each hierarchy carrying a controller we use gets
 * <mount>/runbox/exec-<random>; on v2 there is one <base>/runbox/exec-<random>,
 * where base is the hierarchy's root as root, or the delegated parent of our
 * own cgroup when unprivileged. Executions therefore leave the supervisor's
 * own cgroup: its limits are not theirs, and runbox never creates anything
 * inside a cgroup some other manager owns. */
#include "sandbox/cgroup.h"
#include "base/owner.h"
#include "base/spares.h"
#include "kernels/wire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The controllers used. cpuacct (CPU time) exists only on v1; v2 has it
 * built in. The v1 freezer only for cgroups made freezable (a paused E2B
 * sandbox's processes): killing the sandbox's init ends its PID namespace,
 * so no process of an execution can outrun the kill, and one more v1
 * hierarchy would cost every execution a mkdir, a join and an rmdir. v2
 * freezes any cgroup (cgroup.freeze), with no controller. */
enum { CTL_MEMORY = 1, CTL_PIDS = 2, CTL_CPU = 4, CTL_CPUACCT = 8, CTL_FREEZER = 16 };
#define CTL_COUNT 5
_Static_assert(RBX_CGROUP_MAX_FDS >= CTL_COUNT, "one fd per hierarchy, at most one per controller");
static const char *const ctl_names[CTL_COUNT] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

#define DESTROY_ROUNDS 500 /* times 10 ms */

typedef struct hierarchy {
    char base[PATH_MAX]; /* the directory that holds runbox/ */
    unsigned ctls;
} hierarchy;

/* Written once under pthread_once, read-only afterwards. */
static struct {
    pthread_once_t once;
    rbx_cgroup_support pub;
    hierarchy h[CTL_COUNT]; /* at most one hierarchy per controller */
    size_t n;
} probe = {.once = PTHREAD_ONCE_INIT};

struct rbx_cgroup {
    bool v2;
    char name[64]; /* exec-<runbox's mark: pid-s<start> (base/owner.h)>-<16 hex digits> */
    size_t n;      /* = probe.n */
    struct {
        char path[PATH_MAX]; /* "" when not (or no longer) there */
        unsigned ctls;
        int procs_fd;
    } h[CTL_COUNT];
    int dir_fd; /* v2 only */
    bool frozen;              /* rbx_cgroup_freeze made it so */
    bool limited;             /* set_limits has run */
    rbx_cgroup_limits limits; /* what it set, field by field (0: never set) */
    bool freezable;           /* made so: never kept as a spare */
    /* A spare's (see keep_spare): its CPU time when it was given out
     * again, read as a difference from then (a spare never saw an OOM
     * kill). */
    uint64_t cpu_base_usec;
};

static void really_destroy(rbx_cgroup *cg);
static rbx_cgroup *take_spare(const rbx_cgroup_limits *limits);
static bool keep_spare(rbx_cgroup *cg);

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t size, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    if (why && size)
        vsnprintf(why, size, fmt, ap);
    va_end(ap);
    errno = saved;
    return -1;
}

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    size_t len = strlen(probe.pub.detail);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(probe.pub.detail + len, sizeof probe.pub.detail - len, fmt, ap);
    va_end(ap);
}

static int path_join(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

static int write_at(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    if (path_join(path, sizeof path, dir, name) != 0)
        return -1;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)len ? 0 : -1;
}

/* Reads dir/name into buf, NUL-terminated; returns its length or -1. */
static ssize_t read_at(const char *dir, const char *name, char *buf, size_t size)
{
    char path[PATH_MAX];
    if (path_join(path, sizeof path, dir, name) != 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t n = 0;
    while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
        len += (size_t)n;
    int saved = errno;
    close(fd);
    buf[len] = '\0';
    errno = saved;
    return n < 0 ? -1 : (ssize_t)len;
}

/* Reads a number from dir/name: the whole file, or the value of its
 * "key N" line. A missing directory, file or line (this kernel does not
 * have it) gives 0; other failures -1. */
static int read_value(const char *dir, const char *name, const char *key, uint64_t *value)
{
    char buf[4096];
    *value = 0;
    if (!dir)
        return 0;
    if (read_at(dir, name, buf, sizeof buf) < 0)
        return errno == ENOENT ? 0 : -1;
    const char *p = buf;
    size_t klen = key ? strlen(key) : 0;
    while (key && !(strncmp(p, key, klen) == 0 && p[klen] == ' ')) {
        p = strchr(p, '\n');
        if (!p)
            return 0;
        p++;
    }
    *value = strtoull(p + (key ? klen + 1 : 0), NULL, 10);
    return 0;
}

/* The controllers of ours named in a space- or comma-separated list. */
static unsigned ctl_parse(char *list)
{
    unsigned ctls = 0;
    char *save;
    for (char *w = strtok_r(list, " ,\n", &save); w; w = strtok_r(NULL, " ,\n", &save))
        for (int i = 0; i < CTL_COUNT; i++)
            if (strcmp(w, ctl_names[i]) == 0)
                ctls |= 1u << i;
    return ctls;
}

static unsigned ctl_file(const char *dir, const char *name)
{
    char buf[512];
    return read_at(dir, name, buf, sizeof buf) < 0 ? 0 : ctl_parse(buf);
}

/* Records a v1 hierarchy carrying some of our controllers (its super
 * options name them: "rw,cpu,cpuacct"); bind mounts of one seen are skipped. */
static void add_v1(const char *mount, char *options)
{
    unsigned ctls = ctl_parse(options);
    for (size_t i = 0; i < probe.n; i++)
        if (probe.h[i].ctls & ctls)
            return;
    if (ctls && probe.n < CTL_COUNT) {
        snprintf(probe.h[probe.n].base, PATH_MAX, "%s", mount);
        probe.h[probe.n++].ctls = ctls;
    }
}

/* The usual layouts, from where their mounts are: /sys/fs/cgroup itself a
 * cgroup2 (pure v2), or a tmpfs holding a directory per v1 hierarchy named
 * after its controllers as /proc/self/cgroup lists them ("cpu,cpuacct"),
 * and cgroup2 at unified/ (hybrid). Hierarchies are added by id, which is
 * the order they were first mounted in, as the mount table lists them.
 * False (nothing added) when a hierarchy of our controllers is not where
 * the layout puts it: the mount table says then. Reading the mount table
 * costs with every mount of the host (1.7 us a line here; thousands of
 * lines on a busy container host) and this does not. */
#define CGROUP_V1_MAGIC 0x27e0eb
#define CGROUP_V2_MAGIC 0x63677270
#define TMPFS_FS_MAGIC 0x01021994
#define STANDARD_ROOT "/sys/fs/cgroup"

static bool fs_is(const char *path, long magic)
{
    struct statfs fs;
    return statfs(path, &fs) == 0 && (long)fs.f_type == magic;
}

static bool scan_standard(char *v2, size_t v2_size)
{
    if (fs_is(STANDARD_ROOT, CGROUP_V2_MAGIC)) {
        snprintf(v2, v2_size, "%s", STANDARD_ROOT);
        return true;
    }
    FILE *f = fs_is(STANDARD_ROOT, TMPFS_FS_MAGIC) ? fopen("/proc/self/cgroup", "re") : NULL;
    if (!f)
        return false;
    struct {
        long id;
        char ctls[128];
    } found[16];
    size_t n = 0;
    char line[PATH_MAX + 160];
    bool usual = true;
    while (usual && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':'), *end = colon ? strchr(colon + 1, ':') : NULL;
        if (!end || end - colon - 1 >= (long)sizeof found[0].ctls)
            continue;
        long id = strtol(line, NULL, 10);
        *end = 0;
        char copy[128];
        snprintf(copy, sizeof copy, "%s", colon + 1);
        if (id == 0 || !ctl_parse(copy))
            continue; /* v2's line, or a hierarchy of none of ours */
        if (n == sizeof found / sizeof found[0]) {
            usual = false;
            break;
        }
        found[n].id = id;
        snprintf(found[n++].ctls, sizeof found[0].ctls, "%s", colon + 1);
    }
    fclose(f);
    for (size_t i = 1; usual && i < n; i++) /* by id: a handful */
        for (size_t j = i; j > 0 && found[j - 1].id > found[j].id; j--) {
            __typeof__(found[0]) t = found[j];
            found[j] = found[j - 1];
            found[j - 1] = t;
        }
    char dirs[16][PATH_MAX];
    for (size_t i = 0; usual && i < n; i++)
        usual = snprintf(dirs[i], PATH_MAX, "%s/%s", STANDARD_ROOT, found[i].ctls) < PATH_MAX &&
                fs_is(dirs[i], CGROUP_V1_MAGIC);
    if (!usual || n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        add_v1(dirs[i], found[i].ctls);
    if (fs_is(STANDARD_ROOT "/unified", CGROUP_V2_MAGIC))
        snprintf(v2, v2_size, "%s", STANDARD_ROOT "/unified");
    return true;
}

/* Fills probe.h with the v1 hierarchies and v2 with the first cgroup2 mount. */
static void scan_mounts(char *v2, size_t v2_size)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        char mount[PATH_MAX], type[32], options[256];
        const char *sep = strstr(line, " - ");
        if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mount) != 1 ||
            sscanf(sep + 3, "%31s %*s %255s", type, options) != 2)
            continue;
        if (strcmp(type, "cgroup2") == 0 && !v2[0])
            snprintf(v2, v2_size, "%s", mount);
        else if (strcmp(type, "cgroup") == 0)
            add_v1(mount, options);
    }
    free(line);
    fclose(f);
}

/* Where runbox/ goes on v2. As root: the hierarchy's root, which works
 * whatever cgroup runbox was started in. Unprivileged: the parent of our
 * own cgroup (the 0:: line of /proc/self/cgroup), usable when delegated to
 * us, i.e. runbox runs in a leaf of a delegated subtree. Our own cgroup
 * cannot serve: it holds this process, and v2 enables no controllers below
 * a cgroup with processes. */
static void v2_base(const char *mount, char *base, size_t size)
{
    char own[PATH_MAX] = "";
    FILE *f = geteuid() == 0 ? NULL : fopen("/proc/self/cgroup", "re");
    if (f) {
        while (fgets(own, sizeof own, f) && strncmp(own, "0::", 3) != 0)
            own[0] = '\0';
        fclose(f);
    }
    char *slash = strrchr(own, '/');
    if (strncmp(own, "0::", 3) != 0 || !slash)
        slash = own;
    *slash = '\0'; /* "0::/a/b\n" becomes "0::/a", "0::/a" and "0::/" become "0::" */
    snprintf(base, size, "%s%s", mount, own[0] ? own + 3 : "");
}

/* Whether we may create runbox/exec-* below base: write access to runbox/
 * if it exists, else to base. Sets errno when not. */
static bool creatable(const char *base)
{
    char runbox[PATH_MAX];
    if (path_join(runbox, sizeof runbox, base, "runbox") != 0)
        return false;
    if (access(runbox, W_OK) == 0)
        return true;
    return errno == ENOENT && access(base, W_OK) == 0;
}

/* v2's rules beyond write access, or NULL. Moving our children into
 * runbox/exec-* needs write access to the common ancestor's cgroup.procs
 * (base's, when unprivileged). Controllers can be enabled below base only
 * if base has no processes, or is the root (which has no cgroup.type). */
static const char *v2_obstacle(const char *base, unsigned ctls)
{
    char path[PATH_MAX], buf[64];
    if (geteuid() != 0 &&
        (path_join(path, sizeof path, base, "cgroup.procs") != 0 || access(path, W_OK) != 0))
        return "its cgroup.procs is not writable (the subtree is not delegated to this user)";
    if ((ctl_file(base, "cgroup.subtree_control") & ctls) == ctls)
        return NULL;
    if (path_join(path, sizeof path, base, "cgroup.type") != 0 || access(path, F_OK) != 0)
        return NULL;
    if (read_at(base, "cgroup.procs", buf, sizeof buf) > 0)
        return "it holds processes, and cgroup v2 enables no controllers below such a cgroup";
    return NULL;
}

/* Checks every hierarchy; lists them, or turns the mode to NONE saying why. */
static void check_usable(void)
{
    rbx_cgroup_support *s = &probe.pub;
    unsigned all = 0;
    for (size_t i = 0; i < probe.n; i++) {
        const hierarchy *h = &probe.h[i];
        const char *obstacle = creatable(h->base) ? NULL : strerror(errno);
        if (!obstacle && s->mode == RBX_CGROUP_V2)
            obstacle = v2_obstacle(h->base, h->ctls);
        if (obstacle) {
            note("; cannot create cgroups below %s: %s", h->base, obstacle);
            if (geteuid() != 0)
                note(s->mode == RBX_CGROUP_V1 ? " (cgroup v1 needs root)"
                                              : " (unprivileged, run runbox in a leaf cgroup of "
                                                "a v2 subtree delegated to you)");
            s->mode = RBX_CGROUP_NONE;
            probe.n = 0;
            return;
        }
        note("; %s:", h->base);
        for (int c = 0; c < CTL_COUNT; c++)
            if (h->ctls & (1u << c))
                note(" %s", ctl_names[c]);
        all |= h->ctls;
    }
    s->memory = all & CTL_MEMORY;
    s->pids = all & CTL_PIDS;
    s->cpu = all & CTL_CPU;
    s->freezer = s->mode == RBX_CGROUP_V2 || (all & CTL_FREEZER);
    note("; executions go in runbox/exec-* below each");
}

static void run_probe(void)
{
    char v2[PATH_MAX] = "", base[PATH_MAX] = "";
    if (!scan_standard(v2, sizeof v2))
        scan_mounts(v2, sizeof v2);
    unsigned v1 = 0;
    for (size_t i = 0; i < probe.n; i++)
        v1 |= probe.h[i].ctls;
    if (v2[0])
        v2_base(v2, base, sizeof base);
    unsigned v2_ctls = v2[0] ? ctl_file(base, "cgroup.controllers") : 0;
    if (v2_ctls & CTL_MEMORY) {
        probe.pub.mode = RBX_CGROUP_V2;
        probe.n = 1;
        snprintf(probe.h[0].base, PATH_MAX, "%s", base);
        probe.h[0].ctls = v2_ctls;
        note("cgroup v2");
    } else if (v1 & CTL_MEMORY) {
        probe.pub.mode = RBX_CGROUP_V1;
        /* A hierarchy of the freezer alone goes last: the first is every
         * cgroup's (the sweep lists it), which a freezer's is not. */
        for (size_t i = 0; i + 1 < probe.n; i++)
            if (probe.h[i].ctls == CTL_FREEZER) {
                hierarchy freezer = probe.h[i];
                memmove(&probe.h[i], &probe.h[i + 1], (probe.n - i - 1) * sizeof probe.h[0]);
                probe.h[probe.n - 1] = freezer;
                break;
            }
        note("cgroup v1");
        if (v2[0])
            note(" (hybrid: the cgroup2 at %s has no memory controller)", v2);
    } else {
        note("no usable memory controller: no cgroup v1 memory hierarchy, %s%s%s",
             v2[0] ? "and none in " : "and no cgroup2", base, v2[0] ? "/cgroup.controllers" : "");
        probe.n = 0;
        return;
    }
    check_usable();
}

/* Removes exec-* cgroups left by a runbox that was killed before it could
 * (SIGKILL, a crash). The name carries the pid of the runbox that made the
 * cgroup: once that runbox is gone its cgroups go too, at the next
 * runbox's start, whatever their age. Names without a pid (or of a pid
 * this process cannot judge) wait a minute, past the few milliseconds
 * between a cgroup's creation and its execution joining it. */
#define STALE_AFTER_S 60

static void kill_listed(const char *dir, const char *name);

/* When the last sweep started (CLOCK_MONOTONIC, ns): see rbx_cgroup_sweep. */
static _Atomic int64_t last_sweep_ns = INT64_MIN / 2;

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* An exec-* directory is created in the first hierarchy first and removed
 * from it last (remove_dirs), so listing that one finds every leftover.
 * Processes still in one (an init on its way out) are killed first. */
static void sweep_stale(void)
{
    atomic_store(&last_sweep_ns, monotonic_ns());
    time_t now = time(NULL);
    char runbox[PATH_MAX];
    DIR *dir =
        path_join(runbox, sizeof runbox, probe.h[0].base, "runbox") == 0 ? opendir(runbox) : NULL;
    struct dirent *entry;
    /* After this process's first sweep, its own cgroups (its running and
     * prepared sandboxes', most of the listing in a busy server) are
     * judged by name alone: no system call for them, so the sweep before
     * each execution costs little however many run at once. The first
     * sweep judges them like any other, since a runbox gone before this
     * one started may have had the same pid. */
    static atomic_bool swept_once;
    pid_t self = atomic_load(&swept_once) ? getpid() : 0;
    rbx_owner_memo owners = {0};
    while (dir && (entry = readdir(dir))) {
        struct stat st;
        rbx_owner_id id = {0};
        if (strncmp(entry->d_name, "exec-", 5) == 0)
            (void)rbx_owner_parse(entry->d_name + 5, &id);
        if (strncmp(entry->d_name, "exec-", 5) != 0 || (self && id.pid == self) ||
            fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        rbx_owner_state owner = rbx_owner_state_id(&owners, &id, st.st_mtim.tv_sec);
        if (owner == RBX_OWNER_ALIVE ||
            (owner == RBX_OWNER_UNKNOWN && now - st.st_mtim.tv_sec < STALE_AFTER_S))
            continue;
        for (size_t i = probe.n; i-- > 0;) {
            char path[PATH_MAX];
            if (snprintf(path, sizeof path, "%s/runbox/%s", probe.h[i].base, entry->d_name) >=
                (int)sizeof path)
                continue;
            /* A paused sandbox's, frozen when its runbox was killed: its
             * tasks die only once thawed (v1), killed first. */
            if (probe.h[i].ctls & CTL_FREEZER) {
                kill_listed(path, entry->d_name);
                (void)write_at(path, "freezer.state", "THAWED");
            }
            for (int tries = 0; rmdir(path) != 0 && errno == EBUSY && tries < 50; tries++) {
                kill_listed(path, entry->d_name);
                nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
            }
        }
    }
    if (dir) {
        closedir(dir);
        atomic_store(&swept_once, true);
    }
}

/* A sweep lists runbox/, whose entries are every sandbox running or
 * prepared on the host, and judges the other processes' entries with a
 * system call each: made before every execution, its cost would grow with
 * the host's load. At most one a second keeps it flat; a leftover waits at
 * most that long longer. */
#define SWEEP_EVERY_NS 1000000000LL

void rbx_cgroup_sweep(void)
{
    if (rbx_cgroup_probe()->mode == RBX_CGROUP_NONE)
        return;
    int64_t now = monotonic_ns();
    int64_t last = atomic_load(&last_sweep_ns);
    if (now - last >= SWEEP_EVERY_NS && atomic_compare_exchange_strong(&last_sweep_ns, &last, now))
        sweep_stale();
}

static void run_probe_and_sweep(void)
{
    run_probe();
    if (probe.pub.mode != RBX_CGROUP_NONE)
        sweep_stale();
}

const rbx_cgroup_support *rbx_cgroup_probe(void)
{
    pthread_once(&probe.once, run_probe_and_sweep);
    return &probe.pub;
}

/* v2: a controller works in a cgroup only once enabled in its parent's
 * cgroup.subtree_control; enables what is missing, one at a time. */
static int enable_v2(const char *dir, unsigned ctls)
{
    unsigned missing = ctls & ~ctl_file(dir, "cgroup.subtree_control");
    for (int i = 0; i < CTL_COUNT; i++) {
        char word[16];
        snprintf(word, sizeof word, "+%s", ctl_names[i]);
        if ((missing & (1u << i)) && write_at(dir, "cgroup.subtree_control", word) != 0)
            return -1;
    }
    return 0;
}

/* The controllers (v2; v1: 1) this process made sure of below hierarchy
 * i's runbox directory, which it made or found. A mkdir of a cgroup that
 * exists is no cheap failure: the kernel makes the cgroup, under its global
 * lock, before it finds the name taken, and frees it again; every
 * execution paid that once a hierarchy (four on v1). */
static _Atomic unsigned parent_ready[CTL_COUNT];

static int make_parent(const rbx_cgroup *cg, size_t i, const char *runbox, unsigned v2_ctls,
                       char *why, size_t why_size)
{
    const hierarchy *h = &probe.h[i];
    if (mkdir(runbox, 0755) != 0 && errno != EEXIST)
        return fail(why, why_size, "cannot create %s/runbox: %s", h->base, strerror(errno));
    if (cg->v2 && (enable_v2(h->base, v2_ctls) != 0 || enable_v2(runbox, v2_ctls) != 0))
        return fail(why, why_size, "cannot enable cgroup controllers below %s: %s", h->base,
                    strerror(errno));
    atomic_fetch_or(&parent_ready[i], cg->v2 ? v2_ctls : 1u);
    return 0;
}

/* Creates base/runbox (shared, kept) and runbox/<name> in hierarchy i and
 * opens its cgroup.procs. On v2, enables v2_ctls on the way down. */
static int make_dir(rbx_cgroup *cg, size_t i, unsigned v2_ctls, char *why, size_t why_size)
{
    const hierarchy *h = &probe.h[i];
    char runbox[PATH_MAX], procs[PATH_MAX];
    if (path_join(runbox, sizeof runbox, h->base, "runbox") != 0)
        return fail(why, why_size, "cannot create %s/runbox: %s", h->base, strerror(errno));
    unsigned wanted = cg->v2 ? v2_ctls : 1u;
    bool known = (atomic_load(&parent_ready[i]) & wanted) == wanted;
    if (!known && make_parent(cg, i, runbox, v2_ctls, why, why_size) != 0)
        return -1;
    if (path_join(cg->h[i].path, PATH_MAX, runbox, cg->name) != 0) {
        cg->h[i].path[0] = '\0';
        return fail(why, why_size, "cannot create %s/%s: %s", runbox, cg->name, strerror(errno));
    }
    int made = mkdir(cg->h[i].path, 0755);
    /* Gone since (an operator removed it): made again, once. */
    if (made != 0 && errno == ENOENT && known) {
        atomic_store(&parent_ready[i], 0);
        if (make_parent(cg, i, runbox, v2_ctls, why, why_size) != 0) {
            cg->h[i].path[0] = '\0';
            return -1;
        }
        made = mkdir(cg->h[i].path, 0755);
    }
    if (made != 0) {
        int error = errno;
        cg->h[i].path[0] = '\0';
        errno = error;
        return fail(why, why_size, "cannot create %s/%s: %s", runbox, cg->name, strerror(errno));
    }
    cg->h[i].ctls = h->ctls;
    /* v1: the joiner is single-threaded (init, right after clone), so its
     * thread is moved through "tasks": moving a whole thread group through
     * cgroup.procs takes the global threadgroup lock for writing, which
     * waits for an RCU grace period (10+ ms on a busy host) each time. */
    const char *join_file = cg->v2 ? "cgroup.procs" : "tasks";
    if (path_join(procs, sizeof procs, cg->h[i].path, join_file) != 0 ||
        (cg->h[i].procs_fd = open(procs, O_WRONLY | O_CLOEXEC)) < 0)
        return fail(why, why_size, "cannot open %s: %s", procs, strerror(errno));
    return 0;
}

static const char *dir_with(const rbx_cgroup *cg, unsigned ctl)
{
    for (size_t i = 0; i < cg->n; i++)
        if ((cg->h[i].ctls & ctl) && cg->h[i].path[0])
            return cg->h[i].path;
    return NULL;
}

/* Swap is limited with memory, or the limit would only push pages to swap:
 * v2 memory.swap.max = 0, v1 memory+swap = the memory limit. Without swap
 * accounting (no such file) the kernel cannot limit it; v1 then at least
 * keeps the cgroup's own reclaim from swapping (swappiness 0). */
static int limit_swap(bool v2, const char *mem, const char *limit)
{
    int r = v2 ? write_at(mem, "memory.swap.max", "0")
               : write_at(mem, "memory.memsw.limit_in_bytes", limit);
    if (r == 0 || errno != ENOENT)
        return r;
    return v2 ? 0 : write_at(mem, "memory.swappiness", "0");
}

/* The CPU quota: v2's cpu.max "QUOTA PERIOD"; v1's CFS bandwidth files
 * (the period first, so that the quota is never checked against another
 * period). The kernel takes at least 1 ms of quota. */
static int set_quota(bool v2, const char *cpu, uint64_t quota_us, char *why, size_t ws)
{
    char num[64];
    if (quota_us < 1000)
        quota_us = 1000;
    int r;
    if (v2) {
        snprintf(num, sizeof num, "%" PRIu64 " %d", quota_us, RBX_CPU_PERIOD_US);
        r = write_at(cpu, "cpu.max", num);
    } else {
        snprintf(num, sizeof num, "%d", RBX_CPU_PERIOD_US);
        r = write_at(cpu, "cpu.cfs_period_us", num);
        snprintf(num, sizeof num, "%" PRIu64, quota_us);
        r = r ? r : write_at(cpu, "cpu.cfs_quota_us", num);
    }
    return r ? fail(why, ws, "cannot set the CPU quota in %s: %s", cpu, strerror(errno)) : 0;
}

/* v1 memory cgroups inherit oom_kill_disable from their parent: it is
 * cleared, or a program at its limit would hang instead of being killed. */
/* Writes only what differs from what the cgroup has: a prepared sandbox's
 * cgroup is given its execution's limits, most often those it was made
 * with, and each write is an open, a write and a close of a cgroup file
 * on the way to the result. A limit of 0 leaves the cgroup's as it is. */
static int set_limits(rbx_cgroup *cg, const rbx_cgroup_limits *l, char *why, size_t ws)
{
    const char *mem = dir_with(cg, CTL_MEMORY), *cpu = dir_with(cg, CTL_CPU);
    const rbx_cgroup_limits *had = &cg->limits;
    char num[32];
    if (!cg->v2 && !cg->limited && write_at(mem, "memory.oom_control", "0") != 0)
        return fail(why, ws, "cannot enable the OOM killer in %s: %s", mem, strerror(errno));
    cg->limited = true;
    snprintf(num, sizeof num, "%" PRIu64, l->memory_bytes);
    if (l->memory_bytes && l->memory_bytes != had->memory_bytes &&
        (write_at(mem, cg->v2 ? "memory.max" : "memory.limit_in_bytes", num) != 0 ||
         limit_swap(cg->v2, mem, num) != 0))
        return fail(why, ws, "cannot set the memory limit in %s: %s", mem, strerror(errno));
    if (l->memory_bytes)
        cg->limits.memory_bytes = l->memory_bytes;
    snprintf(num, sizeof num, "%" PRIu64, l->pids);
    if (l->pids && l->pids != had->pids && write_at(dir_with(cg, CTL_PIDS), "pids.max", num) != 0)
        return fail(why, ws, "cannot set pids.max: %s", strerror(errno));
    if (l->pids)
        cg->limits.pids = l->pids;
    /* v1's cpu.shares: default 1024 (v2's weight 100), range 2..262144. */
    uint64_t shares = (uint64_t)l->cpu_weight * 1024 / 100;
    snprintf(num, sizeof num, "%" PRIu64, cg->v2 ? l->cpu_weight : shares < 2 ? 2 : shares);
    if (l->cpu_weight && l->cpu_weight != had->cpu_weight &&
        write_at(cpu, cg->v2 ? "cpu.weight" : "cpu.shares", num) != 0)
        return fail(why, ws, "cannot set the CPU weight in %s: %s", cpu, strerror(errno));
    if (l->cpu_weight)
        cg->limits.cpu_weight = l->cpu_weight;
    if (l->cpu_quota_us && l->cpu_quota_us != had->cpu_quota_us &&
        set_quota(cg->v2, cpu, l->cpu_quota_us, why, ws) != 0)
        return -1;
    if (l->cpu_quota_us)
        cg->limits.cpu_quota_us = l->cpu_quota_us;
    return 0;
}

int rbx_cgroup_create(const rbx_cgroup_limits *limits, rbx_cgroup **out, char *why, size_t why_size)
{
    const rbx_cgroup_support *s = rbx_cgroup_probe();
    *out = NULL;
    if (s->mode == RBX_CGROUP_NONE)
        return fail(why, why_size, "cgroups are unavailable: %s", s->detail);
    if (limits->cpu_weight > 10000)
        return fail(why, why_size, "cpu_weight %u is not in 1..10000", limits->cpu_weight);
    if ((limits->pids && !s->pids) || ((limits->cpu_weight || limits->cpu_quota_us) && !s->cpu))
        return fail(why, why_size, "these limits need a controller missing here: %s", s->detail);
    /* A process that runs many executions (runbox serve, runbox mcp) also
     * sweeps after its first (rbx_cgroup_sweep): one killed outright and
     * restarted within the minute would otherwise leave its cgroups until
     * some later runbox starts. */
    static atomic_bool created_before;
    if (atomic_exchange(&created_before, true))
        rbx_cgroup_sweep();
    rbx_cgroup *cg = take_spare(limits);
    if (cg) {
        if (set_limits(cg, limits, why, why_size) == 0) {
            *out = cg;
            return 0;
        }
        really_destroy(cg); /* a limit it cannot take (below what it holds): a new one */
    }
    cg = calloc(1, sizeof *cg);
    if (!cg)
        return fail(why, why_size, "out of memory");
    cg->v2 = s->mode == RBX_CGROUP_V2;
    cg->n = probe.n;
    cg->dir_fd = -1;
    cg->freezable = limits->freezable;
    for (size_t i = 0; i < CTL_COUNT; i++)
        cg->h[i].procs_fd = -1;
    uint64_t r;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
        fail(why, why_size, "getrandom: %s", strerror(errno));
        goto fail;
    }
    snprintf(cg->name, sizeof cg->name, "exec-%s-%016" PRIx64, rbx_owner_mark(), r);
    /* v2: the cpu controller only when asked for (cpu.stat works without). */
    bool cpu = limits->cpu_weight || limits->cpu_quota_us;
    unsigned v2_ctls = probe.h[0].ctls & (cpu ? ~0u : ~(unsigned)CTL_CPU);
    for (size_t i = 0; i < cg->n; i++)
        if ((limits->freezable || probe.h[i].ctls != CTL_FREEZER) &&
            make_dir(cg, i, v2_ctls, why, why_size) != 0)
            goto fail;
    if (set_limits(cg, limits, why, why_size) != 0)
        goto fail;
    if (cg->v2 && (cg->dir_fd = open(cg->h[0].path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        fail(why, why_size, "cannot open %s: %s", cg->h[0].path, strerror(errno));
        goto fail;
    }
    *out = cg;
    return 0;
fail:
    really_destroy(cg);
    return -1;
}

int rbx_cgroup_update(rbx_cgroup *cg, const rbx_cgroup_limits *limits, char *why, size_t why_size)
{
    return set_limits(cg, limits, why, why_size);
}

int rbx_cgroup_memory_file(const rbx_cgroup *cg, char *path, size_t size)
{
    const char *mem = dir_with(cg, CTL_MEMORY);
    if (!mem)
        return -1;
    return path_join(path, size, mem, cg->v2 ? "memory.current" : "memory.usage_in_bytes");
}

/* The cgroup's own count, a spare's included. */
static int read_oom_kills(const rbx_cgroup *cg, uint64_t *kills)
{
    *kills = 0;
    const char *mem = dir_with(cg, CTL_MEMORY);
    return cg->v2 ? read_value(mem, "memory.events", "oom_kill", kills)
                  : read_value(mem, "memory.oom_control", "oom_kill", kills);
}

uint64_t rbx_cgroup_oom_kills(const rbx_cgroup *cg)
{
    uint64_t kills;
    (void)read_oom_kills(cg, &kills);
    return kills;
}

int rbx_cgroup_enter_fds(const rbx_cgroup *cg, int *fds, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < cg->n && n < max; i++)
        if (cg->h[i].procs_fd >= 0)
            fds[n++] = cg->h[i].procs_fd;
    return (int)n;
}

int rbx_cgroup_join(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (write(fds[i], "0", 1) != 1)
            return -1;
    return 0;
}

int rbx_cgroup_v2_dirfd(const rbx_cgroup *cg)
{
    return cg->dir_fd;
}

/* The cgroup's own figure, a spare's earlier executions' included. */
static int read_cpu(const rbx_cgroup *cg, uint64_t *cpu_usec)
{
    uint64_t cpu_ns = 0;
    *cpu_usec = 0;
    if (cg->v2)
        return read_value(cg->h[0].path, "cpu.stat", "usage_usec", cpu_usec);
    if (read_value(dir_with(cg, CTL_CPUACCT), "cpuacct.usage", NULL, &cpu_ns) != 0)
        return -1;
    *cpu_usec = cpu_ns / 1000;
    return 0;
}

int rbx_cgroup_cpu_read(const rbx_cgroup *cg, uint64_t *cpu_usec)
{
    if (read_cpu(cg, cpu_usec) != 0)
        return -1;
    *cpu_usec = *cpu_usec > cg->cpu_base_usec ? *cpu_usec - cg->cpu_base_usec : 0;
    return 0;
}

int rbx_cgroup_stats_read(const rbx_cgroup *cg, rbx_cgroup_stats *st)
{
    const char *mem = dir_with(cg, CTL_MEMORY), *pids = dir_with(cg, CTL_PIDS);
    uint64_t kills;
    int r = 0;
    memset(st, 0, sizeof *st);
    r |= read_oom_kills(cg, &kills);
    r |= read_value(mem, cg->v2 ? "memory.peak" : "memory.max_usage_in_bytes", NULL,
                    &st->peak_memory_bytes);
    r |= rbx_cgroup_cpu_read(cg, &st->cpu_usec);
    r |= read_value(pids, "pids.peak", NULL, &st->pids_peak_or_current);
    if (!st->pids_peak_or_current)
        r |= read_value(pids, "pids.current", NULL, &st->pids_peak_or_current);
    st->oom_killed = kills > 0;
    return r ? -1 : 0;
}

/* --- freezing ------------------------------------------------------------------------------ */

/* How long a freeze may take: a sleeping task freezes within a
 * millisecond, but one that must first be given a CPU on a loaded host,
 * or finish a system call that sleeps uninterruptibly, takes longer; a
 * pause must not stop a sandbox's processes for being slow to freeze. */
#define FREEZE_WAIT_MS 10000

/* Whether the freezer says what was asked: v2's cgroup.events "frozen N",
 * v1's freezer.state (FREEZING until every task is). */
static bool freeze_done(const rbx_cgroup *cg, const char *dir, bool frozen)
{
    uint64_t value;
    char state[32];
    if (cg->v2)
        return read_value(dir, "cgroup.events", "frozen", &value) == 0 && value == frozen;
    if (read_at(dir, "freezer.state", state, sizeof state) < 0)
        return false;
    return strncmp(state, frozen ? "FROZEN" : "THAWED", 6) == 0;
}

int rbx_cgroup_freeze(rbx_cgroup *cg, bool frozen)
{
    const char *dir = cg->v2 ? cg->h[0].path : dir_with(cg, CTL_FREEZER);
    if (!dir || !dir[0]) {
        errno = ENOTSUP;
        return -1;
    }
    if (cg->v2 ? write_at(dir, "cgroup.freeze", frozen ? "1" : "0")
               : write_at(dir, "freezer.state", frozen ? "FROZEN" : "THAWED"))
        return -1;
    cg->frozen = frozen;
    /* Looked at each millisecond at first, then less often. */
    long pause_us = 1000;
    for (long waited_us = 0; waited_us < FREEZE_WAIT_MS * 1000L; waited_us += pause_us) {
        if (freeze_done(cg, dir, frozen))
            return 0;
        /* v1 retries a task it could not freeze yet only when asked again. */
        if (!cg->v2 && frozen)
            (void)write_at(dir, "freezer.state", "FROZEN");
        if (waited_us >= 100 * 1000)
            pause_us = 10 * 1000;
        nanosleep(&(struct timespec){.tv_nsec = pause_us * 1000}, NULL);
    }
    if (freeze_done(cg, dir, frozen))
        return 0;
    errno = ETIMEDOUT;
    return -1;
}

bool rbx_cgroup_frozen(const rbx_cgroup *cg)
{
    return cg && cg->frozen;
}

/* Whether /proc/<pid>/cgroup shows the process in cgroup name. The name is
 * 64 random bits, so no other cgroup's path ends with it. */
static bool in_cgroup(int pid, const char *name)
{
    char dir[32], buf[4096], needle[48];
    snprintf(dir, sizeof dir, "/proc/%d", pid);
    snprintf(needle, sizeof needle, "/runbox/%s\n", name);
    return read_at(dir, "cgroup", buf, sizeof buf) > 0 && strstr(buf, needle);
}

/* SIGKILLs every process listed in dir/cgroup.procs. A listed pid may exit
 * and be reused by an unrelated process before it is signalled, so the
 * signal goes through a pidfd, opened before checking that the process it
 * names is (still) in the cgroup. */
static void kill_listed(const char *dir, const char *name)
{
    char path[PATH_MAX];
    FILE *f = path_join(path, sizeof path, dir, "cgroup.procs") == 0 ? fopen(path, "re") : NULL;
    if (!f)
        return;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
            continue;
        if (in_cgroup(pid, name))
            syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        close(pidfd);
    }
    fclose(f);
}

/* One attempt at killing everything in the cgroup. v2's cgroup.kill (5.14+)
 * does it in one step; before it, v2's freezer stops forks from outrunning
 * the kills, then thaws so that the killed processes can exit. */
static void kill_round(const rbx_cgroup *cg)
{
    /* v1's frozen tasks die only once thawed; v2's die frozen. */
    const char *freezer = cg->v2 ? NULL : dir_with(cg, CTL_FREEZER);
    if (freezer) {
        for (size_t i = 0; i < cg->n; i++)
            if (cg->h[i].path[0])
                kill_listed(cg->h[i].path, cg->name);
        (void)write_at(freezer, "freezer.state", "THAWED");
        return;
    }
    if (cg->v2 && write_at(cg->h[0].path, "cgroup.kill", "1") == 0)
        return;
    if (cg->v2)
        (void)write_at(cg->h[0].path, "cgroup.freeze", "1");
    for (size_t i = 0; i < cg->n; i++)
        if (cg->h[i].path[0])
            kill_listed(cg->h[i].path, cg->name);
    if (cg->v2)
        (void)write_at(cg->h[0].path, "cgroup.freeze", "0");
}

/* rmdir's the directories still there, the first hierarchy's last (see
 * sweep_stale); it fails (EBUSY) while processes remain. Returns how many
 * are left. */
static int remove_dirs(rbx_cgroup *cg)
{
    int left = 0;
    for (size_t i = cg->n; i-- > 0;) {
        if (!cg->h[i].path[0])
            continue;
        if (rmdir(cg->h[i].path) == 0 || errno == ENOENT)
            cg->h[i].path[0] = '\0';
        else
            left++;
    }
    return left;
}

static void really_destroy(rbx_cgroup *cg)
{
    if (!cg)
        return;
    int saved = errno;
    for (size_t i = 0; i < CTL_COUNT; i++)
        if (cg->h[i].procs_fd >= 0)
            close(cg->h[i].procs_fd);
    if (cg->dir_fd >= 0)
        close(cg->dir_fd);
    for (int round = 0; round < DESTROY_ROUNDS && remove_dirs(cg) > 0; round++) {
        kill_round(cg);
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    free(cg);
    errno = saved;
}

void rbx_cgroup_destroy(rbx_cgroup *cg)
{
    if (cg && !keep_spare(cg))
        really_destroy(cg);
}

/* --- spares -------------------------------------------------------------------------------- */

/* Why: on v1 an execution's cgroup is four directories (cpu, cpuacct,
 * memory, pids). Making and removing them, opening their files and the
 * kernel's freeing of them afterwards took about 0.4 ms of the CPU of a
 * pooled execution (bench/RESULTS.md). A process that runs many
 * executions keeps some of its v1 cgroups that ended cleanly and gives one
 * to a later execution: what it reports is reset (its CPU time is read as
 * a difference, its memory peak is reset), its limits are set again where
 * they differ. v2's is one directory, and its memory.peak can be reset
 * only from Linux 6.12 on (for one descriptor's reads), where no machine
 * here could test it: v2 keeps none. Kept only when no process
 * is left in it, it is not frozen nor made freezable, the execution saw no
 * OOM kill, and the memory still charged to it (kernel objects, page cache
 * of files that outlived the execution) is small: that charge is all of
 * an execution that reaches the next one's cgroup, which the sandbox
 * cannot read (no cgroup file system is mounted in it). pids.peak cannot
 * be reset: a spare's is its whole life's. */
#define SPARE_MEMORY_MAX (4u << 20)

static rbx_spares spares = RBX_SPARES_INIT;

static void destroy_all(void **items, size_t n)
{
    while (n > 0)
        really_destroy(items[--n]);
}

void rbx_cgroup_keep_spares(size_t max)
{
    void *drop[RBX_SPARES_MAX];
    destroy_all(drop, rbx_spares_set_max(&spares, max, drop));
}

void rbx_cgroup_prune_spares(int64_t idle_ms)
{
    void *drop[RBX_SPARES_MAX];
    destroy_all(drop, rbx_spares_idle(&spares, idle_ms, drop));
}

void rbx_cgroup_spare_counts(uint64_t *kept, uint64_t *reused)
{
    rbx_spares_counts(&spares, kept, reused);
}

/* A spare whose limits can all be set to these: none the caller leaves
 * unset (0) is set in it, since set_limits leaves those as they are. */
static bool fits(const void *item, const void *want)
{
    const rbx_cgroup_limits *had = &((const rbx_cgroup *)item)->limits, *l = want;
    return !l->freezable && (l->memory_bytes || !had->memory_bytes) && (l->pids || !had->pids) &&
           (l->cpu_weight || !had->cpu_weight) && (l->cpu_quota_us || !had->cpu_quota_us);
}

static rbx_cgroup *take_spare(const rbx_cgroup_limits *limits)
{
    return rbx_spares_take(&spares, fits, limits);
}

/* Whether no process is in it: pids.current counts every task in the
 * cgroup, a zombie until it is reaped (without a pids hierarchy, none is
 * kept). */
static bool emptied(const rbx_cgroup *cg)
{
    uint64_t value = 1;
    const char *pids = dir_with(cg, CTL_PIDS);
    return pids && read_value(pids, "pids.current", NULL, &value) == 0 && value == 0;
}

/* Resets what the cgroup reports for its next execution: v1's peak starts
 * again from what is charged now. */
static bool reset_for_next(rbx_cgroup *cg)
{
    const char *mem = dir_with(cg, CTL_MEMORY);
    uint64_t kills, cpu, memory;
    if (!mem || read_oom_kills(cg, &kills) != 0 || kills != 0 || read_cpu(cg, &cpu) != 0 ||
        read_value(mem, "memory.usage_in_bytes", NULL, &memory) != 0 ||
        memory > SPARE_MEMORY_MAX || write_at(mem, "memory.max_usage_in_bytes", "0") != 0)
        return false;
    cg->cpu_base_usec = cpu;
    return true;
}

static bool keep_spare(rbx_cgroup *cg)
{
    return rbx_spares_room(&spares) && !cg->v2 && !cg->frozen && !cg->freezable && emptied(cg) &&
           reset_for_next(cg) && rbx_spares_put(&spares, cg);
}
