/* runbox-net: the user-mode network of one sandbox (sandbox/net.h).
 *
 * The sandbox's init makes the tap device tap0 in the sandbox's network
 * namespace and configures it (address, route, MTU) itself; runbox hands
 * its descriptor here as fd 3, with fd 4 the read end of a pipe whose
 * closing says stop. This program relays the tap's frames through
 * libslirp, which turns the sandbox's TCP and UDP into the host's sockets:
 * a NAT without privileges, as slirp4netns does, but without slirp4netns's
 * start (its own netlink configuration, its readiness handshake): the
 * program in the sandbox never waits for this one, as frames sent before
 * it reads them wait in the tap's queue.
 *
 * It parses the sandbox's packets, so it confines itself before it reads
 * one: an empty root of its own, no user of the host's but nobody, no
 * capabilities, no new privileges, and a seccomp filter that refuses what
 * a relay of sockets never needs (running programs, mounts, namespaces,
 * signals to others, tracing, sockets other than IP). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <slirp/libslirp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "relay_seccomp_program.h"
#include "sandbox/net_addresses.h"

#define TAP_FD 3
#define QUIT_FD 4
#define NOBODY 65534
#define MAX_TIMERS 16
#define MAX_POLL 1024
#define FRAME_MAX (RBX_NET_MTU + 64)

typedef struct relay_timer {
    bool used, armed;
    SlirpTimerId id;
    void *cb_opaque;
    int64_t expire_ms;
} relay_timer;

typedef struct relay {
    Slirp *slirp;
    relay_timer timers[MAX_TIMERS];
    struct pollfd fds[MAX_POLL];
    nfds_t nfds;
} relay;

static void die(const char *what)
{
    fprintf(stderr, "runbox-net: %s: %s\n", what, strerror(errno));
    _exit(1);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A frame for the sandbox: dropped when the tap's queue is full, as a
 * network card would (TCP sends it again). */
static ssize_t send_packet(const void *buf, size_t len, void *opaque)
{
    (void)opaque;
    ssize_t n = write(TAP_FD, buf, len);
    return n < 0 && errno == EAGAIN ? (ssize_t)len : n;
}

static void guest_error(const char *msg, void *opaque)
{
    (void)opaque;
    (void)msg; /* the sandbox's own mistakes: nothing for the host's logs */
}

static int64_t clock_get_ns(void *opaque)
{
    (void)opaque;
    return now_ns();
}

static void *timer_new_opaque(SlirpTimerId id, void *cb_opaque, void *opaque)
{
    relay *r = opaque;
    for (size_t i = 0; i < MAX_TIMERS; i++)
        if (!r->timers[i].used) {
            r->timers[i] = (relay_timer){.used = true, .id = id, .cb_opaque = cb_opaque};
            return &r->timers[i];
        }
    return NULL;
}

static void timer_free(void *timer, void *opaque)
{
    (void)opaque;
    if (timer)
        ((relay_timer *)timer)->used = false;
}

static void timer_mod(void *timer, int64_t expire_ms, void *opaque)
{
    (void)opaque;
    if (!timer)
        return;
    ((relay_timer *)timer)->armed = true;
    ((relay_timer *)timer)->expire_ms = expire_ms;
}

static void poll_fd_noop(int fd, void *opaque)
{
    (void)fd;
    (void)opaque;
}

static void notify(void *opaque)
{
    (void)opaque;
}

/* libslirp's poll events and poll(2)'s, one for one. */
static const struct {
    int slirp;
    short poll;
} poll_events[] = {{SLIRP_POLL_IN, POLLIN},   {SLIRP_POLL_OUT, POLLOUT}, {SLIRP_POLL_PRI, POLLPRI},
                   {SLIRP_POLL_ERR, POLLERR}, {SLIRP_POLL_HUP, POLLHUP}};

static int add_poll(int fd, int events, void *opaque)
{
    relay *r = opaque;
    if (r->nfds >= MAX_POLL)
        return -1;
    short want = 0;
    for (size_t i = 0; i < sizeof poll_events / sizeof *poll_events; i++)
        if (events & poll_events[i].slirp)
            want |= poll_events[i].poll;
    r->fds[r->nfds] = (struct pollfd){.fd = fd, .events = want};
    return (int)r->nfds++;
}

static int get_revents(int idx, void *opaque)
{
    relay *r = opaque;
    if (idx < 0 || (nfds_t)idx >= r->nfds)
        return 0;
    int events = 0;
    for (size_t i = 0; i < sizeof poll_events / sizeof *poll_events; i++)
        if (r->fds[idx].revents & poll_events[i].poll)
            events |= poll_events[i].slirp;
    return events;
}

