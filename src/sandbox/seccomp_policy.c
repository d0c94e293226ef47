/* The system-call policy, compiled at build time: this is a build tool
 * (runbox-seccomp-compile) that has libseccomp turn the rules below into a
 * BPF program for this machine's architecture and writes it out as a C
 * array, which seccomp.c installs. So no runbox process loads libseccomp
 * or compiles the policy (a third of a millisecond each time). It compiles
 * runbox-net's policy (net_relay_policy.c) the same way.
 *
 * The policy allows by default and denies, with EPERM, what untrusted code
 * has no business doing: the interpreters never need any of it. */

#include <errno.h>
#include <linux/btrfs.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/seccomp_policy.h"

/* Denied outright. Names this architecture lacks (umount, stime on x86_64)
 * are skipped. */
static const char *const denied[] = {
    "mount",             /* would reshape the filesystem the sandbox is confined to */
    "umount",            /* same */
    "umount2",           /* same */
    "pivot_root",        /* same: swaps the root filesystem itself */
    "fsopen",            /* the new mount API: same as mount */
    "fsconfig",          /* same */
    "fsmount",           /* same */
    "fspick",            /* same */
    "move_mount",        /* same */
    "open_tree",         /* same */
    "mount_setattr",     /* same */
    "swapon",            /* the host's memory configuration */
    "swapoff",           /* same */
    "reboot",            /* halts or restarts the machine (or the sandbox's PID namespace) */
    "kexec_load",        /* replaces the running kernel */
    "kexec_file_load",   /* same */
    "init_module",       /* loads code into the kernel */
    "finit_module",      /* same */
    "delete_module",     /* unloads code from the kernel */
    "bpf",               /* loads programs into the kernel: a large attack surface */
    "perf_event_open",   /* watches the kernel and other processes; often buggy */
    "keyctl",            /* the kernel keyrings are not namespaced */
    "add_key",           /* same */
    "request_key",       /* same */
    "userfaultfd",       /* stalls kernel page faults at will, a staple of kernel exploits */
    "fanotify_init",     /* watches whole filesystems; its groups count against a host user */
    "fanotify_mark",     /* the other half */
    "open_by_handle_at", /* opens files by handle, past the mount namespace ("shocker" escape) */
    "name_to_handle_at", /* the other half: hands out those handles */
    "setns",             /* joins another namespace */
    "unshare",           /* new namespaces: new kernel attack surface (user namespaces above all) */
    /* Denied entirely, even over the program's own children: the sandbox
     * has no use for a debugger (gdb, strace and the like will not work). */
    "ptrace",            /* reads and controls other processes */
    "process_vm_readv",  /* reads another process's memory */
    "process_vm_writev", /* writes another process's memory */
    "io_uring_setup",    /* runs operations this filter never sees; a prolific source of exploits */
    "io_uring_enter",    /* same */
    "io_uring_register", /* same */
    "clock_settime",     /* the clock is the host's: it is not namespaced */
    "clock_adjtime",     /* same */
    "settimeofday",      /* same */
    "adjtimex",          /* same */
    "stime",             /* same */
    "acct",              /* switches process accounting for the whole host */
    "quotactl",          /* manages the host's filesystem quotas */
    "quotactl_fd",       /* same */
    "lookup_dcookie",    /* a kernel profiling interface */
    "syslog",            /* reads or clears the kernel log, which leaks kernel addresses */
    "vhangup",           /* hangs up the terminal */
    "nfsservctl",        /* controls the kernel's NFS server (removed from Linux 3.1) */
};

/* clone's flags argument: the second on s390, the first elsewhere. */
#if defined(__s390__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

static struct sock_filter program[BPF_MAXINSNS];

static int fail(const char *what, int error)
{
    fprintf(stderr, "runbox-seccomp-compile: cannot %s: %s\n", what, strerror(error));
    return -1;
}

int rbx_policy_add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name,
                        unsigned int arg_cnt, const struct scmp_arg_cmp *args)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr < 0)
        return 0; /* no such system call here */
    int rc = seccomp_rule_add_array(ctx, action, nr, arg_cnt, args);
    if (rc < 0) {
        fprintf(stderr, "runbox-seccomp-compile: cannot add the rule for %s: %s\n", name,
                strerror(-rc));
        return -1;
    }
    return 0;
}

