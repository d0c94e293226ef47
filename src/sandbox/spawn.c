/* Starting a sandbox. The order of confinement is visible in two functions:
 * sandbox_init() (PID 1 of the new namespaces) and enter_program() (the
 * user's program, from fork to execve).
 *
 * The child side runs after clone3() in a process that may have been copied
 * from a multi-threaded server: it must not allocate or take locks, so all
 * it needs is prepared here beforehand and it calls only system calls. */
#include "base/error.h"
#include "base/fsutil.h"
#include "base/trace.h"
#include "egress/dns.h"
#include "egress/policy.h"
#include "egress/rules.h"
#include "runbox.h"
#include "sandbox/cgroup.h"
#include "sandbox/credentials.h"
#include "sandbox/egress_setup.h"
#include "sandbox/mount.h"
#include "sandbox/mount_ns.h"
#include "sandbox/net.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp.h"
#include "sandbox/starter.h"
#include "sandbox/template.h"
#include "sandbox/uids.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Namespaces every sandbox gets. A new network namespace too (see
 * clone_init), but for installs the operator let use the host's network. */
#define SANDBOX_CLONE_FLAGS                                                                        \
    (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

/* Everything the child side needs, prepared by the parent. */
typedef struct child_plan {
    const rbx_sandbox_spec *spec;
    /* Set when init runs in runbox's memory (starter.h) until it executes
     * runbox-init; NULL when it is a copy of runbox. */
    rbx_starter_job *starter;
    rbx_starter_stacks stacks; /* the starter thread's, with a starter */
    int sync_fd;  /* read end: the parent writes one byte once our uid map is set,
                   * and with the network on another once the interface is up */
    int stdin_fd; /* the program's stdin */
    bool stdin_null; /* stdin_fd is the host's /dev/null: init swaps in the sandbox's */
    int channel_ours_fd; /* spec.channel_inside where it applies, else -1 */
    int stdout_fd, stderr_fd;
    int report_fd;                      /* write end */
    int status_fd;                      /* write end */
    int egress_fd;                      /* where init hands over the egress policy's
                                           sockets (egress_dns.h), or -1 */
    int reaper_fd;                      /* runbox-init (reaper.c) to execute, or -1 */
    int parent_ends[7];                 /* the parent's ends, closed in the child */
    int cgroup_fds[RBX_CGROUP_MAX_FDS]; /* cgroup.procs of the execution's cgroup */
    size_t cgroup_count;                /* to join; 0 when born into it (v2) */
    bool in_cgroup;                     /* else rlimits stand in for its limits */
} child_plan;

static void report_error(int fd, const char *what, int error)
{
    /* snprintf is async-signal-safe enough in glibc for %s; avoid it anyway. */
    char buf[256];
    size_t n = 0;
    const char *parts[] = {"E", what, ": ", strerror(error), "\n"};
    for (size_t i = 0; i < 5; i++)
        for (const char *p = parts[i]; *p && n < sizeof buf; p++)
            buf[n++] = *p;
    (void)!write(fd, buf, n);
}

static int move_fd(int from, int to)
{
    if (from == to)
        return fcntl(to, F_SETFD, 0); /* keep it across execve */
    return dup2(from, to) < 0 ? -1 : 0;
}

/* The program's descriptors: exactly 0, 1, 2, the code (3) and the report
 * (4), which the bootstrap closes before any of the code runs. A bare
 * program has 0, 1 and 2, and the report on 3 until its execve closes it. */
static int arrange_fds(const child_plan *plan)
{
    bool bare = plan->spec->bare;
    int src[5] = {plan->stdin_fd, plan->stdout_fd, plan->stderr_fd,
                  bare ? plan->report_fd : plan->spec->code_fd, plan->report_fd};
    int count = bare ? 4 : 5;
    /* First lift every source above the targets so no dup2 clobbers one. */
    for (int i = 0; i < count; i++) {
        src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 16);
        if (src[i] < 0)
            return -1;
    }
    for (int i = 0; i < count; i++)
        if (move_fd(src[i], i) != 0)
            return -1;
    if (bare && fcntl(3, F_SETFD, FD_CLOEXEC) != 0)
        return -1;
    return syscall(SYS_close_range, (unsigned)count, ~0U, 0) == 0 ? 0 : -1;
}

/* The bounding and ambient sets go first, while CAP_SETPCAP is still held;
 * the remaining sets are cleared once the credentials are switched. */
static int drop_bounding_set(void)
{
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return -1;
    return 0;
}

static int clear_capabilities(void)
{
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2] = {{0}};
    return (int)syscall(SYS_capset, &header, data);
}

static int become_sandbox_user(bool is_root)
{
    /* As root we may drop supplementary groups (the host's gid 0 among
     * them); unprivileged, setgroups is denied and the map has one uid. */
    if (is_root && rbx_setgroups_none() != 0)
        return -1;
    return rbx_setresgid_uid(RBX_SANDBOX_UID);
}

#define OPEN_FILES_MAX 4096

/* Always: no core dumps, a file-size limit, a bound on open files. Where
 * no cgroup holds the execution, rlimits stand in for its memory and
 * process limits (weaker: per process, and RLIMIT_NPROC per user). */
static int set_limits(const child_plan *plan)
{
    const rbx_sandbox_spec *spec = plan->spec;
    struct rlimit none = {0, 0}, files = {OPEN_FILES_MAX, OPEN_FILES_MAX};
    struct rlimit fsize = {spec->file_size_max, spec->file_size_max};
    if (setrlimit(RLIMIT_CORE, &none) || setrlimit(RLIMIT_NOFILE, &files) ||
        (spec->file_size_max && setrlimit(RLIMIT_FSIZE, &fsize)))
        return -1;
    if (plan->in_cgroup)
        return 0;
    rlim_t data_max = spec->limits.memory_bytes + spec->limits.reserved_bytes;
    struct rlimit data = {data_max, data_max};
    struct rlimit procs = {spec->limits.pids, spec->limits.pids};
    if (spec->limits.memory_bytes && setrlimit(RLIMIT_DATA, &data))
        return -1;
    return spec->limits.pids ? setrlimit(RLIMIT_NPROC, &procs) : 0;
}

