/* Network namespaces and the user-mode network helper. */
#include "sandbox/net.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "runbox.h"
#include "sandbox/net_addresses.h"

#include <arpa/inet.h>
#include <linux/if_tun.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdlib.h>

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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* runbox-net, beside the runbox program that runs (build/ or the
 * directory it was installed to, as runbox-serve is). */
static char helper_path[4096];
static pthread_once_t helper_path_once = PTHREAD_ONCE_INIT;

static void find_helper(void)
{
    rbx_program_beside(RBX_NET_HELPER, helper_path, sizeof helper_path);
}

const char *rbx_net_helper_path(void)
{
    pthread_once(&helper_path_once, find_helper);
    return helper_path;
}

/* runbox makes the tap from its own thread in the sandbox's network
 * namespace (tap_of), which setns(2) allows only with CAP_SYS_ADMIN in
 * runbox's own user namespace: as root. Without it executions run with
 * loopback only, as where the tun device is closed (some hosts make it
 * 0600). Asked once per process: it is on the way to every execution. */
static bool helper_available;
static pthread_once_t helper_available_once = PTHREAD_ONCE_INIT;

static void check_helper(void)
{
    const char *path = rbx_net_helper_path();
    helper_available = geteuid() == 0 && *path && access(path, X_OK) == 0 &&
                       access("/dev/net/tun", R_OK | W_OK) == 0;
}

bool rbx_net_helper_available(void)
{
    pthread_once(&helper_available_once, check_helper);
    return helper_available;
}

static int set_address(int sock, unsigned long request, const char *name, const char *address)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    struct sockaddr_in *in = (struct sockaddr_in *)&ifr.ifr_addr;
    in->sin_family = AF_INET;
    if (inet_pton(AF_INET, address, &in->sin_addr) != 1) {
        errno = EINVAL;
        return -1;
    }
    return ioctl(sock, request, &ifr);
}

/* In the sandbox's network namespace (the calling thread is in it): tap0,
 * configured as slirp4netns --configure did (address, netmask, MTU, up, a
 * default route through the gateway). Returns the tap's fd, or -1 with
 * errno and *step. */
static int make_tap(const char **step)
{
    *step = "open /dev/net/tun";
    int tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    int sock = -1;
    if (tap < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", RBX_NET_TAP);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    *step = "make the tap device";
    if (ioctl(tap, TUNSETIFF, &ifr) != 0)
        goto fail;
    /* Persistent: closing the last descriptor of a tap that is not
     * unregisters it on the spot, an RCU grace period and more (about 20 ms
     * here) on the way to every network-on result, since runbox holds the
     * only descriptor of a tap that never woke runbox-net. Persistent, it
     * goes with the sandbox's network namespace, in the kernel's own
     * clean-up of the namespace after the sandbox's last process (a tap is
     * deleted there, never moved to the host's namespace). */
    *step = "keep the tap device with its namespace";
    if (ioctl(tap, TUNSETPERSIST, 1) != 0)
        goto fail;
    /* No IPv6 on the tap (it is not routed out): the kernel's router
     * solicitations and address checks would be frames at once, and wake
     * runbox-net for every sandbox (net_wake.c). Absent where the host has
     * no IPv6. */
    int v6 = open("/proc/sys/net/ipv6/conf/" RBX_NET_TAP "/disable_ipv6", O_WRONLY | O_CLOEXEC);
    if (v6 >= 0) {
        (void)!write(v6, "1", 1);
        close(v6);
    }
    *step = "configure the tap device";
    sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        goto fail;
    ifr.ifr_mtu = RBX_NET_MTU;
    if (ioctl(sock, SIOCSIFMTU, &ifr) != 0 ||
        set_address(sock, SIOCSIFADDR, RBX_NET_TAP, RBX_NET_ADDRESS) != 0 ||
        set_address(sock, SIOCSIFNETMASK, RBX_NET_TAP, RBX_NET_NETMASK) != 0 ||
        ioctl(sock, SIOCGIFFLAGS, &ifr) != 0)
        goto fail;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0)
        goto fail;
    *step = "route through the tap device";
    struct rtentry route;
    memset(&route, 0, sizeof route);
    struct sockaddr_in *dst = (struct sockaddr_in *)&route.rt_dst;
    struct sockaddr_in *gateway = (struct sockaddr_in *)&route.rt_gateway;
    struct sockaddr_in *mask = (struct sockaddr_in *)&route.rt_genmask;
    dst->sin_family = gateway->sin_family = mask->sin_family = AF_INET;
    inet_pton(AF_INET, RBX_NET_GATEWAY, &gateway->sin_addr);
    route.rt_flags = RTF_UP | RTF_GATEWAY;
    route.rt_dev = (char *)RBX_NET_TAP;
    if (ioctl(sock, SIOCADDRT, &route) != 0)
        goto fail;
    close(sock);
    return tap;
fail:;
    int error = errno;
    if (sock >= 0)
        close(sock);
    close(tap);
    errno = error;
    return -1;
}

