/* The host's own addresses, which every egress plan refuses (policy.h).
 *
 * Listing them is a netlink dump of every interface: 52 us here with two,
 * 4.8 ms in a network namespace with 600 (a node whose containers each
 * have a veth), on the way to every network-on execution. They change
 * rarely, so the list is kept, with a route socket subscribed to address
 * changes, opened before the first listing. The kernel queues its message
 * before the change's own call returns: a plan made while one waits lists
 * the addresses afresh, so a plan made after an address was added lists
 * it. The resolver's thread (dns.c) reads the messages, lists again (a
 * lost message, the queue having overflowed, too) and adds what the host
 * gained to the rules of every sandbox that lives on: a prepared sandbox,
 * a kernel or an E2B sandbox made before the change refuses it as well.
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
static const rbx_egress_policy *selected_for;
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

/* Under lock: reads the waiting messages; whether there were any (or some
 * were lost). */
static bool read_changes(void)
{
    bool seen = false;
    char buf[8192];
    for (;;) {
        ssize_t n = recv(watch, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0 || (n < 0 && errno == ENOBUFS))
            seen = true;
        else if (!(n < 0 && errno == EINTR))
            return seen;
    }
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
        rbx_cidr cidr = {.family = i->ifa_addr->sa_family};
        if (cidr.family == AF_INET) {
            memcpy(cidr.addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
            cidr.prefix = 32;
        } else {
            memcpy(cidr.addr, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
            cidr.prefix = 128;
        }
        cidrs[n++] = cidr;
        /* And its NAT64 form, as the default ranges have theirs. */
        if (cidr.family == AF_INET) {
            rbx_cidr nat64 = {.family = AF_INET6, .addr = {0, 0x64, 0xff, 0x9b}, .prefix = 128};
            memcpy(nat64.addr + 12, cidr.addr, 4);
            cidrs[n++] = nat64;
        }
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

/* Under lock: the kept list's selection for policy, made again only when
 * the list or the policy changed. */
static rbx_status copy_selected(const rbx_egress_policy *policy, rbx_egress_list *list,
                                rbx_error *err)
{
    if (!selected || selected_for != policy || selected_generation != kept_generation) {
        rbx_egress_list all = {.cidrs = kept, .cidr_count = kept_count}, mine = {0};
        if (rbx_egress_host_select(policy, &all, &mine) != 0)
            return rbx_fail(err, RBX_ESYSTEM, "out of memory");
        free(selected);
        selected = mine.cidrs;
        selected_count = mine.cidr_count;
        selected_for = policy;
        selected_generation = kept_generation;
    }
    return copy_cidrs(list, selected, selected_count, err);
}

rbx_status rbx_egress_host_addresses(const rbx_egress_policy *policy, rbx_egress_list *list,
                                     uint64_t *generation, rbx_error *err)
{
    pthread_mutex_lock(&lock);
    rbx_status status = RBX_OK;
    if (watch == -2)
        open_watch();
    if (watch < 0 || !kept_valid) {
        status = keep_again(err);
        if (status == RBX_OK)
            status = copy_selected(policy, list, err);
    } else if (change_waits()) {
        /* Listed afresh for this plan; the message is the resolver's to
         * read, and its sandbox gets what changed with every other. */
        rbx_egress_list all = {0};
        status = list_now(&all.cidrs, &all.cidr_count, err);
        if (status == RBX_OK && rbx_egress_host_select(policy, &all, list) != 0)
            status = rbx_fail(err, RBX_ESYSTEM, "out of memory");
        rbx_egress_list_free(&all);
    } else {
        status = copy_selected(policy, list, err);
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
    if (watch >= 0 && (read_changes() || !kept_valid))
        (void)keep_again(&ignored);
    if (kept_valid && kept_generation > known && copy_kept(list, &ignored) == RBX_OK) {
        *generation = kept_generation;
        newer = true;
    }
    pthread_mutex_unlock(&lock);
    return newer;
}