/* The user's program: from fork to execve, one confinement step a call. */
static void enter_program(const child_plan *plan)
{
    const rbx_sandbox_spec *spec = plan->spec;
    int report = plan->report_fd;
    const char *step = "setsid";
    /* A new session: no controlling terminal, so nothing can be typed
     * into one with TIOCSTI. */
    if (setsid() < 0)
        goto fail;
    step = "set up file descriptors";
    if (arrange_fds(plan) != 0)
        goto fail;
    report = spec->bare ? 3 : 4;
    /* A process given a terminal has it as its controlling terminal, as a
     * login shell expects (job control, ^C). It is the sandbox's own:
     * TIOCSTI stays refused by the seccomp filter. */
    step = "take the terminal";
    if (spec->terminal && ioctl(0, TIOCSCTTY, 0) != 0)
        goto fail;
    step = "enter the session directory";
    if (chdir(RBX_SANDBOX_HOME) != 0)
        goto fail;
    step = "enter the working directory";
    if (spec->cwd && chdir(spec->cwd) != 0)
        goto fail;
    step = "set resource limits";
    if (set_limits(plan) != 0)
        goto fail;
    /* A write past the file-size limit (the disk cap, all that bounds a
     * file where there are no quotas) fails with EFBIG, "File too large",
     * instead of killing the program with SIGXFSZ: the program can say what
     * happened, as Python arranges for itself. */
    step = "ignore SIGXFSZ";
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR)
        goto fail;
    step = "drop the capability bounding set";
    if (drop_bounding_set() != 0)
        goto fail;
    step = "switch to the sandbox user";
    if (become_sandbox_user(spec->is_root) != 0)
        goto fail;
    step = "clear capabilities";
    if (clear_capabilities() != 0)
        goto fail;
    step = "set no_new_privs";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        goto fail;
    step = "install the seccomp filter";
    if (rbx_seccomp_install() != 0)
        goto fail;
    rbx_trace_mark(spec->trace, RBX_PHASE_EXEC);
    step = spec->bare ? "start the program" : "start the interpreter";
    execve(spec->interpreter, spec->argv, spec->envp);
fail:
    report_error(report, step, errno);
    _exit(127);
}

static int program_main(void *arg)
{
    const child_plan *plan = arg;
    /* Marked here, not in init: init resumes only once the program has
     * called execve. */
    rbx_trace_mark(plan->spec->trace, RBX_PHASE_FORKED);
    enter_program(plan);
    return 127; /* not reached: enter_program execs or exits */
}

#define PROGRAM_STACK_SIZE (256 * 1024)

/* The program starts the way posix_spawn starts one: it shares init's
 * memory until its execve (CLONE_VM), and init waits until then
 * (CLONE_VFORK). A plain fork would copy init's address space, itself a
 * copy of runbox's, only for execve to throw the copy away: with
 * executions arriving back to back that copy, its page faults and its
 * teardown were the largest single cost of starting a program. Nothing
 * between here and execve allocates or takes a lock (init has no other
 * thread, so the locks it inherited stay as they were), the child's
 * signal handlers, descriptors, credentials, limits and working
 * directory are its own (no CLONE_SIGHAND, CLONE_FILES, CLONE_FS), and
 * its stack is a mapping of its own, which the kernel drops with init. */
static pid_t start_program(const child_plan *plan)
{
    /* With a starter, init's memory is runbox's, where a mapping would
     * outlive init: the starter thread's stack for programs is free now. */
    if (plan->starter)
        return clone(program_main, plan->stacks.program + plan->stacks.size,
                     CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)plan);
    char *stack = mmap(NULL, PROGRAM_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    return clone(program_main, stack + PROGRAM_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD,
                 (void *)plan);
}

/* Decimal text of n into buf (no allocation: init's memory is a copy of a
 * process whose other threads may have held malloc's locks). */
static char *decimal(char *buf, size_t size, long n)
{
    char *p = buf + size;
    *--p = 0;
    do
        *--p = (char)('0' + n % 10);
    while ((n /= 10) > 0 && p > buf);
    return p;
}

/* Init becomes runbox-init (reaper.c), which reaps as init would
 * (rbx_init_reap): its copy of runbox's address space goes now, beside the
 * program, instead of when the program has ended. Returns only if it
 * could not (init then reaps itself). */
static void become_reaper(const child_plan *plan, pid_t program)
{
    char fd_text[16], pid_text[16];
    char *argv[] = {"runbox-init", decimal(fd_text, sizeof fd_text, plan->status_fd),
                    decimal(pid_text, sizeof pid_text, program), NULL};
    char *envp[] = {NULL};
    if (plan->reaper_fd < 0 || fcntl(plan->status_fd, F_SETFD, 0) != 0)
        return;
    /* The root's copy first (mount.h), else the one beside runbox. */
    syscall(SYS_execve, RBX_SANDBOX_INIT, argv, envp);
    syscall(SYS_execveat, plan->reaper_fd, "", argv, envp, AT_EMPTY_PATH);
    fcntl(plan->status_fd, F_SETFD, FD_CLOEXEC);
}

/* The process's own argv and environment strings, as the kernel laid them
 * out (contiguous): glibc passes them to ELF constructors. */
static char *args_start, *args_end;

