/* The host's own addresses, which every egress plan refuses (policy.h).
 *
 * Listing them is a netlink dump of every interface: 52 us here with two,
 * 4.8 ms in a network namespace with 600 (a node whose containers each
 * have a veth), on the way to every network-on execution. They change
 * rarely, so the list is kept, with a route socket subscribed to address
 * changes, opened before the first listing. The kernel queues its message
 * before the change's own call returns: a plan made while one waits lists
 * the addresses afresh, so a plan made after an address was added lists
 * it. The resolver's thread (dns.c) reads the messages, adds what they
 * say the host gained to the list (it lists again when messages were lost,
 * the queue having overflowed, and for removals) and to the rules of every
 * sandbox that lives on: a prepared sandbox, a kernel or an E2B sandbox
 * made before the change refuses it as well.
 *
 * A plan gets only the addresses its policy would otherwise admit
 * (rbx_egress_host_matters): a node's containers, bridges and links hold
 * private and link-local addresses, which the policy refuses anyway, and
 * every address given costs each sandbox's rules an element (at 600
 * interfaces, 1,800 of them made the CPU of a network-on execution 3.6 x
 * that at 3). The selection is kept with the list, for the policy it was
 * made for. */
#include "egress/policy.h"
#include "base/error.h"

#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int watch = -2; /* -2: not opened yet; -1: cannot watch, list every time */
static rbx_cidr *kept;
static size_t kept_count;
static bool kept_valid;
static uint64_t kept_generation; /* grows when kept changes */
static rbx_cidr *selected; /* kept, narrowed to what matters to selected_for */
static size_t selected_count;
static rbx_egress_host_keep selected_by;
static const void *selected_for;
static uint64_t selected_generation;

static void open_watch(void)
{
    watch = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    if (watch < 0)
        return;
    struct sockaddr_nl self = {.nl_family = AF_NETLINK,
                               .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR};
    if (bind(watch, (struct sockaddr *)&self, sizeof self) != 0) {
        close(watch);
        watch = -1;
    }
}

/* Under lock: whether a message of the kernel waits (without reading it). */
static bool change_waits(void)
{
    struct pollfd p = {.fd = watch, .events = POLLIN};
    return poll(&p, 1, 0) != 0;
}

/* What reading the kernel's messages found. */
typedef enum {
    CHANGES_NONE,
    CHANGES_APPLIED, /* addresses added to kept: its generation grew */
    CHANGES_RELIST,  /* messages were lost, or kept is not valid: list again */
} changes;

/* Removals are applied by listing again, at most once a second: an address
 * can be on two interfaces, and one of them going must not take it out of
 * the list. Until then the address stays refused, which is only stricter. */
#define RELIST_REMOVALS_MS 1000
static bool removals_wait;
static int64_t listed_ms;

static void add_kept(const rbx_cidr *cidr)
{
    for (size_t i = 0; i < kept_count; i++)
        if (kept[i].family == cidr->family && kept[i].prefix == cidr->prefix &&
            !memcmp(kept[i].addr, cidr->addr, sizeof cidr->addr))
            return; /* an update of one it has (its flags: duplicate detection done) */
    rbx_cidr *grown = realloc(kept, (kept_count + 1) * sizeof *kept);
    if (!grown) {
        kept_valid = false; /* listed again for the next plan */
        return;
    }
    kept = grown;
    kept[kept_count++] = *cidr;
    kept_generation++;
}

/* The entries of one address (an IPv4 one has its NAT64 form too): 0, 1 or
 * 2 of them. */
static size_t entries_of(int family, const void *addr, rbx_cidr out[2])
{
    if (family == AF_INET6) {
        out[0] = (rbx_cidr){.family = AF_INET6, .prefix = 128};
        memcpy(out[0].addr, addr, 16);
        return 1;
    }
    if (family != AF_INET)
        return 0;
    /* And its NAT64 form, as the default ranges have theirs. */
    out[0] = (rbx_cidr){.family = AF_INET, .prefix = 32};
    memcpy(out[0].addr, addr, 4);
    out[1] = (rbx_cidr){.family = AF_INET6, .addr = {0, 0x64, 0xff, 0x9b}, .prefix = 128};
    memcpy(out[1].addr + 12, addr, 4);
    return 2;
}

