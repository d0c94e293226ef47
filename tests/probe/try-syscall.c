/* try-syscall: attempts the named system calls and prints, a line each,
 * "NAME RESULT": OK, an errno name (EPERM, ENOSYS...) or the signal that
 * killed the attempt (SIGSYS). In the spirit of bubblewrap's
 * tests/try-syscall.c.
 *
 * Safe to run on a host without any filter, even as root: every call has
 * arguments the kernel rejects (an empty path, a bad descriptor, invalid
 * flags or magic) before it does anything, or is a no-op. Under the
 * sandbox's filter the verdict comes first, so EPERM against, say, EBADF
 * tells a filter from none. Each attempt runs in a child of its own, so a
 * kill or a changed personality stays there.
 *
 *   try-syscall mount tiocsti clone3 ...   (exits 2 on an unknown name) */
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define P(x) ((long)(x)) /* a pointer or flag as a syscall argument */

#ifdef __x86_64__
/* getpid (20 on i386) through the 32-bit entry point: to a filter, a call
 * from a foreign architecture. */
static long int80_getpid(void)
{
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "r8", "r9", "r10", "r11", "memory");
    if (ret < 0) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}
#endif

typedef struct probe {
    const char *name;
    long nr;
    long arg[6];
    long (*run)(void); /* instead of nr, when a plain syscall() will not do */
} probe;

/* A clone that fails its sanity checks (CLONE_SIGHAND without CLONE_VM)
 * before any namespace is made. */
#define CLONE_BAD(flag) P((flag) | CLONE_SIGHAND | SIGCHLD)

static const struct timeval bad_time = {0, -1}; /* tv_usec out of range: EINVAL */
static const struct timespec zero_time = {0, 0};
static const struct btrfs_ioctl_vol_args_v2 empty_vol_args; /* no name: nothing can be made */