__attribute__((constructor)) static void note_args(int argc, char **argv, char **envp)
{
    if (argc <= 0 || !argv || !argv[0])
        return;
    args_start = argv[0];
    char *last = argv[argc - 1];
    for (char **e = envp; e && *e; e++)
        last = *e;
    args_end = last + strlen(last);
}

/* Init is a copy of runbox: its /proc/1/cmdline and /proc/1/environ would
 * show the sandbox runbox's command line and environment. Wipe them. */
static void forget_runbox_args(void)
{
    if (args_start && args_end > args_start)
        memset(args_start, 0, (size_t)(args_end - args_start));
}

/* Init is a copy of a process that may hold other executions' pipes and
 * other sessions' locks (a server): it keeps only its plan's descriptors,
 * or a lock held here would outlive its own execution. */
static void close_others(const child_plan *plan)
{
    int keep[18 + RBX_CGROUP_MAX_FDS + RBX_MAX_BINDS];
    size_t n = 0;
    const rbx_root_request *root = &plan->spec->root_request;
    int fixed[] = {plan->sync_fd,   plan->stdin_fd,  plan->stdout_fd,     plan->stderr_fd,
                   plan->report_fd, plan->status_fd, plan->spec->code_fd, root->home_tree,
                   root->tmp_tree,  plan->egress_fd, plan->reaper_fd, plan->channel_ours_fd};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fixed[i] >= 0)
            keep[n++] = fixed[i];
    for (size_t i = 0; root->from_template && i < root->bind_count; i++)
        keep[n++] = root->bind_trees[i];
    for (size_t i = 0; i < plan->cgroup_count; i++)
        keep[n++] = plan->cgroup_fds[i];
    for (size_t i = 1; i < n; i++) /* insertion sort: a handful of numbers, no qsort */
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned from = 3;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < (int)from)
            continue;
        if ((unsigned)keep[i] > from)
            syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
        from = (unsigned)keep[i] + 1;
    }
    syscall(SYS_close_range, from, ~0U, 0);
}

/* The egress policy is spoken to through sockets of the sandbox's own
 * network namespace, opened here while init still holds every capability
 * there (port 53 and nftables need them): a netlink socket for its rules
 * and the resolver's socket on the sandbox's loopback. runbox uses them
 * from outside; the program never holds either. */
static int hand_over_egress_sockets(int channel, const char **step)
{
    *step = "open the egress policy's sockets";
    int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    int dns = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(53)};
    int rc = -1;
    if (nl >= 0 && dns >= 0 && inet_pton(AF_INET, RBX_SANDBOX_NAMESERVER, &at.sin_addr) == 1 &&
        bind(dns, (struct sockaddr *)&at, sizeof at) == 0) {
        int fds[2] = {nl, dns};
        char control[CMSG_SPACE(sizeof fds)];
        memset(control, 0, sizeof control);
        struct iovec iov = {.iov_base = "e", .iov_len = 1};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = control,
                             .msg_controllen = sizeof control};
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof fds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
        rc = sendmsg(channel, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
    }
    int error = errno;
    if (nl >= 0)
        close(nl);
    if (dns >= 0)
        close(dns);
    close(channel);
    errno = error;
    return rc;
}

/* Init is a clone of a thread of runbox, with a copy of runbox's signal
 * handlers and that thread's signal mask. No handler of runbox's may run
 * in init: with a starter it would run in runbox's own memory (the CLI
 * daemon's sets the flag that stops it), and an unprivileged sandbox's
 * program has init's uid. At their defaults, init as PID 1 of its
 * namespace gets no signal from inside it. Ignored signals stay ignored,
 * as posix_spawn leaves them. And the program starts with none blocked. */
static void default_signals(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction action;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &action) != 0 ||
            (!(action.sa_flags & SA_SIGINFO) &&
             (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN)))
            continue;
        memset(&action, 0, sizeof action);
        action.sa_handler = SIG_DFL;
        sigaction(sig, &action, NULL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Whether a checkpoint may take this sandbox (hibernation): a kernel's,
 * whose init makes its channel, or a process's (a paused E2B sandbox's
 * command) whose init becomes runbox-init. */
static bool may_be_checkpointed(const child_plan *plan)
{
    return plan->channel_ours_fd >= 0 || (plan->spec->bare && plan->starter);
}

/* In a sandbox a checkpoint may take, init's 0 and 1, and a program's
 * stdin that is none, become the sandbox's own /dev/null rather than the
 * host's: nothing of the host's mounts stays open in it, and criu finds
 * every file it holds in mounts of its own. Other sandboxes are never
 * checkpointed: they keep the host's, and the system calls. */
static int null_of_the_sandbox(const child_plan *plan)
{
    if (!may_be_checkpointed(plan))
        return 0;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        return -1;
    int failed = dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
                 (plan->stdin_null && dup3(null, plan->stdin_fd, O_CLOEXEC) < 0);
    close(null);
    return failed ? -1 : 0;
}

/* The kernel's channel made anew here, in the sandbox's network
 * namespace (spec.channel_inside): the program's end over code_fd (and
 * its stdin, for a kernel that reads it there), runbox's end at the
 * number of runbox's own, kept open by init (across its execve) for
 * runbox to take. The channel runbox made is dropped. A channel of the
 * sandbox's own namespace whose both ends are in its tree is one a
 * checkpoint can carry. */
static int channel_of_the_sandbox(const child_plan *plan)
{
    if (plan->channel_ours_fd < 0)
        return 0;
    int inner[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, inner) != 0)
        return -1;
    int failed = dup3(inner[1], plan->spec->code_fd, O_CLOEXEC) < 0 ||
                 (plan->spec->stdin_is_code_fd && dup3(inner[1], plan->stdin_fd, O_CLOEXEC) < 0) ||
                 dup3(inner[0], plan->channel_ours_fd, 0) < 0;
    close(inner[0]);
    close(inner[1]);
    return failed ? -1 : 0;
}

