/* Network namespaces and the user-mode network helper. */
#include "sandbox/net.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "runbox.h"
#include "sandbox/mount_ns.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define HELPER_READY_TIMEOUT_MS 5000

int rbx_net_loopback_up(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

bool rbx_net_helper_available(void)
{
    /* Rootless, slirp4netns needs the tun device; some hosts make it 0600. */
    return access(RBX_SLIRP4NETNS, X_OK) == 0 && access("/dev/net/tun", R_OK | W_OK) == 0;
}

/* slirp4netns --enable-sandbox makes a mount namespace of its own, pivots
 * into a small root and detaches the old one. Started by root, that
 * namespace is a copy of the host's in the same user namespace, so the
 * host's shared mounts stay shared, and detaching the old root unmounts
 * their peers on the host: every network-on execution removed the host's
 * `ip netns` mounts under /run/netns, for one. The helper starts instead
 * in a namespace of runbox's own, made once per process, where every
 * mount is a slave of the host's: what the host unmounts goes away here
 * too (nothing is pinned), what is unmounted here stays here. (Without
 * root the helper's namespace is in a user namespace of its own, where
 * the kernel makes shared mounts slaves anyway.) */
static int helper_ns = -1;
static int helper_ns_error;
static pthread_once_t helper_ns_once = PTHREAD_ONCE_INIT;

static void *make_helper_ns(void *unused)
{
    if (unshare(CLONE_FS | CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0 ||
        (helper_ns = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0)
        helper_ns_error = errno;
    return NULL;
}

static void start_helper_ns(void)
{
    pthread_t thread;
    if ((helper_ns_error = pthread_create(&thread, NULL, make_helper_ns, NULL)) == 0)
        pthread_join(thread, NULL);
}

static void close_pair(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

rbx_status rbx_net_helper_start(pid_t sandbox_pid, rbx_net_helper *helper, rbx_error *err)
{
    helper->pid = -1;
    helper->exit_fd = helper->ready_fd = -1;
    if (!rbx_net_helper_available())
        return rbx_fail(err, RBX_EINVAL,
                        "the network is not available here: it needs %s (apt-get install "
                        "slirp4netns) and access to /dev/net/tun; run with --no-network (see "
                        "runbox check)",
                        RBX_SLIRP4NETNS);
    int ready[2] = {-1, -1}, quit[2] = {-1, -1};
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(quit, O_CLOEXEC) != 0) {
        close_pair(ready);
        return rbx_fail(err, RBX_ESYSTEM, "cannot create pipes for the network: %s",
                        strerror(errno));
    }
    char pid_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", (int)sandbox_pid);
    /* --disable-host-loopback: 10.0.2.2 must not lead to the host's
     * 127.0.0.1. --enable-sandbox and --enable-seccomp confine the helper
     * itself, which parses the sandbox's packets. */
    char *argv[] = {"slirp4netns",
                    "--configure",
                    "--mtu=65520",
                    "--disable-host-loopback",
                    "--enable-sandbox",
                    "--enable-seccomp",
                    "--ready-fd=3",
                    "--exit-fd=4",
                    pid_text,
                    "tap0",
                    NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    int pass[] = {ready[1], quit[0]}; /* --ready-fd=3, --exit-fd=4 */
    pid_t pid;
    rbx_ns_switch ns = {0};
    int rc = 0;
    if (geteuid() == 0) {
        pthread_once(&helper_ns_once, start_helper_ns);
        if (helper_ns < 0)
            rc = helper_ns_error ? helper_ns_error : EINVAL;
        else if (rbx_mount_ns_enter(helper_ns, &ns) != 0)
            rc = errno;
    }
    if (rc == 0)
        rc = rbx_spawn_helper(RBX_SLIRP4NETNS, argv, envp, pass, 2, &pid);
    rbx_mount_ns_leave(&ns);
    close(ready[1]);
    close(quit[0]);
    if (rc != 0) {
        close(ready[0]);
        close(quit[1]);
        return rbx_fail(err, RBX_ESYSTEM, "cannot start %s: %s", RBX_SLIRP4NETNS, strerror(rc));
    }
    helper->pid = pid;
    helper->exit_fd = quit[1];
    helper->ready_fd = ready[0];
    return RBX_OK;
}

rbx_status rbx_net_helper_wait_ready(rbx_net_helper *helper, rbx_error *err)
{
    struct pollfd pfd = {.fd = helper->ready_fd, .events = POLLIN};
    char byte;
    int rc = poll(&pfd, 1, HELPER_READY_TIMEOUT_MS);
    bool ok = rc == 1 && read(helper->ready_fd, &byte, 1) == 1;
    close(helper->ready_fd);
    helper->ready_fd = -1;
    if (!ok) {
        rbx_net_helper_stop(helper);
        return rbx_fail(err, RBX_ESYSTEM, "the network helper %s did not come up%s",
                        RBX_SLIRP4NETNS, rc == 0 ? " in time" : "");
    }
    return RBX_OK;
}

/* A killed helper takes ~20 ms to finish exiting (the kernel tears its tap
 * device down): reaping it is left for later instead of making every
 * execution wait for it before its result is returned. */
#define PENDING_MAX 256
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t pending[PENDING_MAX];
static size_t pending_count;

static void reap_pending(void)
{
    pthread_mutex_lock(&pending_lock);
    for (size_t i = 0; i < pending_count;) {
        pid_t done = waitpid(pending[i], NULL, WNOHANG);
        if (done == pending[i] || (done < 0 && errno == ECHILD))
            pending[i] = pending[--pending_count];
        else
            i++;
    }
    pthread_mutex_unlock(&pending_lock);
}

void rbx_net_reap(void)
{
    reap_pending();
}

void rbx_net_helper_stop(rbx_net_helper *helper)
{
    if (helper->ready_fd >= 0)
        close(helper->ready_fd);
    if (helper->exit_fd >= 0)
        close(helper->exit_fd);
    helper->exit_fd = helper->ready_fd = -1;
    if (helper->pid <= 0)
        return;
    kill(helper->pid, SIGKILL);
    reap_pending();
    pthread_mutex_lock(&pending_lock);
    bool queued = pending_count < PENDING_MAX;
    if (queued)
        pending[pending_count++] = helper->pid;
    pthread_mutex_unlock(&pending_lock);
    if (!queued)
        waitpid(helper->pid, NULL, 0);
    helper->pid = -1;
}
