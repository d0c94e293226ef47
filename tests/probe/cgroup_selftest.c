/* Checks src/sandbox/cgroup.c on the machine it runs on.
 *
 *   make build && build/cgroup-selftest
 *
 * As root: a 64 MiB limit that gets a 256 MiB program OOM-killed, a 32-pid
 * limit that makes forks fail with EAGAIN, a destroy that kills the
 * processes left and removes the directories, and a freezable cgroup
 * frozen, thawed and destroyed while frozen. Before a child may test a
 * limit, the limit is read back from the cgroup the child is really in (its
 * /proc/<pid>/cgroup); if it is not in place the test is skipped, so a
 * broken module cannot hurt the host. Unprivileged: expects a clean refusal.
 * Exit status 0 when everything ran passed (or was skipped), 1 otherwise. */
#include "sandbox/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024ULL)
#define FORKS 100
#define MAX_DIRS 8

static int failures;

static void check(bool ok, const char *what)
{
    printf("  %s: %s\n", ok ? "PASS" : "FAIL", what);
    failures += !ok;
}

/* The cgroup directories a process is in below runbox/, from its
 * /proc/<pid>/cgroup ("4:memory:/runbox/exec-..." or "0::/runbox/exec-..."),
 * assuming the usual mounts below /sys/fs/cgroup. */
static size_t runbox_dirs(pid_t pid, char dirs[][PATH_MAX], char ctls[][64], size_t max)
{
    char path[64], line[PATH_MAX + 64];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    size_t n = 0;
    while (f && n < max && fgets(line, sizeof line, f)) {
        char *ctl = strchr(line, ':'), *rel = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!rel || !strstr(rel, "/runbox/exec-"))
            continue;
        *rel++ = '\0';
        rel[strcspn(rel, "\n")] = '\0';
        snprintf(ctls[n], 64, "%s", ctl + 1);
        snprintf(dirs[n++], PATH_MAX, "/sys/fs/cgroup%s%s%s", ctl[1] ? "/" : "", ctl + 1, rel);
    }
    if (f)
        fclose(f);
    return n;
}

/* The directory of pid's cgroup carrying controller ctl (v2: the only one). */
static const char *dir_of(pid_t pid, const char *ctl, char dirs[][PATH_MAX], size_t *n)
{
    char ctls[MAX_DIRS][64];
    *n = runbox_dirs(pid, dirs, ctls, MAX_DIRS);
    for (size_t i = 0; i < *n; i++)
        if (!ctls[i][0] || strstr(ctls[i], ctl))
            return dirs[i];
    return NULL;
}