static int sandbox_init(const child_plan *plan)
{
    default_signals();
    /* A copy of runbox has runbox's arguments to wipe; runbox's own memory
     * must be left alone: /proc/1/cmdline is masked instead (mount.c), as
     * the program could read it from its execve to init's. */
    if (!plan->starter)
        forget_runbox_args();
    close_others(plan);
    for (int i = 0; i < 7; i++)
        if (plan->parent_ends[i] >= 0)
            close(plan->parent_ends[i]);
    /* Init never writes to runbox's own stdout or stderr (an MCP server's
     * stdout is its protocol): its 0 and 1 are /dev/null, its 2 the
     * program's stderr pipe. The engine keeps fds 0-2 open, so no pipe of
     * the plan is among them. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(plan->stderr_fd, 2) < 0)
        _exit(1);
    close(null);
    /* The sandbox never outlives the runbox that started it (nor the
     * thread: the signal comes when the thread that cloned init ends,
     * which rbx_execute's caller outlives). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* A kernel's init, and a process's (a paused E2B sandbox's command),
     * leads a session of its own: a checkpoint (hibernation) refuses a
     * tree whose session leader is outside it. */
    if (may_be_checkpointed(plan))
        setsid();
    char go;
    if (read(plan->sync_fd, &go, 1) != 1)
        _exit(1);
    /* Into the execution's cgroup before anything else runs, so that every
     * process it ever starts is limited and can be killed there. */
    if (rbx_cgroup_join(plan->cgroup_fds, plan->cgroup_count) != 0) {
        report_error(plan->report_fd, "join the execution's cgroup", errno);
        _exit(1);
    }
    for (size_t i = 0; i < plan->cgroup_count; i++)
        close(plan->cgroup_fds[i]);
    /* v1 joins after the clone, so the cgroup namespace made by the clone
     * is rooted where runbox was: a new one, rooted here, shows the
     * sandbox "/" instead of the host's path to its cgroup. */
    if (plan->cgroup_count > 0 && unshare(CLONE_NEWCGROUP) != 0) {
        report_error(plan->report_fd, "root the cgroup namespace", errno);
        _exit(1);
    }
    rbx_trace_mark(plan->spec->trace, RBX_PHASE_CGROUP);
    /* The UTS namespace starts as a copy of the host's names: `hostname`
     * would print the host's. */
    if (sethostname(RBX_SANDBOX_HOSTNAME, sizeof RBX_SANDBOX_HOSTNAME - 1) != 0 ||
        setdomainname("(none)", 6) != 0) {
        report_error(plan->report_fd, "name the sandbox's host", errno);
        _exit(1);
    }
    const char *step = "bring up loopback";
    if ((plan->spec->network != RBX_NET_HOST && rbx_net_loopback_up() != 0) ||
        (plan->egress_fd >= 0 && hand_over_egress_sockets(plan->egress_fd, &step) != 0) ||
        rbx_root_enter(plan->spec->root, &plan->spec->root_request, &step) != 0) {
        report_error(plan->report_fd, step, errno);
        _exit(1);
    }
    rbx_trace_mark(plan->spec->trace, RBX_PHASE_MOUNTS);
    if (null_of_the_sandbox(plan) != 0) {
        report_error(plan->report_fd, "open the sandbox's /dev/null", errno);
        _exit(1);
    }
    if (channel_of_the_sandbox(plan) != 0) {
        report_error(plan->report_fd, "make the kernel's channel", errno);
        _exit(1);
    }
    /* Becoming the namespace's root above changed init's uid, which clears
     * the parent-death signal: set it again, then make sure runbox did not
     * die in between (its end of the status pipe would be closed). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd parent = {.fd = plan->status_fd, .events = POLLOUT};
    if (poll(&parent, 1, 0) < 0 || (parent.revents & POLLERR))
        _exit(1);
    /* runbox made the network's interface while the root was built: the
     * program starts once the egress policy is in force. */
    if (plan->spec->network == RBX_NET_OUTSIDE && read(plan->sync_fd, &go, 1) != 1)
        _exit(1);
    close(plan->sync_fd);
    /* Not dumpable: the program cannot read init's copy of runbox through
     * /proc/1 (mem, environ) in the moment before init executes
     * runbox-init. With a starter that memory is runbox's, whose
     * dumpability is a flag of the memory, not of init: there the
     * program's lack of init's capabilities (unprivileged) or its other
     * uid (as root) keeps it out, as they do anyway. */
    if (!plan->starter)
        prctl(PR_SET_DUMPABLE, 0);
    pid_t program = start_program(plan);
    if (program < 0) {
        report_error(plan->report_fd, "fork the program", errno);
        _exit(1);
    }
    close(plan->stdin_fd);
    close(plan->stdout_fd);
    close(plan->stderr_fd);
    close(plan->report_fd);
    /* Init has nothing more to say: its 2 lets go of the program's stderr
     * pipe, which then ends with the execution's last process instead of
     * with init's exit (an answer that does not wait for init waits for
     * the pipes: rbx_watch.leave_init). A sandbox a checkpoint may take
     * keeps the descriptors its checkpoints were made with. */
    if (!may_be_checkpointed(plan))
        dup2(0, 2);
    /* The program has executed: off the starter's stacks, as init is once
     * it executes too. */
    if (plan->starter)
        rbx_starter_stacks_left(plan->starter);
    become_reaper(plan, program);
    /* In runbox's memory init may not stay: the starter thread and the
     * execution would wait for it. The sandbox ends; runbox sees no report. */
    if (plan->starter) {
        kill(program, SIGKILL);
        _exit(1);
    }
    rbx_init_reap(plan->status_fd, program);
}

