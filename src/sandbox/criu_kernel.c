/* The kernel facilities a checkpoint needs beyond `criu check` (criu_kernel.h). */
#include "sandbox/criu_kernel.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Sends one dump request and reads the answer to its end: 0, or the
 * -errno the kernel answered with (an error message, or the errno a
 * dump's end carries when the dump itself failed as it started). */
static int ask(int protocol, const struct nlmsghdr *request)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    if (fd < 0)
        return -errno;
    struct timeval wait = {.tv_sec = 2};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) != 0 ||
        send(fd, request, request->nlmsg_len, 0) < 0) {
        int error = -errno;
        close(fd);
        return error;
    }
    int result = -EPROTO;
    char answer[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
    for (bool done = false; !done;) {
        ssize_t n = recv(fd, answer, sizeof answer, 0);
        if (n <= 0) {
            result = n < 0 ? -errno : -EPROTO;
            break;
        }
        int left = (int)n;
        for (struct nlmsghdr *h = (struct nlmsghdr *)answer; NLMSG_OK(h, left);
             h = NLMSG_NEXT(h, left)) {
            if (h->nlmsg_type == NLMSG_DONE) {
                int carried = 0;
                if (h->nlmsg_len >= NLMSG_LENGTH(sizeof carried))
                    memcpy(&carried, NLMSG_DATA(h), sizeof carried);
                result = carried;
                done = true;
                break;
            }
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(h);
                result = h->nlmsg_len >= NLMSG_LENGTH(sizeof *e) ? e->error : -EPROTO;
                done = true;
                break;
            }
        }
    }
    close(fd);
    return result;
}

/* A dump of no socket at all (no state asked for): answered at once by the
 * module that serves the family, or refused when none does. */
int rbx_criu_socket_diag(int family, int protocol)
{
    struct {
        struct nlmsghdr header;
        union {
            struct unix_diag_req unix_request;
            struct inet_diag_req_v2 inet_request;
        } body;
    } request = {.header = {.nlmsg_type = SOCK_DIAG_BY_FAMILY,
                            .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP}};
    if (family == AF_UNIX) {
        request.header.nlmsg_len = NLMSG_LENGTH(sizeof request.body.unix_request);
        request.body.unix_request.sdiag_family = AF_UNIX;
    } else {
        request.header.nlmsg_len = NLMSG_LENGTH(sizeof request.body.inet_request);
        request.body.inet_request.sdiag_family = (__u8)family;
        request.body.inet_request.sdiag_protocol = (__u8)protocol;
    }
    return ask(NETLINK_SOCK_DIAG, &request.header);
}

int rbx_criu_conntrack(void)
{
    struct {
        struct nlmsghdr header;
        struct nfgenmsg body;
    } request = {
        .header = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct nfgenmsg)),
                   .nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET_STATS_CPU,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
        .body = {.nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0},
    };
    return ask(NETLINK_NETFILTER, &request.header);
}

/* What criu's dump cannot do without (it only warns without netlink's and
 * packet's diagnostics), with the module that serves each. */
static const struct need {
    int family, protocol; /* a socket diagnostics; family 0: ctnetlink */
    const char *what, *module;
} needs[] = {
    {AF_UNIX, 0, "socket diagnostics of unix sockets", "unix_diag"},
    {AF_INET, IPPROTO_TCP, "socket diagnostics of TCP sockets", "tcp_diag"},
    {AF_INET, IPPROTO_UDP, "socket diagnostics of UDP sockets", "udp_diag"},
    {0, 0, "connection tracking over netlink", "nf_conntrack_netlink"},
};

bool rbx_criu_kernel_gap(char *why, size_t size)
{
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++) {
        const struct need *n = &needs[i];
        int r = n->family ? rbx_criu_socket_diag(n->family, n->protocol) : rbx_criu_conntrack();
        if (r != 0) {
            snprintf(why, size,
                     "this kernel gives no %s (%s), which a checkpoint reads: load the module "
                     "(modprobe %s)",
                     n->what, strerror(-r), n->module);
            return true;
        }
    }
    return false;
}