static Slirp *start_slirp(relay *r)
{
    static const SlirpCb callbacks = {
        .send_packet = send_packet,
        .guest_error = guest_error,
        .clock_get_ns = clock_get_ns,
        .timer_free = timer_free,
        .timer_mod = timer_mod,
        .register_poll_fd = poll_fd_noop,
        .unregister_poll_fd = poll_fd_noop,
        .notify = notify,
        .timer_new_opaque = timer_new_opaque,
    };
    SlirpConfig config = {
        .version = 4,
        .in_enabled = true,
        .if_mtu = RBX_NET_MTU,
        .if_mru = RBX_NET_MTU,
        /* 10.0.2.2 must not lead to the host's 127.0.0.1: runbox's own
         * API listens there. */
        .disable_host_loopback = true,
        /* Names are resolved by runbox's resolver on the sandbox's own
         * loopback, under the egress policy: none served here, and no
         * addresses handed out (runbox configured the interface). */
        .disable_dns = true,
        .disable_dhcp = true,
    };
    inet_pton(AF_INET, RBX_NET_NETWORK, &config.vnetwork);
    inet_pton(AF_INET, RBX_NET_NETMASK, &config.vnetmask);
    inet_pton(AF_INET, RBX_NET_GATEWAY, &config.vhost);
    return slirp_new(&config, &callbacks, r);
}

/* An empty root of its own: nothing of the host's files is reachable. */
static void enter_empty_root(void)
{
    int flags = CLONE_NEWNS | (geteuid() == 0 ? 0 : CLONE_NEWUSER);
    if (unshare(flags) != 0)
        die("unshare");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        die("make the mounts private");
    if (mount("runbox-net", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") !=
        0)
        die("mount the empty root");
    if (chdir("/tmp") != 0 || syscall(SYS_pivot_root, ".", ".") != 0 ||
        umount2(".", MNT_DETACH) != 0 || chdir("/") != 0)
        die("enter the empty root");
}

static void drop_privileges(void)
{
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
                           setresuid(NOBODY, NOBODY, NOBODY) != 0))
        die("become nobody");
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0)
        die("drop capabilities");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0) != 0)
        die("set no_new_privs");
}

/* net_relay_policy.c's filter, compiled when runbox-net was built. */
static void install_filter(void)
{
    struct sock_fprog program = {
        .len = sizeof rbx_relay_seccomp_program / sizeof rbx_relay_seccomp_program[0],
        .filter = (struct sock_filter *)rbx_relay_seccomp_program,
    };
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
        die("install the seccomp filter");
}

static void fire_timers(relay *r, int64_t now_ms)
{
    for (size_t i = 0; i < MAX_TIMERS; i++) {
        relay_timer *t = &r->timers[i];
        if (t->used && t->armed && t->expire_ms <= now_ms) {
            t->armed = false;
            slirp_handle_timer(r->slirp, t->id, t->cb_opaque);
        }
    }
}

static uint32_t until_next_timer(const relay *r, int64_t now_ms, uint32_t timeout)
{
    for (size_t i = 0; i < MAX_TIMERS; i++) {
        const relay_timer *t = &r->timers[i];
        if (t->used && t->armed) {
            int64_t wait = t->expire_ms > now_ms ? t->expire_ms - now_ms : 0;
            if ((uint64_t)wait < timeout)
                timeout = (uint32_t)wait;
        }
    }
    return timeout;
}

int main(void)
{
    /* Nothing but its two descriptors: whatever else runbox's own caller
     * left open without close-on-exec is not this program's to hold. */
    syscall(SYS_close_range, QUIT_FD + 1, ~0U, 0);
    signal(SIGPIPE, SIG_IGN);
    if (fcntl(TAP_FD, F_SETFL, O_NONBLOCK) != 0 || fcntl(QUIT_FD, F_GETFD) < 0)
        die("take the tap and the stop pipe (fds 3 and 4)");
    static relay r;
    r.slirp = start_slirp(&r);
    if (!r.slirp)
        die("start libslirp");
    enter_empty_root();
    drop_privileges();
    install_filter();
    static uint8_t frame[FRAME_MAX];
    for (;;) {
        r.nfds = 0;
        add_poll(TAP_FD, SLIRP_POLL_IN, &r);
        add_poll(QUIT_FD, SLIRP_POLL_IN, &r);
        uint32_t timeout = UINT32_MAX;
        slirp_pollfds_fill(r.slirp, &timeout, add_poll, &r);
        timeout = until_next_timer(&r, now_ns() / 1000000, timeout);
        int rc = poll(r.fds, r.nfds, timeout == UINT32_MAX ? -1 : (int)timeout);
        if (rc < 0 && errno != EINTR)
            die("poll");
        if (rc > 0 && r.fds[1].revents)
            return 0; /* runbox closed the pipe: the sandbox is gone */
        if (rc > 0 && (r.fds[0].revents & (POLLERR | POLLHUP)))
            return 0;
        if (rc > 0 && (r.fds[0].revents & POLLIN))
            for (int i = 0; i < 64; i++) {
                ssize_t n = read(TAP_FD, frame, sizeof frame);
                if (n <= 0)
                    break;
                slirp_input(r.slirp, frame, (int)n);
            }
        slirp_pollfds_poll(r.slirp, rc < 0, get_revents, &r);
        fire_timers(&r, now_ns() / 1000000);
    }
}