static int write_file(pid_t pid, const char *name, const char *text)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = (ssize_t)strlen(text);
    ssize_t n = write(fd, text, (size_t)len);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == len ? 0 : -1;
}

/* Maps the sandbox's users. As root: the sandbox's root and user to high,
 * unprivileged host uids. Otherwise: the caller's own uid, which is all an
 * unprivileged user may map. */
static int map_users(pid_t pid, bool is_root)
{
    char map[128];
    if (is_root) {
        char groups[128];
        snprintf(map, sizeof map, "0 %d 1\n%d %d 1\n", RBX_HOST_UID_BASE, RBX_SANDBOX_UID,
                 RBX_HOST_UID_BASE + RBX_SANDBOX_UID);
        /* Group 1 too (a host gid nothing has): the network namespace's
         * ping_group_range is "1 0" (nobody may ping), and a restored
         * sandbox (hibernation) writes it back inside, where an unmapped
         * group is refused. */
        snprintf(groups, sizeof groups, "0 %d 2\n%d %d 1\n", RBX_HOST_UID_BASE, RBX_SANDBOX_UID,
                 RBX_HOST_UID_BASE + RBX_SANDBOX_UID);
        return write_file(pid, "uid_map", map) || write_file(pid, "gid_map", groups) ? -1 : 0;
    }
    char gmap[64];
    snprintf(map, sizeof map, "%d %u 1\n", RBX_SANDBOX_UID, (unsigned)getuid());
    snprintf(gmap, sizeof gmap, "%d %u 1\n", RBX_SANDBOX_UID, (unsigned)getgid());
    if (write_file(pid, "setgroups", "deny") != 0)
        return -1;
    return write_file(pid, "uid_map", map) || write_file(pid, "gid_map", gmap) ? -1 : 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* The pipes between runbox and a sandbox: [0] is the read end, [1] the write end. */
typedef struct channels {
    int sync[2], out[2], err[2], report[2], status[2], in[2], egress[2];
} channels;

static void close_channels(channels *c)
{
    int *all[] = {&c->sync[0], &c->sync[1],   &c->out[0],    &c->out[1],    &c->err[0],
                  &c->err[1],  &c->report[0], &c->report[1], &c->status[0], &c->status[1],
                  &c->in[0],   &c->in[1],     &c->egress[0], &c->egress[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        close_fd(all[i]);
}

/* A terminal's slave is the program's stdin, stdout and stderr. */
static rbx_status open_terminal(channels *c, int terminal_fd, rbx_error *err)
{
    if (pipe2(c->sync, O_CLOEXEC) || pipe2(c->report, O_CLOEXEC) || pipe2(c->status, O_CLOEXEC))
        return rbx_fail(err, RBX_ESYSTEM, "cannot create pipes for the sandbox: %s",
                        strerror(errno));
    if ((c->in[0] = fcntl(terminal_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
        (c->out[1] = fcntl(terminal_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
        (c->err[1] = fcntl(terminal_fd, F_DUPFD_CLOEXEC, 3)) < 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot pass the terminal: %s", strerror(errno));
    return RBX_OK;
}

static rbx_status open_channels(channels *c, bool with_stdin, int stdin_from, rbx_error *err)
{
    if (pipe2(c->sync, O_CLOEXEC) || pipe2(c->out, O_CLOEXEC) || pipe2(c->err, O_CLOEXEC) ||
        pipe2(c->report, O_CLOEXEC) || pipe2(c->status, O_CLOEXEC))
        return rbx_fail(err, RBX_ESYSTEM, "cannot create pipes for the sandbox: %s",
                        strerror(errno));
    if (stdin_from >= 0) {
        if ((c->in[0] = fcntl(stdin_from, F_DUPFD_CLOEXEC, 3)) < 0)
            return rbx_fail(err, RBX_ESYSTEM, "cannot pass the kernel's channel: %s",
                            strerror(errno));
    } else if (with_stdin) {
        /* A pipe, which a checkpoint can carry (a socketpair's half it
         * cannot: docs/hibernation-notes.md), written without blocking
         * and without SIGPIPE (rbx_write_nosignal). Its default size:
         * writers wait for the program to read, and a larger one would
         * count against the user's pipe pages beside the 1 MB outputs. */
        if (pipe2(c->in, O_CLOEXEC) != 0 || fcntl(c->in[1], F_SETFL, O_NONBLOCK) != 0)
            return rbx_fail(err, RBX_ESYSTEM, "cannot create the stdin pipe: %s",
                            strerror(errno));
    } else if ((c->in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        return rbx_fail(err, RBX_ESYSTEM, "cannot open /dev/null: %s", strerror(errno));
    }
    /* Fewer wake-ups for programs that print a lot. */
    (void)fcntl(c->out[1], F_SETPIPE_SZ, 1 << 20);
    return RBX_OK;
}

/* As root, the new user namespace would be owned by host uid 0, and the
 * kernel charges the per-user counts of everything inside it (inotify
 * instances, fanotify groups, queued signals, message queue bytes) to its
 * owner at the host's level too: a sandbox could use up root's budget and
 * leave the host's daemons with EMFILE, and concurrent sandboxes would
 * share one budget. So this thread makes the namespace under an effective
 * uid of its own (RBX_OWNER_UID_BASE + its thread id), for the clone alone.
 * Credentials are per thread in the kernel, so the raw system calls touch
 * no other thread; SECBIT_NO_SETUID_FIXUP keeps the capabilities, and the
 * file-system uid stays 0, so cgroups and files are reached as before. */
typedef struct owner_switch {
    bool active;
    int securebits;
    int dumpable;
} owner_switch;

static int become_owner(owner_switch *saved)
{
    saved->securebits = prctl(PR_GET_SECUREBITS);
    saved->dumpable = prctl(PR_GET_DUMPABLE);
    if (saved->securebits < 0 ||
        prctl(PR_SET_SECUREBITS, saved->securebits | SECBIT_NO_SETUID_FIXUP) != 0)
        return -1;
    uid_t owner = RBX_OWNER_UID_BASE + (uid_t)syscall(SYS_gettid);
    if (syscall(SYS_setresuid, -1, owner, -1) != 0) {
        prctl(PR_SET_SECUREBITS, saved->securebits);
        return -1;
    }
    syscall(SYS_setfsuid, 0);
    saved->active = true;
    return 0;
}

static void restore_owner(owner_switch *saved)
{
    if (!saved->active)
        return;
    int error = errno;
    syscall(SYS_setresuid, -1, 0, -1); /* also sets the file-system uid back to 0 */
    prctl(PR_SET_SECUREBITS, saved->securebits);
    /* A change of effective uid made the process (all of its threads)
     * non-dumpable: that was never the point. */
    if (saved->dumpable > 0)
        prctl(PR_SET_DUMPABLE, saved->dumpable);
    saved->active = false;
    errno = error;
}

/* runbox-init beside runbox, opened once for every sandbox's init to
 * execute (become_reaper); -1 where it is missing: init reaps itself. */
static int reaper = -1;
static pthread_once_t reaper_once = PTHREAD_ONCE_INIT;

static void open_reaper(void)
{
    reaper = rbx_root_init_program(); /* the root's copy is made from it too */
}

static int reaper_fd(void)
{
    pthread_once(&reaper_once, open_reaper);
    return reaper;
}

/* Whether init runs in runbox's memory (a starter's) or in a copy of it.
 * A copy where this build has no starters, where there is no runbox-init
 * to execute (init would stay), and where the operator says
 * RUNBOX_INIT=copy: the way before starters, kept for a kernel that
 * refuses CLONE_VM beside new namespaces, and for the test that compares
 * what a program is given either way. */
static bool with_starter;
static pthread_once_t with_starter_once = PTHREAD_ONCE_INIT;

static void decide_starter(void)
{
    const char *how = getenv("RUNBOX_INIT");
    with_starter = rbx_starter_supported() && reaper_fd() >= 0 && !(how && !strcmp(how, "copy"));
}

static bool init_with_starter(void)
{
    pthread_once(&with_starter_once, decide_starter);
    return with_starter;
}

/* How long a start waits for init to execute runbox-init (see
 * rbx_sandbox_start): ample for building a root and starting a program. */
#define INIT_EXEC_WAIT_MS 10000

/* Init with a starter: first it lets the thread that asked go on. */
static int init_main(void *arg)
{
    const child_plan *plan = arg;
    rbx_starter_started(plan->starter);
    return sandbox_init(plan);
}

/* How init is cloned: args, for the thread that clones. */
typedef struct init_clone {
    child_plan *plan;
    struct clone_args args;
} init_clone;

/* On the thread that clones, in the prepared namespace for the clone
 * alone (the sandbox's mount namespace is a copy of it, not of the
 * host's), and as root under an owner of its own. Without a starter,
 * clone3 without CLONE_VM behaves like fork: the child continues on a copy
 * of this stack, so there is no separate stack (which confuses ASan). */
static pid_t clone_here(init_clone *c)
{
    const rbx_sandbox_spec *spec = c->plan->spec;
    rbx_ns_switch ns = {0};
    if (spec->template_ns >= 0 && rbx_mount_ns_enter(spec->template_ns, &ns) != 0)
        return -1;
    owner_switch owner = {0};
    pid_t pid = -1;
    if (!spec->is_root || become_owner(&owner) == 0) {
        if (c->plan->starter) {
            pid = (pid_t)rbx_clone3_call(&c->args, init_main, c->plan);
        } else {
            pid = (pid_t)syscall(SYS_clone3, &c->args, sizeof c->args);
            if (pid == 0)
                _exit(sandbox_init(c->plan));
        }
        restore_owner(&owner);
    }
    rbx_mount_ns_leave(&ns);
    return pid;
}

/* On a starter thread, which sleeps in the clone until init executes
 * runbox-init: init shares runbox's memory (CLONE_VM) and runs on the
 * thread's stack for inits. Its pid is written where the asking thread
 * reads it before init runs (CLONE_PARENT_SETTID). */
static pid_t clone_from_starter(rbx_starter_job *job, void *arg)
{
    init_clone *c = arg;
    c->plan->stacks = rbx_starter_stacks_here();
    c->args.flags |= CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID;
    c->args.parent_tid = (uint64_t)(uintptr_t)&job->pid;
    c->args.stack = (uint64_t)(uintptr_t)c->plan->stacks.init;
    c->args.stack_size = c->plan->stacks.size;
    return clone_here(c);
}

/* c lives until the sandbox is started: with a starter, init reads its
 * plan in this memory until it executes runbox-init (rbx_starter_end). */
static pid_t clone_init(init_clone *c, int *pidfd, int cgroup_dirfd)
{
    child_plan *plan = c->plan;
    c->args = (struct clone_args){
        .flags = SANDBOX_CLONE_FLAGS | CLONE_PIDFD |
                 (plan->spec->network == RBX_NET_HOST ? 0 : CLONE_NEWNET),
        .pidfd = (uint64_t)(uintptr_t)pidfd,
        .exit_signal = SIGCHLD,
    };
    /* cgroup v2: born in the execution's cgroup, no migration (which costs
     * an RCU grace period); v1 cannot, and init joins by writing to it. */
    if (cgroup_dirfd >= 0) {
        c->args.flags |= CLONE_INTO_CGROUP;
        c->args.cgroup = (uint64_t)cgroup_dirfd;
        plan->cgroup_count = 0;
    }
    if (plan->starter) {
        pid_t pid = rbx_starter_begin(plan->starter, clone_from_starter, c);
        if (pid >= 0 || plan->starter->error)
            return pid;
        plan->starter = NULL; /* no thread to clone from: init is a copy */
    }
    return clone_here(c);
}

/* What init said went wrong, when it said something ("E<step>: <why>"). */
static void init_complaint(int report_fd, char *text, size_t size)
{
    text[0] = 0;
    struct pollfd pfd = {.fd = report_fd, .events = POLLIN};
    if (poll(&pfd, 1, 1000) != 1)
        return;
    ssize_t n = read(report_fd, text, size - 1);
    if (n <= 1 || text[0] != 'E')
        return;
    text[n] = 0;
    text[strcspn(text, "\n")] = 0;
    memmove(text, text + 1, strlen(text));
}

/* Init waits for one byte before it does anything: by then its users are
 * mapped. With the network on, its interface is made meanwhile, and the
 * egress policy put in place beside that (egress_setup.h); a second byte
 * tells init, which has built its root meanwhile, that both are in place
 * and the program may start. */
static rbx_status release_init(const rbx_sandbox_spec *spec, rbx_sandbox *sandbox,
                               const channels *c, rbx_egress_setup *egress, rbx_error *err)
{
    if (map_users(sandbox->pid, spec->is_root) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot map users into the sandbox: %s", strerror(errno));
    if (write(c->sync[1], "g", 1) != 1)
        return rbx_fail(err, RBX_ESYSTEM, "cannot start the sandbox: %s", strerror(errno));
    /* runbox-net starts on the sandbox's first frame (net_wake.c), if it
     * ever sends one. */
    bool outside = spec->network == RBX_NET_OUTSIDE;
    int64_t from = rbx_now_us();
    int tap = outside ? rbx_net_tap(sandbox->pidfd, err) : -1;
    if (outside && tap < 0)
        return err->status;
    if (spec->trace)
        spec->trace->network_us += rbx_now_us() - from;
    if (c->egress[0] >= 0) {
        rbx_status status = rbx_egress_setup_finish(egress, &sandbox->egress, err);
        if (spec->trace)
            spec->trace->egress_us += egress->work_us;
        if (status != RBX_OK) {
            char why[300];
            if (!egress->received) { /* init may have said why */
                init_complaint(c->report[0], why, sizeof why);
                if (*why)
                    rbx_fail(err, status, "the sandbox could not set up its egress policy: %s",
                             why);
            }
            close_fd(&tap);
            return status;
        }
    }
    if (outside && write(c->sync[1], "n", 1) != 1) {
        close_fd(&tap);
        return rbx_fail(err, RBX_ESYSTEM, "cannot start the sandbox: %s", strerror(errno));
    }
    if (outside && rbx_net_helper_start(tap, &sandbox->net, err) != RBX_OK)
        return err->status;
    return RBX_OK;
}

rbx_status rbx_sandbox_start(const rbx_sandbox_spec *spec, rbx_sandbox *sandbox, rbx_error *err)
{
    memset(sandbox, 0, sizeof *sandbox);
    sandbox->pid = -1;
    sandbox->pidfd = sandbox->stdin_fd = sandbox->stdout_fd = sandbox->stderr_fd = -1;
    sandbox->report_fd = sandbox->status_fd = -1;
    sandbox->net = (rbx_net_helper){0};

    char why[256];
    channels c;
    memset(&c, -1, sizeof c);
    rbx_egress_setup egress = {0};
    rbx_starter_job starter = {.state = RBX_STARTER_OVER};
    init_clone init = {0};
    /* The child reads its own copy: with a prepared namespace, the host's
     * directories go in as detached mounts made here. */
    rbx_sandbox_spec own = *spec;
    own.root_request.home_tree = own.root_request.tmp_tree = -1;
    own.root_request.from_template = false;
    /* Only where hibernation can take it (root): unprivileged, the
     * namespace's root is the program's own uid, which could remove it. */
    own.root_request.boot_id_named = spec->channel_inside && spec->is_root;
    for (size_t i = 0; i < RBX_MAX_BINDS; i++)
        own.root_request.bind_trees[i] = -1;
    spec = &own;
    child_plan plan = {.spec = spec};
    rbx_status status =
        spec->terminal
            ? open_terminal(&c, spec->terminal_fd, err)
            : open_channels(&c, spec->with_stdin, spec->stdin_is_code_fd ? spec->code_fd : -1, err);
    if (status == RBX_OK && spec->network == RBX_NET_OUTSIDE && spec->egress &&
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, c.egress) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot create the egress policy's channel: %s",
                          strerror(errno));
    /* Beside the cgroup's and the namespaces' making, the tap's and init's
     * building of its root: the policy's first use in this process (a
     * millisecond of loading and building), then its rules, once init
     * hands its sockets over. */
    if (status == RBX_OK && c.egress[0] >= 0)
        rbx_egress_setup_start(&egress, spec->egress, c.egress[0]);
    if (status == RBX_OK && spec->template_ns >= 0 &&
        rbx_template_detach_dirs(&own.root_request) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot detach the session's directories: %s",
                          strerror(errno));
    if (status == RBX_OK && rbx_cgroup_probe()->mode != RBX_CGROUP_NONE &&
        rbx_cgroup_create(&spec->limits, &sandbox->cgroup, why, sizeof why) != 0)
        status = rbx_fail(err, RBX_ESYSTEM, "cannot create the execution's cgroup: %s", why);
    if (status != RBX_OK)
        goto out;
    plan = (child_plan){
        .spec = spec,
        .sync_fd = c.sync[0],
        .stdin_fd = c.in[0],
        .stdin_null = !spec->terminal && !spec->with_stdin && !spec->stdin_is_code_fd,
        .stdout_fd = c.out[1],
        .stderr_fd = c.err[1],
        .report_fd = c.report[1],
        .status_fd = c.status[1],
        .egress_fd = c.egress[1],
        .reaper_fd = reaper_fd(),
        .starter = init_with_starter() ? &starter : NULL,
        .channel_ours_fd = spec->channel_inside && init_with_starter() && !spec->terminal
                               ? spec->channel_ours_fd
                               : -1,
        .parent_ends = {c.sync[1], c.out[0], c.err[0], c.report[0], c.status[0], c.in[1],
                        c.egress[0]},
    };
    if (sandbox->cgroup) {
        int n = rbx_cgroup_enter_fds(sandbox->cgroup, plan.cgroup_fds, RBX_CGROUP_MAX_FDS);
        plan.cgroup_count = n > 0 ? (size_t)n : 0;
        plan.in_cgroup = true;
    }
    int cgroup_dirfd = sandbox->cgroup ? rbx_cgroup_v2_dirfd(sandbox->cgroup) : -1;
    init.plan = &plan;
    sandbox->pid = clone_init(&init, &sandbox->pidfd, cgroup_dirfd);
    sandbox->channel_inside = plan.channel_ours_fd >= 0;
    sandbox->init_executed = plan.starter != NULL;
    rbx_trace_mark(spec->trace, RBX_PHASE_CLONED);
    if (sandbox->pid < 0) {
        status = rbx_fail(err, RBX_ESYSTEM,
                          "cannot create the sandbox's namespaces: %s (are user namespaces "
                          "enabled? see runbox check)",
                          strerror(errno));
        goto out;
    }
    close_fd(&c.egress[1]); /* init's */
    status = release_init(spec, sandbox, &c, &egress, err);
    rbx_trace_mark(spec->trace, RBX_PHASE_RELEASED);
    /* Init reads this call's memory (plan, own, and the caller's spec)
     * until it executes runbox-init, once the program has executed: only
     * system calls stand between, but one that hangs (a mount, an execve
     * on a stuck file system) must not hold the caller past any timeout. */
    if (status == RBX_OK && !rbx_starter_end(&starter, INIT_EXEC_WAIT_MS))
        status = rbx_fail(err, RBX_ESYSTEM,
                          "the sandbox did not start its program within %d s; it was stopped",
                          INIT_EXEC_WAIT_MS / 1000);
    if (status != RBX_OK) {
        rbx_sandbox_kill(sandbox);
        rbx_sandbox_reap(sandbox, NULL);
        rbx_net_helper_stop(&sandbox->net);
        rbx_egress_guard_stop(sandbox->egress);
        sandbox->egress = NULL;
        close_fd(&sandbox->pidfd);
        goto out;
    }
    sandbox->stdout_fd = c.out[0];
    sandbox->stderr_fd = c.err[0];
    sandbox->report_fd = c.report[0];
    sandbox->status_fd = c.status[0];
    sandbox->stdin_fd = spec->with_stdin && !spec->terminal ? c.in[1] : -1;
    c.out[0] = c.err[0] = c.report[0] = c.status[0] = c.in[1] = -1;
out:
    /* Init is past its execve or dead (killed above on a failure): plan,
     * own and init are no longer read. */
    rbx_starter_end(&starter, -1);
    close_fd(&c.egress[1]); /* no init to hand the sockets over: the setup's wait ends */
    rbx_egress_setup_abandon(&egress);
    rbx_template_close_dirs(&own.root_request); /* the child has its own copies */
    /* plan.cgroup_fds belong to the cgroup: rbx_cgroup_destroy closes them. */
    if (status != RBX_OK) {
        rbx_cgroup_destroy(sandbox->cgroup);
        sandbox->cgroup = NULL;
    }
    close_channels(&c);
    return status;
}

pid_t rbx_sandbox_program(const rbx_sandbox *sandbox)
{
    char path[64], buf[64] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)sandbox->pid, (int)sandbox->pid);
    int fd = sandbox->pid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? (pid_t)strtol(buf, NULL, 10) : -1;
}

void rbx_sandbox_kill(rbx_sandbox *sandbox)
{
    if (sandbox->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, sandbox->pidfd, SIGKILL, NULL, 0);
    /* A frozen init dies only once thawed (v1): the kill is pending now. */
    if (rbx_cgroup_frozen(sandbox->cgroup))
        (void)rbx_cgroup_freeze(sandbox->cgroup, false);
}

bool rbx_sandbox_reap(rbx_sandbox *sandbox, rbx_exit_report *report)
{
    if (sandbox->pid > 0) {
        siginfo_t info;
        while (waitid(P_PIDFD, (id_t)sandbox->pidfd, &info, WEXITED) != 0 && errno == EINTR)
            ;
        sandbox->pid = -1;
    }
    if (!report || sandbox->status_fd < 0)
        return false;
    ssize_t n = read(sandbox->status_fd, report, sizeof *report);
    return rbx_exit_report_whole(report, n);
}

void rbx_sandbox_egress_report(rbx_sandbox *sandbox, rbx_egress_report *report)
{
    if (sandbox->egress)
        rbx_egress_guard_take_report(sandbox->egress, report);
}

void rbx_sandbox_close(rbx_sandbox *sandbox)
{
    rbx_net_helper_stop(&sandbox->net);
    rbx_egress_guard_stop(sandbox->egress);
    sandbox->egress = NULL;
    rbx_cgroup_destroy(sandbox->cgroup);
    sandbox->cgroup = NULL;
    close_fd(&sandbox->pidfd);
    close_fd(&sandbox->stdin_fd);
    close_fd(&sandbox->stdout_fd);
    close_fd(&sandbox->stderr_fd);
    close_fd(&sandbox->report_fd);
    close_fd(&sandbox->status_fd);
}
