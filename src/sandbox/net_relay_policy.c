/* runbox-net's system-call policy (net_relay.c), compiled at build time by
 * runbox-seccomp-compile like the sandbox's: the relay parses the
 * sandbox's packets with libslirp, so what a relay of IP sockets never
 * does is refused, and no wake-up of it pays for compiling a filter.
 * It runs as nobody with no capabilities in an empty root already; this is
 * the layer under those, for code execution inside libslirp. */
#include "sandbox/seccomp_policy.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <sys/socket.h>

/* Refused with EPERM. */
static const char *const refused[] = {
    /* another program, another process's memory or signals */
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "kill", "tkill",
    "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal",
    /* the filesystem's shape and the namespaces */
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_by_handle_at",
    "name_to_handle_at", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree",
    "mount_setattr",
    /* the kernel's larger surfaces, and the host's configuration */
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "personality", "iopl", "ioperm", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "memfd_create",
    /* its credentials and its own confinement, once set */
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "capset",
    "prctl", "seccomp", "socketpair",
};

int rbx_relay_policy_rules(scmp_filter_ctx ctx)
{
    const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (rbx_policy_add_rule(ctx, deny, refused[i], 0, NULL) != 0)
            return -1;
    /* clone only as fork or thread: never into new namespaces. clone3's
     * flags are in memory, out of a filter's sight: ENOSYS sends glibc to
     * clone, which these rules read. */
    static const uint64_t namespaces[] = {CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS,    CLONE_NEWPID,
                                          CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP};
    for (size_t i = 0; i < sizeof namespaces / sizeof namespaces[0]; i++) {
        struct scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, namespaces[i], namespaces[i]);
        if (rbx_policy_add_rule(ctx, deny, "clone", 1, &cmp) != 0)
            return -1;
    }
    if (rbx_policy_add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL) != 0)
        return -1;
    /* Sockets of IPv4 and IPv6 only: no unix socket can reach the host's
     * services (abstract ones are per network namespace, and this one is
     * the host's), no netlink, no packet sockets. */
    const uint32_t no_family = SCMP_ACT_ERRNO(EAFNOSUPPORT);
    for (int family = 0; family <= AF_MAX; family++) {
        struct scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family);
        if (family != AF_INET && family != AF_INET6 &&
            rbx_policy_add_rule(ctx, no_family, "socket", 1, &cmp) != 0)
            return -1;
    }
    struct scmp_arg_cmp above = SCMP_A0(SCMP_CMP_GT, (scmp_datum_t)AF_MAX);
    return rbx_policy_add_rule(ctx, no_family, "socket", 1, &above);
}