/* The host's network namespace, where runbox's threads live: opened once,
 * by the first thread to make a tap, before any thread has entered a
 * sandbox's (the others wait on the once). */
static int home_ns = -1;
static int home_ns_error;
static pthread_once_t home_ns_once = PTHREAD_ONCE_INIT;

static void open_home_ns(void)
{
    home_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    home_ns_error = home_ns < 0 ? errno : 0;
}

/* The tap is made from here, by the thread that started the sandbox, in
 * the sandbox's network namespace for the while: init and the program
 * never wait for a helper to configure their interface, and the program
 * never holds the tun device. The thread's own namespace comes back
 * before anything else is done: runbox-net must be started from the
 * host's, where its sockets lead out. */
int rbx_net_in_sandbox(int sandbox_pidfd, int (*work)(void *arg), void *arg)
{
    pthread_once(&home_ns_once, open_home_ns);
    if (home_ns < 0) {
        errno = home_ns_error;
        return -1;
    }
    if (setns(sandbox_pidfd, CLONE_NEWNET) != 0)
        return -1;
    int rc = work(arg);
    int error = errno;
    if (setns(home_ns, CLONE_NEWNET) != 0) {
        /* Going on would start helpers, and open sockets, in a sandbox's
         * network: never. */
        fprintf(stderr, "runbox: cannot return to the host's network namespace: %s\n",
                strerror(errno));
        abort();
    }
    errno = error;
    return rc;
}

static int make_tap_work(void *step)
{
    return make_tap((const char **)step);
}

static int tap_of(int sandbox_pidfd, const char **step)
{
    *step = "enter the sandbox's network namespace";
    return rbx_net_in_sandbox(sandbox_pidfd, make_tap_work, step);
}

int rbx_net_tap(int sandbox_pidfd, rbx_error *err)
{
    if (!rbx_net_helper_available()) {
        rbx_fail(err, RBX_EINVAL,
                 "the network is not available here: it needs %s (built beside runbox by `make "
                 "build`), libslirp0 and access to /dev/net/tun; run with --no-network (see "
                 "runbox check)",
                 *rbx_net_helper_path() ? rbx_net_helper_path() : RBX_NET_HELPER);
        return -1;
    }
    const char *step;
    int tap = tap_of(sandbox_pidfd, &step);
    if (tap < 0)
        rbx_fail(err, RBX_ESYSTEM, "cannot connect the sandbox's network: %s: %s", step,
                 strerror(errno));
    return tap;
}

/* In the sandbox's network namespace: tap0 attached again, no longer
 * persistent, and closed: the kernel unregisters it. */
static int remove_tap(void *unused)
{
    (void)unused;
    int rc = -1, tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", RBX_NET_TAP);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    if (tap >= 0 && ioctl(tap, TUNSETIFF, &ifr) == 0 && ioctl(tap, TUNSETPERSIST, 0) == 0)
        rc = 0;
    int error = errno;
    if (tap >= 0)
        close(tap);
    errno = error;
    return rc;
}

int rbx_net_tap_remove(int sandbox_pidfd)
{
    return rbx_net_in_sandbox(sandbox_pidfd, remove_tap, NULL);
}

int rbx_net_relay_spawn(int tap, pid_t *pid, int *exit_fd)
{
    int quit[2] = {-1, -1};
    if (pipe2(quit, O_CLOEXEC) != 0)
        return errno;
    char *argv[] = {RBX_NET_HELPER, NULL};
    char *envp[] = {NULL};
    int pass[] = {tap, quit[0]}; /* fd 3 the tap, fd 4 the stop pipe */
    /* runbox-net makes a mount namespace of its own and makes every mount
     * in it private before it pivots into an empty root and detaches the
     * old one: nothing it unmounts reaches the host's mounts (slirp4netns
     * --enable-sandbox, started from the host's namespace, detached the
     * peers of the host's shared mounts: an `ip netns` mount under
     * /run/netns vanished with every network-on execution; a test plants a
     * shared canary mount). */
    int rc = rbx_spawn_helper(rbx_net_helper_path(), argv, envp, pass, 2, pid);
    close(quit[0]);
    if (rc != 0) {
        close(quit[1]);
        return rc;
    }
    *exit_fd = quit[1];
    return 0;
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

void rbx_net_relay_stop(pid_t pid, int exit_fd)
{
    if (exit_fd >= 0)
        close(exit_fd);
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    reap_pending();
    pthread_mutex_lock(&pending_lock);
    bool queued = pending_count < PENDING_MAX;
    if (queued)
        pending[pending_count++] = pid;
    pthread_mutex_unlock(&pending_lock);
    if (!queued)
        waitpid(pid, NULL, 0);
}