static int sandbox_rules(scmp_filter_ctx ctx)
{
    const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        if (rbx_policy_add_rule(ctx, deny, denied[i], 0, NULL) != 0)
            return -1;

    /* clone with any CLONE_NEW* flag: namespaces, like unshare. (A rule per
     * flag, since rules are or-ed.) CLONE_NEWTIME is clone3/unshare only;
     * in clone's flags that bit belongs to the exit signal. */
    static const uint64_t namespaces[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                          CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                          CLONE_NEWNET};
    for (size_t i = 0; i < sizeof namespaces / sizeof namespaces[0]; i++) {
        struct scmp_arg_cmp cmp =
            SCMP_CMP(CLONE_FLAGS_ARG, SCMP_CMP_MASKED_EQ, namespaces[i], namespaces[i]);
        if (rbx_policy_add_rule(ctx, deny, "clone", 1, &cmp) != 0)
            return -1;
    }
    /* clone3 passes its flags in memory, where a filter cannot look; ENOSYS
     * makes glibc fall back to clone, which the rules above inspect. */
    if (rbx_policy_add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL) != 0)
        return -1;

    /* TIOCSTI types into a terminal, TIOCLINUX can paste into a console:
     * both inject input into someone else's shell. The kernel reads the
     * request as 32 bits, so only those are compared, or setting a high bit
     * would slip past the rule (CVE-2019-10063). The same for btrfs's
     * subvolume ioctls below. */
    static const uint64_t requests[] = {
        TIOCSTI, TIOCLINUX,
        /* btrfs lets any user make subvolumes and snapshots where they may
         * write: a subvolume made inside a session's would hold files its
         * quota group does not count. */
        BTRFS_IOC_SUBVOL_CREATE, BTRFS_IOC_SUBVOL_CREATE_V2, BTRFS_IOC_SNAP_CREATE,
        BTRFS_IOC_SNAP_CREATE_V2};
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        struct scmp_arg_cmp cmp = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, requests[i]);
        if (rbx_policy_add_rule(ctx, deny, "ioctl", 1, &cmp) != 0)
            return -1;
    }

    /* personality: only 0 (PER_LINUX), 8 (PER_LINUX32) and 0xffffffff (a
     * query); other values turn off ASLR, make reads imply exec, map page
     * zero... A rule may compare an argument only once, so "none of the
     * three" becomes 32 masked patterns over the 32 bits the kernel reads,
     * each "bit s set, bit c clear" (so neither 0 nor 0xffffffff) with
     * s != 3 (so not 8): s = b, c = b + 1 mod 32 for every b but 3, and
     * s = 2, c = 4. Any other value matches one: it has a set bit b != 3
     * followed, cyclically, by a clear bit; or else its set bits are a
     * single run ending at bit 3, longer than bit 3 alone: bit 2 set, bit 4
     * clear. */
    for (unsigned int b = 0; b < 32; b++) {
        uint32_t set = b == 3 ? 1u << 2 : 1u << b;
        uint32_t clear = b == 3 ? 1u << 4 : 1u << ((b + 1) % 32);
        struct scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set);
        if (rbx_policy_add_rule(ctx, deny, "personality", 1, &cmp) != 0)
            return -1;
    }
    return 0;
}

/* libseccomp 2.5 exports only to a file descriptor
 * (seccomp_export_bpf_mem came in 2.6): export to a memfd, read it back.
 * Returns the number of instructions, or -1. */
static int export_program(scmp_filter_ctx ctx)
{
    int fd = memfd_create("runbox-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return fail("create a memfd", errno);
    int count = -1;
    struct stat st;
    int rc = seccomp_export_bpf(ctx, fd);
    if (rc < 0) {
        fail("export the filter", -rc);
    } else if (fstat(fd, &st) != 0) {
        fail("measure the filter", errno);
    } else if (st.st_size <= 0 || (size_t)st.st_size > sizeof program ||
               (size_t)st.st_size % sizeof program[0] != 0) {
        fprintf(stderr,
                "runbox-seccomp-compile: the exported filter has an unexpected size (%lld "
                "bytes)\n",
                (long long)st.st_size);
    } else {
        ssize_t n = pread(fd, program, (size_t)st.st_size, 0);
        if (n != st.st_size)
            fail("read the filter back", n < 0 ? errno : EIO);
        else
            count = (int)((size_t)n / sizeof program[0]);
    }
    close(fd);
    return count;
}

static int write_header(const char *path, const char *symbol, int count)
{
    FILE *out = fopen(path, "w");
    if (!out)
        return fail("create the header", errno);
    fprintf(out,
            "/* Generated by runbox-seccomp-compile (src/sandbox/seccomp_policy.c). */\n"
            "static const struct sock_filter %s[%d] = {\n",
            symbol, count);
    for (int i = 0; i < count; i++)
        fprintf(out, "    {0x%04x, %u, %u, 0x%08xu},\n", program[i].code, program[i].jt,
                program[i].jf, program[i].k);
    fprintf(out, "};\n");
    return fclose(out) == 0 ? 0 : fail("write the header", errno);
}

static const struct {
    const char *name, *symbol;
    int (*rules)(scmp_filter_ctx);
} policies[] = {
    {"sandbox", "rbx_seccomp_program", sandbox_rules},
    {"relay", "rbx_relay_seccomp_program", rbx_relay_policy_rules},
};

int main(int argc, char **argv)
{
    size_t which = sizeof policies / sizeof policies[0];
    for (size_t i = 0; argc == 3 && i < sizeof policies / sizeof policies[0]; i++)
        if (strcmp(argv[1], policies[i].name) == 0)
            which = i;
    if (which == sizeof policies / sizeof policies[0]) {
        fprintf(stderr, "usage: runbox-seccomp-compile sandbox|relay OUTPUT.h\n");
        return 2;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        fprintf(stderr, "runbox-seccomp-compile: cannot initialise libseccomp\n");
        return 1;
    }
    /* 32-bit x86 (int 0x80) and x32 calls would be matched against the
     * wrong numbers: kill them. libseccomp sends x32 numbers (bit
     * 0x40000000) on x86_64 to this action too. */
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    /* The rules as a binary tree of system call numbers rather than a list:
     * the kernel runs the filter once per number when a sandbox installs it
     * (its cache of the calls always allowed), so a list of ~180 tests cost
     * every sandbox's start 95 us and a tree 60 us (the same filter either
     * way; a call's own cost is the cache's). */
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    int count = rc < 0 ? fail("kill calls from foreign architectures, and a tree of rules", -rc)
                : policies[which].rules(ctx) == 0 ? export_program(ctx)
                                                  : -1;
    seccomp_release(ctx);
    return count > 0 && write_header(argv[2], policies[which].symbol, count) == 0 ? 0 : 1;
}