/* Under lock: one message of the kernel applied to kept. */
static void apply_change(struct nlmsghdr *h)
{
    if (h->nlmsg_type == RTM_DELADDR) {
        removals_wait = true;
        return;
    }
    if (h->nlmsg_type != RTM_NEWADDR || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifaddrmsg)))
        return;
    struct ifaddrmsg *ifa = NLMSG_DATA(h);
    const void *address = NULL, *local = NULL;
    int len = (int)IFA_PAYLOAD(h);
    size_t size = ifa->ifa_family == AF_INET ? 4 : 16;
    for (struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (RTA_PAYLOAD(a) != size)
            continue;
        if (a->rta_type == IFA_ADDRESS)
            address = RTA_DATA(a);
        else if (a->rta_type == IFA_LOCAL)
            local = RTA_DATA(a);
    }
    /* As getifaddrs reads them: an IPv4 address is IFA_LOCAL (IFA_ADDRESS
     * is the peer's on a point-to-point link). */
    const void *addr = ifa->ifa_family == AF_INET && local ? local : address;
    rbx_cidr entries[2];
    size_t n = addr ? entries_of(ifa->ifa_family, addr, entries) : 0;
    for (size_t i = 0; i < n; i++)
        add_kept(&entries[i]);
}

/* Under lock: reads the waiting messages and applies what they say to kept
 * (an added address costs a look through the list, not a listing of every
 * interface: a node's containers come and go). */
static changes read_changes(void)
{
    uint64_t before = kept_generation;
    bool lost = false;
    /* The size the kernel's messages are read with, aligned for their headers. */
    union {
        struct nlmsghdr header;
        char bytes[8192];
    } buf;
    for (;;) {
        ssize_t n = recv(watch, buf.bytes, sizeof buf.bytes, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == ENOBUFS) {
            lost = true; /* the queue overflowed: what was lost is unknown */
            continue;
        }
        if (n <= 0)
            break;
        size_t left = (size_t)n;
        for (struct nlmsghdr *h = &buf.header; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left))
            if (!lost && kept_valid)
                apply_change(h);
    }
    if (lost || !kept_valid ||
        (removals_wait && rbx_now_ms() - listed_ms >= RELIST_REMOVALS_MS))
        return CHANGES_RELIST;
    return kept_generation != before ? CHANGES_APPLIED : CHANGES_NONE;
}