/* The first line of dir/name, or "" when unreadable. */
static const char *read_line(const char *dir, const char *name, char *buf, size_t size)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    buf[0] = '\0';
    if (f) {
        if (!fgets(buf, (int)size, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

typedef void (*child_body)(int up);

/* Forks a child that joins cg and reports 'J' (or 'E' and stops) on the
 * pipe, then waits for the word go ('g') before running body. Like the
 * sandbox's init, it joins from new user and cgroup namespaces, where it
 * has no privilege over the host: the fds opened beforehand must suffice. */
static pid_t start_child(const rbx_cgroup *cg, child_body body, int *up, int *go)
{
    int upp[2], gop[2];
    if (pipe2(upp, O_CLOEXEC) != 0 || pipe2(gop, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int fds[RBX_CGROUP_MAX_FDS];
        int n = rbx_cgroup_enter_fds(cg, fds, RBX_CGROUP_MAX_FDS);
        char c =
            unshare(CLONE_NEWUSER | CLONE_NEWCGROUP) == 0 && rbx_cgroup_join(fds, (size_t)n) == 0
                ? 'J'
                : 'E';
        if (write(upp[1], &c, 1) != 1 || c == 'E' || read(gop[0], &c, 1) != 1 || c != 'g')
            _exit(0);
        body(upp[1]);
        _exit(0);
    }
    close(upp[1]);
    close(gop[0]);
    *up = upp[0];
    *go = gop[1];
    char c = 0;
    if (pid < 0 || read(*up, &c, 1) != 1 || c != 'J') {
        printf("  the child could not join the cgroup\n");
        failures++;
    }
    return pid;
}

/* Touches size bytes of fresh memory (exits 2 where it gets none). */
static void touch(size_t size)
{
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(2);
    for (size_t i = 0; i < size; i += 4096)
        p[i] = 1;
}

static void hog(int up)
{
    alarm(60); /* whatever happens, it does not stay */
    touch(256 * MIB);
    (void)!write(up, "survived", 8);
    _exit(3);
}

/* Verifies the memory limit (and the swap limit with it) where the child is. */
static bool memory_limit_in_place(pid_t child, bool v2, char dirs[][PATH_MAX], size_t *n)
{
    char buf[64], want[32];
    const char *dir = dir_of(child, "memory", dirs, n);
    if (!dir)
        return false;
    snprintf(want, sizeof want, "%llu", 64 * MIB);
    const char *mem = read_line(dir, v2 ? "memory.max" : "memory.limit_in_bytes", buf, 64);
    printf("  %s: limit %s\n", dir, mem);
    if (strcmp(mem, want) != 0)
        return false;
    const char *swap =
        read_line(dir, v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes", buf, 64);
    printf("  swap limit: %s\n", swap[0] ? swap : "(no swap accounting)");
    return !swap[0] || strcmp(swap, v2 ? "0" : want) == 0;
}

static void all_gone(char dirs[][PATH_MAX], size_t n)
{
    bool gone = n > 0;
    struct stat st;
    for (size_t i = 0; i < n; i++)
        if (stat(dirs[i], &st) == 0 || errno != ENOENT) {
            printf("  still there: %s\n", dirs[i]);
            gone = false;
        }
    check(gone, "every exec directory is removed after destroy");
}

static void test_memory(bool v2)
{
    printf("memory: 64 MiB limit, child touches 256 MiB\n");
    rbx_cgroup_limits limits = {.memory_bytes = 64 * MIB, .pids = 32, .cpu_weight = 100};
    rbx_cgroup *cg;
    char why[512], dirs[MAX_DIRS][PATH_MAX];
    size_t n = 0;
    int up, go, status;
    if (rbx_cgroup_create(&limits, &cg, why, sizeof why) != 0) {
        printf("  create failed: %s\n", why);
        failures++;
        return;
    }
    pid_t child = start_child(cg, hog, &up, &go);
    if (child > 0 && memory_limit_in_place(child, v2, dirs, &n)) {
        (void)!write(go, "g", 1);
        waitpid(child, &status, 0);
        check(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child was SIGKILLed");
        rbx_cgroup_stats stats;
        check(rbx_cgroup_stats_read(cg, &stats) == 0, "stats read");
        printf("  oom_killed=%d peak=%" PRIu64 " cpu_usec=%" PRIu64 " pids=%" PRIu64 "\n",
               stats.oom_killed, stats.peak_memory_bytes, stats.cpu_usec,
               stats.pids_peak_or_current);
        check(stats.oom_killed, "stats say the OOM killer fired");
        check(!stats.peak_memory_bytes || stats.peak_memory_bytes <= 64 * MIB, "peak <= limit");
    } else if (child > 0) {
        printf("  SKIP: the memory limit is not in place\n");
        close(go); /* the child exits without testing anything */
        go = -1;
        waitpid(child, &status, 0);
    }
    close(up);
    if (go >= 0)
        close(go);
    rbx_cgroup_destroy(cg);
    all_gone(dirs, n);
}

/* Forks FORKS sleepers; reports each pid, then -1 and the counts. */
static void spawner(int up)
{
    int counts[3] = {0, 0, 0}; /* forked, EAGAIN, other errors */
    alarm(60);
    for (int i = 0; i < FORKS; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(60);
            pause();
            _exit(0);
        }
        counts[pid > 0 ? 0 : errno == EAGAIN ? 1 : 2]++;
        if (pid > 0)
            (void)!write(up, &pid, sizeof pid);
    }
    pid_t end = -1;
    (void)!write(up, &end, sizeof end);
    (void)!write(up, counts, sizeof counts);
    pause();
}

static void check_forks(int up, pid_t *pids, int *npids)
{
    int counts[3] = {0, 0, 0};
    pid_t pid;
    *npids = 0;
    while (read(up, &pid, sizeof pid) == sizeof pid && pid > 0 && *npids < FORKS)
        pids[(*npids)++] = pid;
    if (read(up, counts, sizeof counts) != sizeof counts)
        printf("  no counts from the child\n");
    printf("  forked %d, EAGAIN %d, other errors %d\n", counts[0], counts[1], counts[2]);
    check(counts[0] == 31 && counts[1] == FORKS - 31 && counts[2] == 0,
          "31 forks succeed (32 with the child), the rest fail with EAGAIN");
    int alive = 0;
    for (int i = 0; i < *npids; i++)
        alive += kill(pids[i], 0) == 0;
    check(alive == *npids && alive == counts[0], "every forked sleeper is alive before destroy");
}

/* Whether pid is a process that has not exited (a zombie has). */
static bool running(pid_t pid)
{
    char dir[32], buf[512];
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    const char *state = strrchr(read_line(dir, "stat", buf, sizeof buf), ')');
    return state && state[1] == ' ' && state[2] != 'Z' && state[2] != 'X';
}

static void test_pids(void)
{
    printf("pids: 32 processes, child forks %d sleepers\n", FORKS);
    rbx_cgroup_limits limits = {.memory_bytes = 64 * MIB, .pids = 32};
    rbx_cgroup *cg;
    char why[512], dirs[MAX_DIRS][PATH_MAX], buf[64];
    size_t n = 0;
    pid_t pids[FORKS + 1];
    int up, go, npids = 0;
    if (rbx_cgroup_create(&limits, &cg, why, sizeof why) != 0) {
        printf("  create failed: %s\n", why);
        failures++;
        return;
    }
    pid_t child = start_child(cg, spawner, &up, &go);
    const char *dir = child > 0 ? dir_of(child, "pids", dirs, &n) : NULL;
    if (dir && strcmp(read_line(dir, "pids.max", buf, sizeof buf), "32") == 0) {
        printf("  %s: pids.max %s\n", dir, buf);
        (void)!write(go, "g", 1);
        check_forks(up, pids, &npids);
        rbx_cgroup_stats stats;
        check(rbx_cgroup_stats_read(cg, &stats) == 0 && stats.pids_peak_or_current == 32,
              "pids_peak_or_current is 32");
    } else if (child > 0) {
        printf("  SKIP: pids.max is not in place\n");
    }
    close(go);
    rbx_cgroup_destroy(cg);
    close(up);
    if (child > 0)
        pids[npids++] = child;
    int left = 0;
    for (int i = 0; i < npids; i++)
        left += running(pids[i]);
    check(left == 0, "destroy killed the child and every sleeper");
    /* We are a subreaper: the orphaned sleepers are ours to reap. */
    for (int i = 0; i < npids; i++)
        if (running(pids[i]))
            kill(pids[i], SIGKILL);
    while (wait(NULL) > 0 || errno == EINTR)
        ;
    all_gone(dirs, n);
}

/* Counts in shared memory as fast as it can, in a child of its own too. */
static volatile uint64_t *counters;

static void counter(int up)
{
    alarm(60);
    if (fork() == 0) {
        alarm(60);
        for (;;)
            counters[1]++;
    }
    (void)!write(up, "c", 1);
    for (;;)
        counters[0]++;
}

static bool counting(size_t i, int ms)
{
    uint64_t before = counters[i];
    usleep((useconds_t)ms * 1000);
    return counters[i] != before;
}

/* A freezable cgroup: frozen, nothing in it runs (the child nor its own
 * child); thawed, both run again; destroyed while frozen, both die. */
static void test_freeze(void)
{
    printf("freeze: a freezable cgroup's processes stop and go on, and die frozen\n");
    counters = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    rbx_cgroup_limits limits = {.memory_bytes = 64 * MIB, .freezable = true};
    rbx_cgroup *cg = NULL;
    char why[1024], c;
    if (counters == MAP_FAILED || rbx_cgroup_create(&limits, &cg, why, sizeof why) != 0) {
        check(false, "a freezable cgroup is made");
        printf("  why: %s\n", why);
        return;
    }
    int up, go;
    pid_t child = start_child(cg, counter, &up, &go);
    char dirs[MAX_DIRS][PATH_MAX];
    size_t n = runbox_dirs(child, dirs, (char[MAX_DIRS][64]){{0}}, MAX_DIRS);
    (void)!write(go, "g", 1);
    check(read(up, &c, 1) == 1 && counting(0, 50) && counting(1, 50), "both count at first");
    check(rbx_cgroup_freeze(cg, true) == 0 && rbx_cgroup_frozen(cg), "frozen");
    check(!counting(0, 200) && !counting(1, 200), "frozen, neither counts");
    check(rbx_cgroup_freeze(cg, false) == 0 && !rbx_cgroup_frozen(cg), "thawed");
    check(counting(0, 50) && counting(1, 50), "thawed, both count again");
    check(rbx_cgroup_freeze(cg, true) == 0, "frozen again");
    rbx_cgroup_destroy(cg);
    int status = 0;
    check(waitpid(child, &status, 0) == child && WIFSIGNALED(status), "destroyed frozen: it died");
    uint64_t last = counters[1];
    usleep(100 * 1000);
    check(counters[1] == last, "... and its child too");
    all_gone(dirs, n);
    close(up);
    close(go);
    munmap((void *)counters, 4096);
}

/* Spins 300 ms of CPU with 32 MiB touched, then says it is done. */
static void busy(int up)
{
    alarm(60);
    touch(32 * MIB);
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 300000000L);
    (void)!write(up, "d", 1);
    _exit(0);
}

static void quiet(int up)
{
    (void)!write(up, "d", 1);
    _exit(0);
}

/* Leaves 16 MiB charged to its cgroup: a file of /dev/shm that outlives it. */
static const char shm_file[] = "/dev/shm/runbox-cgroup-selftest";

static void leave_charged(int up)
{
    int fd = open(shm_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    static char block[1 << 20];
    memset(block, 1, sizeof block);
    for (int i = 0; fd >= 0 && i < 16; i++)
        (void)!write(fd, block, sizeof block);
    (void)!write(up, "d", 1);
    _exit(0);
}

static void sleeper(int up)
{
    alarm(60);
    (void)!write(up, "s", 1);
    pause();
    _exit(0);
}

/* Runs body in cg to its end (or, with wait false, until it says so);
 * stores its memory directory in dir. Returns its pid, or -1. */
static pid_t run_in(rbx_cgroup *cg, child_body body, bool wait, char *dir)
{
    char dirs[MAX_DIRS][PATH_MAX], c;
    size_t n;
    int up, go;
    pid_t child = start_child(cg, body, &up, &go);
    const char *mem = child > 0 ? dir_of(child, "memory", dirs, &n) : NULL;
    snprintf(dir, PATH_MAX, "%s", mem ? mem : "");
    (void)!write(go, "g", 1);
    if (read(up, &c, 1) != 1)
        c = 0;
    if (wait && child > 0)
        waitpid(child, NULL, 0);
    close(up);
    close(go);
    return c ? child : -1;
}

static bool kept_since(uint64_t kept0)
{
    uint64_t kept, reused;
    rbx_cgroup_spare_counts(&kept, &reused);
    return kept == kept0 + 1;
}

/* Makes a cgroup with limits, runs body in it to its end and destroys it:
 * the cgroup is removed, and the count of those kept stays at kept. */
static void removed_not_kept(const rbx_cgroup_limits *limits, child_body body, uint64_t kept,
                             const char *what)
{
    rbx_cgroup *cg;
    char why[512], dir[PATH_MAX], line[PATH_MAX + 64];
    struct stat st;
    uint64_t now, reused;
    if (rbx_cgroup_create(limits, &cg, why, sizeof why) != 0) {
        printf("  create failed: %s\n", why);
        failures++;
        return;
    }
    run_in(cg, body, true, dir);
    rbx_cgroup_destroy(cg);
    rbx_cgroup_spare_counts(&now, &reused);
    snprintf(line, sizeof line, "%s is removed, not kept", what);
    check(now == kept && stat(dir, &st) != 0 && errno == ENOENT, line);
}

/* Spares: a cgroup whose execution ended cleanly is kept and given out
 * again with its figures starting from zero; one with a process left, an
 * OOM kill, or made freezable is removed as before; and a process that
 * stops keeping spares removes the ones it kept. */
static void test_spares(bool v2, bool freezer)
{
    printf("spares: a cgroup kept, reset and given out again\n");
    rbx_cgroup_keep_spares(2);
    rbx_cgroup_limits limits = {.memory_bytes = 64 * MIB, .pids = 32, .cpu_weight = 100};
    rbx_cgroup *cg;
    rbx_cgroup_stats stats;
    char why[512], first[PATH_MAX], again[PATH_MAX];
    uint64_t kept0, reused0, kept, reused;
    struct stat st;
    rbx_cgroup_spare_counts(&kept0, &reused0);
    if (rbx_cgroup_create(&limits, &cg, why, sizeof why) != 0) {
        printf("  create failed: %s\n", why);
        failures++;
        return;
    }
    check(run_in(cg, busy, true, first) > 0 && first[0], "a child spun and touched memory");
    check(rbx_cgroup_stats_read(cg, &stats) == 0 && stats.cpu_usec >= 250000 &&
              stats.peak_memory_bytes >= 32 * MIB,
          "its first life's figures show the CPU and memory it used");
    if (v2) { /* its memory.peak resets only from 6.12 on: v2 keeps none */
        rbx_cgroup_destroy(cg);
        rbx_cgroup_keep_spares(0);
        rbx_cgroup_spare_counts(&kept, &reused);
        check(kept == kept0 && stat(first, &st) != 0 && errno == ENOENT,
              "cgroup v2: no cgroup is kept, this one is removed");
        return;
    }
    rbx_cgroup_destroy(cg);
    check(kept_since(kept0) && stat(first, &st) == 0, "ended cleanly, it is kept");

    check(rbx_cgroup_create(&limits, &cg, why, sizeof why) == 0, "a cgroup is given out");
    rbx_cgroup_spare_counts(&kept, &reused);
    check(reused == reused0 + 1, "... the spare");
    check(run_in(cg, quiet, true, again) > 0 && strcmp(first, again) == 0,
          "a child joins the same directories");
    check(rbx_cgroup_stats_read(cg, &stats) == 0, "stats read");
    printf("  second life: oom_killed=%d peak=%" PRIu64 " cpu_usec=%" PRIu64 "\n",
           stats.oom_killed, stats.peak_memory_bytes, stats.cpu_usec);
    check(stats.cpu_usec < 100000, "its CPU time starts again from zero");
    check(stats.peak_memory_bytes < 16 * MIB, "its memory peak starts again");
    check(!stats.oom_killed, "no OOM kill");
    rbx_cgroup_destroy(cg);
    check(kept_since(kept0 + 1), "kept again");

    /* A process still in it at the end: killed, and the cgroup removed. */
    check(rbx_cgroup_create(&limits, &cg, why, sizeof why) == 0, "given out again");
    pid_t left = run_in(cg, sleeper, false, again);
    check(left > 0, "a child stays");
    rbx_cgroup_destroy(cg);
    int status = 0;
    check(waitpid(left, &status, 0) == left && WIFSIGNALED(status), "destroy killed it");
    check(kept_since(kept0 + 1) && stat(again, &st) != 0 && errno == ENOENT,
          "a cgroup with a process left is removed, not kept");

    removed_not_kept(&limits, hog, kept0 + 2, "a cgroup that saw an OOM kill");
    /* Memory still charged to it once its processes are gone. */
    removed_not_kept(&limits, leave_charged, kept0 + 2, "a cgroup 16 MiB are still charged to");
    unlink(shm_file);
    if (freezer) {
        rbx_cgroup_limits freezable = limits;
        freezable.freezable = true;
        removed_not_kept(&freezable, quiet, kept0 + 2, "a freezable cgroup");
    }

    /* The one kept: removed when spares are no longer kept. */
    check(rbx_cgroup_create(&limits, &cg, why, sizeof why) == 0, "one more");
    run_in(cg, quiet, true, again);
    rbx_cgroup_destroy(cg);
    check(kept_since(kept0 + 2) && stat(again, &st) == 0, "kept");
    rbx_cgroup_prune_spares(60000);
    check(stat(again, &st) == 0, "a spare kept for less than a minute stays when those idle a "
                                 "minute are pruned");
    rbx_cgroup_prune_spares(0);
    check(stat(again, &st) != 0 && errno == ENOENT, "... and is removed when pruned at once");
    check(rbx_cgroup_create(&limits, &cg, why, sizeof why) == 0, "one more");
    run_in(cg, quiet, true, again);
    rbx_cgroup_destroy(cg);
    check(kept_since(kept0 + 3) && stat(again, &st) == 0, "kept");
    rbx_cgroup_keep_spares(0);
    check(stat(again, &st) != 0 && errno == ENOENT, "no more spares: the kept ones are removed");
    check(stat(first, &st) != 0 && errno == ENOENT, "... every one");
}

/* Leaves no empty runbox/ behind on a test machine (the module keeps it). */
static void remove_parents(void)
{
    const char *roots[] = {"memory", "pids", "cpu", "cpuacct", "freezer", ""};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        snprintf(path, sizeof path, "/sys/fs/cgroup/%s%srunbox", roots[i], roots[i][0] ? "/" : "");
        if (rmdir(path) == 0)
            printf("removed %s\n", path);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const rbx_cgroup_support *s = rbx_cgroup_probe();
    const char *modes[] = {"none", "v1", "v2"};
    printf("probe: mode=%s memory=%d pids=%d cpu=%d\n  %s\n", modes[s->mode], s->memory, s->pids,
           s->cpu, s->detail);
    if (s->mode == RBX_CGROUP_NONE) {
        rbx_cgroup_limits limits = {.memory_bytes = 64 * MIB};
        rbx_cgroup *cg = NULL;
        char why[1024];
        int r = rbx_cgroup_create(&limits, &cg, why, sizeof why);
        check(r == -1 && !cg, "create refuses cleanly");
        printf("  why: %s\n", why);
        return failures ? 1 : 0;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    test_memory(s->mode == RBX_CGROUP_V2);
    if (s->pids)
        test_pids();
    else
        printf("SKIP pids: no pids controller\n");
    if (s->freezer)
        test_freeze();
    else
        printf("SKIP freeze: no freezer\n");
    test_spares(s->mode == RBX_CGROUP_V2, s->freezer);
    remove_parents();
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
