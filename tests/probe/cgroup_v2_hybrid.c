/* Runs cgroup.c's v2 code paths on a hybrid host, where the real probe
 * picks v1: it compiles cgroup.c in and points the probe at the empty
 * cgroup2 (/sys/fs/cgroup/unified), which has no controllers but has the
 * core files: cgroup.procs, cgroup.kill, cgroup.freeze, cpu.stat. Covers
 * directory creation, joining by fd from new namespaces, CLONE_INTO_CGROUP,
 * cpu.stat, cgroup.kill, the freeze-and-pidfd kill used without
 * cgroup.kill, and removal. Limits need controllers: cgroup_selftest.c
 * covers them on a v2 host. As root:
 *
 *   gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc -Iinclude \
 *       tests/probe/cgroup_v2_hybrid.c -lpthread -o /tmp/cgroup_v2_hybrid */
#include "sandbox/cgroup.c"

#include <linux/sched.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define UNIFIED "/sys/fs/cgroup/unified"

static int failures;

static void check(bool ok, const char *what)
{
    printf("  %s: %s\n", ok ? "PASS" : "FAIL", what);
    failures += !ok;
}

/* Whether pid's v2 cgroup (the 0:: line) is cg's. */
static bool member(pid_t pid, const rbx_cgroup *cg)
{
    char dir[32], buf[4096], want[64];
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    snprintf(want, sizeof want, "0::/runbox/%s\n", cg->name);
    return read_at(dir, "cgroup", buf, sizeof buf) > 0 && strstr(buf, want);
}

static void busy_then_sleep(void)
{
    alarm(60);
    struct timespec start, now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    do
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 200000000L);
    for (int i = 0; i < 5; i++)
        if (fork() == 0)
            break;
    pause();
    _exit(0);
}

/* A child that joins by fd from new user and cgroup namespaces. */
static pid_t join_by_fd(const rbx_cgroup *cg)
{
    int fds[RBX_CGROUP_MAX_FDS], n = rbx_cgroup_enter_fds(cg, fds, RBX_CGROUP_MAX_FDS);
    pid_t pid = fork();
    if (pid == 0) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWCGROUP) != 0 || rbx_cgroup_join(fds, (size_t)n))
            _exit(1);
        busy_then_sleep();
    }
    return pid;
}

static pid_t clone_into(const rbx_cgroup *cg)
{
    struct clone_args args = {.flags = CLONE_INTO_CGROUP,
                              .exit_signal = SIGCHLD,
                              .cgroup = (uint64_t)rbx_cgroup_v2_dirfd(cg)};
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0)
        busy_then_sleep();
    return pid;
}

/* Starts both kinds of children, checks where they are and the CPU time. */
static void populate(const rbx_cgroup *cg, pid_t pids[2])
{
    pids[0] = join_by_fd(cg);
    pids[1] = clone_into(cg);
    usleep(1000 * 1000);
    check(pids[0] > 0 && member(pids[0], cg), "a child joined by fd from new namespaces");
    check(pids[1] > 0 && member(pids[1], cg), "a child cloned with CLONE_INTO_CGROUP");
    rbx_cgroup_stats st;
    check(rbx_cgroup_stats_read(cg, &st) == 0 && st.cpu_usec >= 300000,
          "cpu.stat usage_usec counts both busy children");
    printf("  cpu_usec=%" PRIu64 "\n", st.cpu_usec);
}

static int count_procs(const char *dir)
{
    char buf[4096];
    int n = 0;
    if (read_at(dir, "cgroup.procs", buf, sizeof buf) < 0)
        return -1;
    for (char *p = buf; (p = strchr(p, '\n')); p++)
        n++;
    return n;
}

/* Destroys cg and checks that its processes and directory are gone. */
static void destroy_and_check(rbx_cgroup *cg)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", cg->h[0].path);
    rbx_cgroup_destroy(cg);
    check(access(path, F_OK) != 0 && errno == ENOENT, "the exec directory is removed");
    while (wait(NULL) > 0 || errno == EINTR) /* we are the subreaper of the orphans */
        ;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    rbx_cgroup_probe();
    if (probe.pub.mode != RBX_CGROUP_V1 || access(UNIFIED "/cgroup.procs", F_OK) != 0 ||
        geteuid() != 0) {
        printf("SKIP: needs root on a hybrid host with an empty cgroup2 at " UNIFIED "\n");
        return 0;
    }
    probe.pub.mode = RBX_CGROUP_V2;
    probe.pub.memory = probe.pub.pids = probe.pub.cpu = false;
    probe.n = 1;
    snprintf(probe.h[0].base, PATH_MAX, UNIFIED);
    probe.h[0].ctls = ctl_file(UNIFIED, "cgroup.controllers");

    rbx_cgroup_limits none = {0};
    rbx_cgroup *cg;
    char why[512];
    pid_t pids[2];
    printf("v2 via cgroup.kill\n");
    check(rbx_cgroup_create(&none, &cg, why, sizeof why) == 0, "create");
    populate(cg, pids);
    printf("  %d processes in %s\n", count_procs(cg->h[0].path), cg->h[0].path);
    destroy_and_check(cg);

    printf("v2 via freeze and pidfd kills (the path without cgroup.kill)\n");
    check(rbx_cgroup_create(&none, &cg, why, sizeof why) == 0, "create");
    populate(cg, pids);
    set_frozen(cg, true);
    kill_listed(cg->h[0].path, cg->name);
    set_frozen(cg, false);
    usleep(100 * 1000);
    check(count_procs(cg->h[0].path) == 0, "every process is gone after one round");
    destroy_and_check(cg);

    check(rmdir(UNIFIED "/runbox") == 0, "runbox/ is empty (removed by the test)");
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