/* The host's addresses, listed now, into *out (malloc'ed). */
static rbx_status list_now(rbx_cidr **out, size_t *out_count, rbx_error *err)
{
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot list the host's addresses: %s", strerror(errno));
    size_t count = 0;
    for (struct ifaddrs *i = all; i; i = i->ifa_next)
        if (i->ifa_addr &&
            (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
            count += i->ifa_addr->sa_family == AF_INET ? 2 : 1; /* an IPv4 one has a NAT64 form */
    rbx_cidr *cidrs = calloc(count ? count : 1, sizeof *cidrs);
    if (!cidrs) {
        freeifaddrs(all);
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    }
    size_t n = 0;
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        const void *addr = i->ifa_addr->sa_family == AF_INET
                               ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                               : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        n += entries_of(i->ifa_addr->sa_family, addr, cidrs + n);
    }
    freeifaddrs(all);
    *out = cidrs;
    *out_count = n;
    return RBX_OK;
}

/* Under lock: kept listed again; its generation grows if it changed. */
static rbx_status keep_again(rbx_error *err)
{
    rbx_cidr *cidrs;
    size_t count;
    rbx_status status = list_now(&cidrs, &count, err);
    if (status != RBX_OK) {
        kept_valid = false;
        return status;
    }
    if (!kept_valid || count != kept_count || memcmp(cidrs, kept, count * sizeof *cidrs) != 0)
        kept_generation++;
    free(kept);
    kept = cidrs;
    kept_count = count;
    kept_valid = true;
    removals_wait = false;
    listed_ms = rbx_now_ms();
    return RBX_OK;
}

static rbx_status copy_cidrs(rbx_egress_list *list, const rbx_cidr *cidrs, size_t count,
                             rbx_error *err)
{
    list->cidrs = malloc((count ? count : 1) * sizeof *list->cidrs);
    if (!list->cidrs)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    memcpy(list->cidrs, cidrs, count * sizeof *cidrs);
    list->cidr_count = count;
    return RBX_OK;
}

static rbx_status copy_kept(rbx_egress_list *list, rbx_error *err)
{
    return copy_cidrs(list, kept, kept_count, err);
}

rbx_status rbx_egress_host_select_by(rbx_egress_host_keep keep, const void *policy,
                                     const rbx_cidr *all, size_t count, rbx_egress_list *out,
                                     rbx_error *err)
{
    out->cidrs = malloc((count ? count : 1) * sizeof *out->cidrs);
    if (!out->cidrs)
        return rbx_fail(err, RBX_ESYSTEM, "out of memory");
    out->cidr_count = 0;
    for (size_t i = 0; i < count; i++)
        if (keep(policy, all[i].family, all[i].addr))
            out->cidrs[out->cidr_count++] = all[i];
    return RBX_OK;
}

/* Under lock: the kept list's selection for policy, made again only when
 * the list or the policy changed. */
static rbx_status copy_selected(rbx_egress_host_keep keep, const void *policy,
                                rbx_egress_list *list, rbx_error *err)
{
    if (!selected || selected_by != keep || selected_for != policy ||
        selected_generation != kept_generation) {
        rbx_egress_list mine = {0};
        rbx_status status = rbx_egress_host_select_by(keep, policy, kept, kept_count, &mine, err);
        if (status != RBX_OK)
            return status;
        free(selected);
        selected = mine.cidrs;
        selected_count = mine.cidr_count;
        selected_by = keep;
        selected_for = policy;
        selected_generation = kept_generation;
    }
    return copy_cidrs(list, selected, selected_count, err);
}

rbx_status rbx_egress_host_addresses(rbx_egress_host_keep keep, const void *policy,
                                     rbx_egress_list *list, uint64_t *generation, rbx_error *err)
{
    pthread_mutex_lock(&lock);
    rbx_status status = RBX_OK;
    if (watch == -2)
        open_watch();
    if (watch < 0 || !kept_valid) {
        status = keep_again(err);
        if (status == RBX_OK)
            status = copy_selected(keep, policy, list, err);
    } else if (change_waits()) {
        /* Listed afresh for this plan; the message is the resolver's to
         * read, and its sandbox gets what changed with every other. */
        rbx_cidr *all = NULL;
        size_t count = 0;
        status = list_now(&all, &count, err);
        if (status == RBX_OK)
            status = rbx_egress_host_select_by(keep, policy, all, count, list, err);
        free(all);
    } else {
        status = copy_selected(keep, policy, list, err);
    }
    *generation = kept_generation;
    pthread_mutex_unlock(&lock);
    return status;
}

int rbx_egress_host_watch(void)
{
    pthread_mutex_lock(&lock);
    int fd = watch;
    pthread_mutex_unlock(&lock);
    return fd;
}

bool rbx_egress_host_refresh(uint64_t known, rbx_egress_list *list, uint64_t *generation)
{
    pthread_mutex_lock(&lock);
    bool newer = false;
    rbx_error ignored;
    if (watch >= 0 && read_changes() == CHANGES_RELIST)
        (void)keep_again(&ignored);
    if (kept_valid && kept_generation > known && copy_kept(list, &ignored) == RBX_OK) {
        *generation = kept_generation;
        newer = true;
    }
    pthread_mutex_unlock(&lock);
    return newer;
}