static const probe probes[] = {
    {"getpid", SYS_getpid, {0}, NULL},
    /* The empty path fails its lookup (ENOENT) before anything is mounted. */
    {"mount", SYS_mount, {P("none"), P(""), P("tmpfs")}, NULL},
    {"umount", SYS_umount2, {P("")}, NULL},
    {"pivot_root", SYS_pivot_root, {P(""), P("")}, NULL},
    {"fsopen", SYS_fsopen, {P("")}, NULL},     /* no such type: ENODEV */
    {"fsconfig", SYS_fsconfig, {-1, 0}, NULL}, /* SET_FLAG without key */
    {"fsmount", SYS_fsmount, {-1}, NULL},
    {"fspick", SYS_fspick, {-1, P("")}, NULL},
    {"move_mount", SYS_move_mount, {-1, P(""), -1, P("")}, NULL},
    {"open_tree", SYS_open_tree, {-1, P("")}, NULL},
    {"mount_setattr", SYS_mount_setattr, {-1, P(""), 0, 0, 0}, NULL}, /* size 0: EINVAL */
    {"swapon", SYS_swapon, {P("")}, NULL},
    {"swapoff", SYS_swapoff, {P("")}, NULL},
    /* Wrong magic (checked right after the capability) and no such command. */
    {"reboot", SYS_reboot, {0, 0, P(0xdeadbeefu)}, NULL},
    /* Undefined flag and too many segments: EINVAL before anything else. */
    {"kexec_load", SYS_kexec_load, {0, -1, 0, P(0x8000)}, NULL},
    {"kexec_file_load", SYS_kexec_file_load, {-1, -1, 0, 0, P(1L << 30)}, NULL},
    {"init_module", SYS_init_module, {0, 0, P("")}, NULL}, /* too short: ENOEXEC */
    {"finit_module", SYS_finit_module, {-1, P("")}, NULL},
    {"delete_module", SYS_delete_module, {P("runbox-no-such-module")}, NULL},
    {"bpf", SYS_bpf, {-1}, NULL},                                   /* no such command */
    {"perf_event_open", SYS_perf_event_open, {0, 0, -1, -1}, NULL}, /* NULL attr: EFAULT */
    {"keyctl", SYS_keyctl, {-1}, NULL},                             /* no such operation */
    {"add_key", SYS_add_key, {P(""), P("")}, NULL},                 /* empty type: EINVAL */
    {"request_key", SYS_request_key, {P(""), P("")}, NULL},
    {"userfaultfd", SYS_userfaultfd, {-1}, NULL}, /* invalid flags */
    {"fanotify_init", SYS_fanotify_init, {P(0xffffffffu)}, NULL}, /* invalid flags: EINVAL */
    {"fanotify_mark", SYS_fanotify_mark, {-1}, NULL},
    {"open_by_handle_at", SYS_open_by_handle_at, {-1}, NULL},
    {"name_to_handle_at", SYS_name_to_handle_at, {-1, P("")}, NULL},
    {"setns", SYS_setns, {-1}, NULL},
    {"unshare", SYS_unshare, {0}, NULL},                                    /* a no-op */
    {"ptrace", SYS_ptrace, {PTRACE_ATTACH, 0}, NULL},                       /* pid 0: ESRCH */
    {"process_vm_readv", SYS_process_vm_readv, {0, 0, 0, 0, 0, 1}, NULL},   /* flags */
    {"process_vm_writev", SYS_process_vm_writev, {0, 0, 0, 0, 0, 1}, NULL}, /* flags */
    {"io_uring_setup", SYS_io_uring_setup, {1, 0}, NULL}, /* NULL params: EFAULT */
    {"io_uring_enter", SYS_io_uring_enter, {-1}, NULL},
    {"io_uring_register", SYS_io_uring_register, {-1}, NULL},
    {"clock_settime", SYS_clock_settime, {CLOCK_MONOTONIC, P(&zero_time)}, NULL}, /* not settable */
    {"clock_adjtime", SYS_clock_adjtime, {CLOCK_MONOTONIC, 0}, NULL},
    {"settimeofday", SYS_settimeofday, {P(&bad_time), 0}, NULL},
    {"adjtimex", SYS_adjtimex, {0}, NULL}, /* NULL: EFAULT */
    {"acct", SYS_acct, {P("")}, NULL},
    {"quotactl", SYS_quotactl, {0, 0}, NULL}, /* no device: ENODEV */
    {"quotactl_fd", SYS_quotactl_fd, {-1}, NULL},
    {"lookup_dcookie", SYS_lookup_dcookie, {0, 0, 0}, NULL},
    {"syslog", SYS_syslog, {10 /* SYSLOG_ACTION_SIZE_BUFFER */}, NULL},
    {"vhangup", SYS_vhangup, {0}, NULL}, /* after setsid: no terminal */
#ifdef SYS_nfsservctl
    {"nfsservctl", SYS_nfsservctl, {0}, NULL},
#endif
    {"personality", SYS_personality, {ADDR_NO_RANDOMIZE}, NULL},
    {"personality_query", SYS_personality, {P(0xffffffffu)}, NULL},
    {"personality_linux32", SYS_personality, {PER_LINUX32}, NULL},
    {"clone_plain", SYS_clone, {SIGCHLD}, NULL}, /* a fork */
    {"clone_newuser", SYS_clone, {CLONE_BAD(CLONE_NEWUSER)}, NULL},
    {"clone_newns", SYS_clone, {CLONE_BAD(CLONE_NEWNS)}, NULL},
    {"clone_newpid", SYS_clone, {CLONE_BAD(CLONE_NEWPID)}, NULL},
    {"clone_newnet", SYS_clone, {CLONE_BAD(CLONE_NEWNET)}, NULL},
    {"clone_newipc", SYS_clone, {CLONE_BAD(CLONE_NEWIPC)}, NULL},
    {"clone_newuts", SYS_clone, {CLONE_BAD(CLONE_NEWUTS)}, NULL},
    {"clone_newcgroup", SYS_clone, {CLONE_BAD(CLONE_NEWCGROUP)}, NULL},
    {"clone3", SYS_clone3, {0, 0}, NULL}, /* size 0: EINVAL */
    /* Always on fd -1, so nothing is ever typed anywhere: EBADF. */
    {"tiocsti", SYS_ioctl, {-1, TIOCSTI, P("x")}, NULL},
    {"tiocsti_highbits", SYS_ioctl, {-1, P(TIOCSTI | (1UL << 32)), P("x")}, NULL},
    {"tioclinux", SYS_ioctl, {-1, TIOCLINUX, P("x")}, NULL},
    {"ioctl_tcgets", SYS_ioctl, {-1, TCGETS, 0}, NULL},
    /* On the session directory (fd 3 is opened on "." by main): no name
     * is given, so even without the filter nothing would be made (EINVAL
     * or, off btrfs, ENOTTY). */
    {"btrfs_subvol_create", SYS_ioctl, {3, P(BTRFS_IOC_SUBVOL_CREATE_V2), P(&empty_vol_args)}, NULL},
    {"btrfs_snap_create", SYS_ioctl, {3, P(BTRFS_IOC_SNAP_CREATE_V2), P(&empty_vol_args)}, NULL},
#ifdef __x86_64__
    {"int80", 0, {0}, int80_getpid},
    {"x32", 0x40000000 /* __X32_SYSCALL_BIT */ | SYS_getpid, {0}, NULL},
#endif
};

/* Runs one probe in a child; returns its wait status. The child exits
 * with 0 for success or the errno. */
static int attempt(const probe *p)
{
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core); /* a SIGSYS kill would dump core */
        setsid();                         /* no terminal for vhangup to hang up */
        pid_t self = getpid();
        errno = 0;
        long ret = p->run ? p->run()
                          : syscall(p->nr, p->arg[0], p->arg[1], p->arg[2], p->arg[3], p->arg[4],
                                    p->arg[5]);
        if (getpid() != self)
            _exit(0); /* the child of a clone that succeeded */
        _exit(ret < 0 ? errno : 0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

int main(int argc, char **argv)
{
    int rc = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (here >= 0 && here != 3) {
        dup2(here, 3);
        close(here);
    }
    for (int i = 1; i < argc; i++) {
        const probe *p = NULL;
        for (size_t j = 0; j < sizeof probes / sizeof probes[0] && !p; j++)
            if (strcmp(probes[j].name, argv[i]) == 0)
                p = &probes[j];
        if (!p) {
            fprintf(stderr, "try-syscall: unknown name %s\n", argv[i]);
            rc = 2;
            continue;
        }
        int status = attempt(p);
        if (status == -1)
            printf("%s FAILED-TO-RUN\n", p->name);
        else if (WIFSIGNALED(status))
            printf("%s SIG%s\n", p->name, sigabbrev_np(WTERMSIG(status)));
        else if (WEXITSTATUS(status) == 0)
            printf("%s OK\n", p->name);
        else
            printf("%s %s\n", p->name, strerrorname_np(WEXITSTATUS(status)));
    }
    return rc;
}
