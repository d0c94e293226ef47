/* The egress policy's nftables rules (egress_rules.h), built with libnftnl
 * and sent over a netlink socket of the sandbox's namespace. */
#include "egress/rules.h"
#include "base/error.h"
#include "base/nft_lib.h"
#include "egress/policy.h"
#include "kernels/wire.h"
#include "runbox.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define TABLE "runbox"
#define DENIED_SIZE 16     /* destinations remembered per call: the report names a few */
#define ADMITTED_SIZE 4096 /* addresses answered for allowed names, per sandbox */

/* Set ids: how rules of the same batch name the sets it creates; odd ids
 * are IPv4, even IPv6. DENIED: refused destinations, for the report.
 * NAMED: answers for names the operator allows. NARROW: answers for names
 * the request lists. DENY: ranges of the operator's deny list. REQUEST:
 * the request's egress_allow. ALLOW: the operator's allow list. DEFAULT:
 * ranges refused in the public default.
 * HOST: the host's own addresses, which grow while a sandbox lives when
 * the host gains one (rbx_egress_rules_deny_hosts), so a set that takes
 * elements, not a constant one of ranges. */
enum {
    SET_DENIED4 = 1,
    SET_DENIED6,
    SET_NAMED4,
    SET_NAMED6,
    SET_NARROW4,
    SET_NARROW6,
    SET_DENY4,
    SET_DENY6,
    SET_REQUEST4,
    SET_REQUEST6,
    SET_ALLOW4,
    SET_ALLOW6,
    SET_DEFAULT4,
    SET_DEFAULT6,
    SET_HOST4,
    SET_HOST6,
    SET_COUNT
};
static const char *const set_names[SET_COUNT] = {
    "",      "denied4",  "denied6",  "named4", "named6", "narrow4",  "narrow6", "deny4",
    "deny6", "request4", "request6", "allow4", "allow6", "default4", "default6", "host4",
    "host6"};

/* nft's datatypes, so that `nft list ruleset` shows the sets readably. */
#define TYPE_IPADDR 7
#define TYPE_IP6ADDR 8
#define TYPE_INET_SERVICE 13
#define CONCAT(a, b) (((a) << 6) | (b))

typedef struct batch {
    char *buf;
    size_t size;
    struct mnl_nlmsg_batch *b;
    uint32_t seq;
    struct nlmsghdr *last; /* the last message of the batch proper */
    bool overflow;
} batch;

static bool batch_open(batch *bt, size_t size)
{
    *bt = (batch){.size = size, .seq = 1};
    if (!(bt->buf = malloc(size)))
        return false;
    bt->b = rbx_nft->mnl_nlmsg_batch_start(bt->buf, size);
    rbx_nft->nftnl_batch_begin(rbx_nft->mnl_nlmsg_batch_current(bt->b), bt->seq++);
    rbx_nft->mnl_nlmsg_batch_next(bt->b);
    return true;
}

static struct nlmsghdr *batch_msg(batch *bt, uint16_t type, uint16_t flags)
{
    bt->last =
        rbx_nft->nftnl_nlmsg_build_hdr(rbx_nft->mnl_nlmsg_batch_current(bt->b), type, NFPROTO_INET,
                                   flags, bt->seq++);
    return bt->last;
}

static void batch_next(batch *bt)
{
    if (!rbx_nft->mnl_nlmsg_batch_next(bt->b))
        bt->overflow = true;
}

static void batch_close(batch *bt)
{
    if (bt->b)
        rbx_nft->mnl_nlmsg_batch_stop(bt->b);
    free(bt->buf);
    *bt = (batch){0};
}

/* Leftovers of an earlier exchange (the acks of a failed batch) must not
 * be read as the answer to the next one. */
static void drain(int fd)
{
    char buf[4096];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
}

/* Reads until the answer to seq ends: cb sees each data message. */
static int talk(int fd, uint32_t seq, mnl_cb_t cb, void *data)
{
    char buf[16384];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        int rc = rbx_nft->mnl_cb_run(buf, (size_t)n, seq, 0, cb, data);
        if (rc <= MNL_CB_STOP)
            return rc;
    }
}

/* Sends the batch, asking for one acknowledgement, of its last message:
 * the kernel applies a batch whole or not at all, and reports the error
 * of any message that failed. */
static bool batch_finish(batch *bt)
{
    if (bt->last)
        bt->last->nlmsg_flags |= NLM_F_ACK;
    rbx_nft->nftnl_batch_end(rbx_nft->mnl_nlmsg_batch_current(bt->b), bt->seq++);
    batch_next(bt);
    if (bt->overflow)
        errno = E2BIG;
    return !bt->overflow;
}

static int send_bytes(int fd, const void *bytes, size_t len)
{
    drain(fd);
    if (send(fd, bytes, len, 0) != (ssize_t)len)
        return -1;
    /* seq 0: the error of any message of the batch is the answer. */
    return talk(fd, 0, NULL, NULL) < 0 ? -1 : 0;
}

static int batch_send(int fd, batch *bt)
{
    if (!batch_finish(bt))
        return -1;
    size_t len = rbx_nft->mnl_nlmsg_batch_size(bt->b);
    if (send(fd, rbx_nft->mnl_nlmsg_batch_head(bt->b), len, 0) != (ssize_t)len)
        return -1;
    /* seq 0: the error of any message of the batch is the answer. */
    return talk(fd, 0, NULL, NULL) < 0 ? -1 : 0;
}

/* Expressions. */
static void add_meta(struct nftnl_rule *r, uint32_t key, uint32_t reg)
{
    struct nftnl_expr *e = rbx_nft->nftnl_expr_alloc("meta");
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, reg);
    rbx_nft->nftnl_rule_add_expr(r, e);
}

static void add_payload(struct nftnl_rule *r, uint32_t base, uint32_t offset, uint32_t len,
                        uint32_t reg)
{
    struct nftnl_expr *e = rbx_nft->nftnl_expr_alloc("payload");
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, reg);
    rbx_nft->nftnl_rule_add_expr(r, e);
}

static void add_cmp(struct nftnl_rule *r, uint32_t reg, const void *data, uint32_t len)
{
    struct nftnl_expr *e = rbx_nft->nftnl_expr_alloc("cmp");
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, reg);
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
    rbx_nft->nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
    rbx_nft->nftnl_rule_add_expr(r, e);
}

static void add_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
    struct nftnl_expr *e = rbx_nft->nftnl_expr_alloc("immediate");
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
    if (chain)
        rbx_nft->nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
    rbx_nft->nftnl_rule_add_expr(r, e);
}

static void add_family(struct nftnl_rule *r, int family)
{
    uint8_t proto = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
    add_meta(r, NFT_META_NFPROTO, NFT_REG32_00);
    add_cmp(r, NFT_REG32_00, &proto, 1);
}

static void add_l4proto(struct nftnl_rule *r, uint8_t proto)
{
    add_meta(r, NFT_META_L4PROTO, NFT_REG32_00);
    add_cmp(r, NFT_REG32_00, &proto, 1);
}

/* Loads the destination address into NFT_REG32_00 onwards. */
static void add_daddr(struct nftnl_rule *r, int family)
{
    if (family == AF_INET)
        add_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG32_00);
    else
        add_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, NFT_REG32_00);
}

static void add_lookup(struct nftnl_rule *r, int family, uint32_t set_id)
{
    add_family(r, family);
    add_daddr(r, family);
    struct nftnl_expr *e = rbx_nft->nftnl_expr_alloc("lookup");
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG32_00);
    rbx_nft->nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set_names[set_id]);
    rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
    rbx_nft->nftnl_rule_add_expr(r, e);
}

static struct nftnl_rule *rule_new(const char *chain)
{
    struct nftnl_rule *r = rbx_nft->nftnl_rule_alloc();
    rbx_nft->nftnl_rule_set_str(r, NFTNL_RULE_TABLE, TABLE);
    rbx_nft->nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
    rbx_nft->nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
    return r;
}

static void rule_put(batch *bt, struct nftnl_rule *r)
{
    struct nlmsghdr *h = batch_msg(bt, NFT_MSG_NEWRULE, NLM_F_APPEND | NLM_F_CREATE);
    rbx_nft->nftnl_rule_nlmsg_build_payload(h, r);
    rbx_nft->nftnl_rule_free(r);
    batch_next(bt);
}

static void put_lookup_rule(batch *bt, const char *chain, uint32_t set_id, int verdict,
                            const char *target)
{
    struct nftnl_rule *r = rule_new(chain);
    add_lookup(r, set_id % 2 ? AF_INET : AF_INET6, set_id);
    add_verdict(r, verdict, target);
    rule_put(bt, r);
}

/* Address ranges, [from, to) in network order; to_max: up to the last
 * address. */
typedef struct range {
    uint8_t from[16], to[16];
    bool to_max;
} range;

static size_t gather(range *out, size_t n, int family, const rbx_cidr *cidrs, size_t count)
{
    size_t len = family == AF_INET ? 4 : 16;
    for (size_t i = 0; i < count; i++) {
        const rbx_cidr *c = &cidrs[i];
        if (c->family != family)
            continue;
        range *r = &out[n++];
        memset(r, 0, sizeof *r);
        memcpy(r->from, c->addr, len);
        /* The last address, plus one. */
        uint8_t last[16];
        for (size_t b = 0; b < len; b++) {
            int keep = (int)c->prefix - (int)(b * 8);
            uint8_t host = keep <= 0 ? 0xff : keep >= 8 ? 0 : (uint8_t)(0xff >> keep);
            last[b] = c->addr[b] | host;
        }
        r->to_max = true;
        for (size_t b = len; b-- > 0;) {
            r->to[b] = (uint8_t)(last[b] + 1);
            if (last[b] != 0xff) {
                memcpy(r->to, last, b);
                r->to_max = false;
                break;
            }
        }
    }
    return n;
}

static size_t sort_len;

static int range_cmp(const void *a, const void *b)
{
    return memcmp(((const range *)a)->from, ((const range *)b)->from, sort_len);
}

/* Sorted, and overlapping or touching ranges merged: the kernel refuses
 * overlapping intervals, and two that touch would share a key. */
static size_t merge(range *ranges, size_t n, size_t len)
{
    sort_len = len;
    qsort(ranges, n, sizeof *ranges, range_cmp);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        range *last = kept ? &ranges[kept - 1] : NULL;
        if (last && (last->to_max || memcmp(ranges[i].from, last->to, len) <= 0)) {
            if (!last->to_max && (ranges[i].to_max || memcmp(ranges[i].to, last->to, len) > 0)) {
                memcpy(last->to, ranges[i].to, len);
                last->to_max = ranges[i].to_max;
            }
            continue;
        }
        ranges[kept++] = ranges[i];
    }
    return kept;
}

static void put_elem(struct nftnl_set *s, const uint8_t *key, size_t len, bool end)
{
    struct nftnl_set_elem *e = rbx_nft->nftnl_set_elem_alloc();
    rbx_nft->nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, (uint32_t)len);
    if (end)
        rbx_nft->nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
    rbx_nft->nftnl_set_elem_add(s, e);
}

/* An interval set of the ranges of family in the lists, and a rule that
 * looks destinations up in it; nothing when there are none. */
static void put_ranges(batch *bt, uint32_t id, const rbx_cidr *a, size_t a_count, const rbx_cidr *b,
                       size_t b_count, const char *chain, int verdict, const char *target)
{
    int family = id % 2 ? AF_INET : AF_INET6;
    size_t len = family == AF_INET ? 4 : 16;
    range *ranges = malloc((a_count + b_count + 1) * sizeof *ranges);
    if (!ranges) {
        bt->overflow = true;
        return;
    }
    size_t n = gather(ranges, 0, family, a, a_count);
    n = merge(ranges, gather(ranges, n, family, b, b_count), len);
    if (n == 0) {
        free(ranges);
        return;
    }
    struct nftnl_set *s = rbx_nft->nftnl_set_alloc();
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_TABLE, TABLE);
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_NAME, set_names[id]);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_ID, id);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, (uint32_t)len);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE,
                               family == AF_INET ? TYPE_IPADDR : TYPE_IP6ADDR);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL | NFT_SET_CONSTANT);
    rbx_nft->nftnl_set_nlmsg_build_payload(batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE), s);
    batch_next(bt);
    for (size_t i = 0; i < n; i++) {
        put_elem(s, ranges[i].from, len, false);
        if (!ranges[i].to_max)
            put_elem(s, ranges[i].to, len, true);
    }
    rbx_nft->nftnl_set_elems_nlmsg_build_payload(
        batch_msg(bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE), s);
    batch_next(bt);
    rbx_nft->nftnl_set_free(s);
    free(ranges);
    put_lookup_rule(bt, chain, id, verdict, target);
}

/* Both families' ranges of two lists. */
static void put_both(batch *bt, uint32_t id4, const rbx_egress_list *a, const rbx_egress_list *b,
                     const char *chain, int verdict, const char *target)
{
    for (uint32_t id = id4; id <= id4 + 1; id++)
        put_ranges(bt, id, a ? a->cidrs : NULL, a ? a->cidr_count : 0, b ? b->cidrs : NULL,
                   b ? b->cidr_count : 0, chain, verdict, target);
}

static void put_chain(batch *bt, const char *name, bool hook)
{
    struct nftnl_chain *c = rbx_nft->nftnl_chain_alloc();
    rbx_nft->nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, TABLE);
    rbx_nft->nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
    if (hook) {
        rbx_nft->nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
        rbx_nft->nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, 0);
        rbx_nft->nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter");
        rbx_nft->nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
    }
    struct nlmsghdr *h = batch_msg(bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
    rbx_nft->nftnl_chain_nlmsg_build_payload(h, c);
    rbx_nft->nftnl_chain_free(c);
    batch_next(bt);
}

static void put_set(batch *bt, uint32_t id)
{
    bool v4 = id % 2;
    bool denied = id == SET_DENIED4 || id == SET_DENIED6;
    struct nftnl_set *s = rbx_nft->nftnl_set_alloc();
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_TABLE, TABLE);
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_NAME, set_names[id]);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_ID, id);
    if (denied) { /* address . port, each padded to 4 bytes */
        rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, v4 ? 8 : 20);
        rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE,
                          CONCAT(v4 ? TYPE_IPADDR : TYPE_IP6ADDR, TYPE_INET_SERVICE));
        rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_EVAL);
        rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, DENIED_SIZE);
    } else {
        rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, v4 ? 4 : 16);
        rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, v4 ? TYPE_IPADDR : TYPE_IP6ADDR);
        /* The host's addresses are runbox's to add, never the program's:
         * their sets have no size. A size makes the kernel choose a hash
         * of fixed buckets, allocated and zeroed whole when the set is
         * made: 65,536 addresses meant 1 MiB for each family in every
         * network-on sandbox, half a millisecond of its start, and
         * 5 to 12 ms when the kernel had to compact memory for the
         * allocation. Without one it chooses a hash that grows with what
         * it holds. The admitted addresses come from answers the program
         * asks for: their size caps them (64 KiB each, only with names
         * in the policy). */
        if (id < SET_HOST4)
            rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, ADMITTED_SIZE);
    }
    struct nlmsghdr *h = batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE);
    rbx_nft->nftnl_set_nlmsg_build_payload(h, s);
    rbx_nft->nftnl_set_free(s);
    batch_next(bt);
}

/* chain refuse: note the destination (TCP and UDP, with the port), count,
 * reject. */
static void put_refuse(batch *bt)
{
    /* The sandbox's own kernel solicits routers and joins multicast groups
     * over ICMPv6 when the interface comes up: not the program's doing,
     * and there is no IPv6 route out anyway. Dropped, not counted. */
    struct nftnl_rule *quiet = rule_new("refuse");
    add_family(quiet, AF_INET6);
    add_l4proto(quiet, IPPROTO_ICMPV6);
    add_verdict(quiet, NF_DROP, NULL);
    rule_put(bt, quiet);
    static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP};
    for (int family = 0; family < 2; family++)
        for (size_t p = 0; p < 2; p++) {
            struct nftnl_rule *r = rule_new("refuse");
            bool v4 = family == 0;
            add_family(r, v4 ? AF_INET : AF_INET6);
            add_l4proto(r, protos[p]);
            add_daddr(r, v4 ? AF_INET : AF_INET6);
            add_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, v4 ? NFT_REG32_01 : NFT_REG32_04);
            struct nftnl_expr *e = rbx_nft->nftnl_expr_alloc("dynset");
            rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG32_00);
            rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_ADD);
            rbx_nft->nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME,
                               set_names[v4 ? SET_DENIED4 : SET_DENIED6]);
            rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SET_ID,
                                        v4 ? SET_DENIED4 : SET_DENIED6);
            rbx_nft->nftnl_rule_add_expr(r, e);
            rule_put(bt, r);
        }
    /* TCP gets a reset (the program's connect fails at once with
     * "connection refused"); anything else an ICMP "administratively
     * prohibited". */
    for (int tcp = 1; tcp >= 0; tcp--) {
        struct nftnl_rule *r = rule_new("refuse");
        if (tcp)
            add_l4proto(r, IPPROTO_TCP);
        struct nftnl_expr *e = rbx_nft->nftnl_expr_alloc("objref");
        rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
        rbx_nft->nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_IMM_NAME, "refused");
        rbx_nft->nftnl_rule_add_expr(r, e);
        e = rbx_nft->nftnl_expr_alloc("reject");
        rbx_nft->nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE,
                           tcp ? NFT_REJECT_TCP_RST : NFT_REJECT_ICMPX_UNREACH);
        rbx_nft->nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE,
                                   tcp ? 0 : NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
        rbx_nft->nftnl_rule_add_expr(r, e);
        rule_put(bt, r);
    }
}

/* DNS goes to runbox's resolver on the sandbox's own loopback: plain DNS
 * and DNS over TLS to any other server are refused, so that names the
 * policy refuses cannot be looked up elsewhere. */
static void put_dns_elsewhere(batch *bt)
{
    static const struct {
        uint8_t proto;
        uint16_t port;
    } dns[] = {{IPPROTO_UDP, 53}, {IPPROTO_TCP, 53}, {IPPROTO_TCP, 853}};
    for (size_t i = 0; i < sizeof dns / sizeof dns[0]; i++) {
        struct nftnl_rule *r = rule_new("output");
        add_l4proto(r, dns[i].proto);
        add_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG32_00);
        uint16_t port = htons(dns[i].port);
        add_cmp(r, NFT_REG32_00, &port, 2);
        add_verdict(r, NFT_JUMP, "refuse");
        rule_put(bt, r);
    }
}

/* The host's addresses into the sets host4 and host6. */
static void put_hosts(batch *bt, const rbx_egress_list *hosts)
{
    for (uint32_t id = SET_HOST4; id <= SET_HOST6; id++) {
        int family = id % 2 ? AF_INET : AF_INET6;
        struct nftnl_set *s = rbx_nft->nftnl_set_alloc();
        rbx_nft->nftnl_set_set_str(s, NFTNL_SET_TABLE, TABLE);
        rbx_nft->nftnl_set_set_str(s, NFTNL_SET_NAME, set_names[id]);
        rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_ID, id);
        size_t count = 0;
        for (size_t i = 0; i < hosts->cidr_count; i++)
            if (hosts->cidrs[i].family == family) {
                struct nftnl_set_elem *e = rbx_nft->nftnl_set_elem_alloc();
                rbx_nft->nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, hosts->cidrs[i].addr,
                                            family == AF_INET ? 4 : 16);
                rbx_nft->nftnl_set_elem_add(s, e);
                count++;
            }
        if (count) {
            rbx_nft->nftnl_set_elems_nlmsg_build_payload(
                batch_msg(bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE), s);
            batch_next(bt);
        }
        rbx_nft->nftnl_set_free(s);
    }
}

/* Builds the plan's batch; false when it did not fit (never with the
 * sizes the lists allow). */
static bool build(const rbx_egress_plan *plan, batch *bt_out)
{
    const rbx_egress_policy *policy = plan->policy;
    size_t ranges = plan->host.cidr_count + policy->deny.cidr_count + plan->narrowing.cidr_count +
                    policy->allow.cidr_count + rbx_egress_default_deny_count;
    batch bt;
    if (!batch_open(&bt, 16384 + ranges * 128)) {
        *bt_out = bt;
        return false;
    }
    struct nftnl_table *t = rbx_nft->nftnl_table_alloc();
    rbx_nft->nftnl_table_set_str(t, NFTNL_TABLE_NAME, TABLE);
    rbx_nft->nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
    rbx_nft->nftnl_table_nlmsg_build_payload(batch_msg(&bt, NFT_MSG_NEWTABLE, NLM_F_CREATE), t);
    rbx_nft->nftnl_table_free(t);
    batch_next(&bt);
    struct nftnl_obj *o = rbx_nft->nftnl_obj_alloc();
    rbx_nft->nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, TABLE);
    rbx_nft->nftnl_obj_set_str(o, NFTNL_OBJ_NAME, "refused");
    rbx_nft->nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
    rbx_nft->nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
    rbx_nft->nftnl_obj_nlmsg_build_payload(batch_msg(&bt, NFT_MSG_NEWOBJ, NLM_F_CREATE), o);
    rbx_nft->nftnl_obj_free(o);
    batch_next(&bt);
    /* The sets of answers exist only where a list names domains: each set
     * costs the kernel some microseconds to make. */
    bool named = policy->allow.domain_count > 0;
    bool narrow = plan->has_narrowing && plan->narrowing.domain_count > 0;
    for (uint32_t id = SET_DENIED4; id <= SET_NARROW6; id++)
        if (id <= SET_DENIED6 || (named && id <= SET_NAMED6) || (narrow && id >= SET_NARROW4))
            put_set(&bt, id);
    if (!policy->open) {
        put_set(&bt, SET_HOST4);
        put_set(&bt, SET_HOST6);
        put_hosts(&bt, &plan->host);
    }
    put_chain(&bt, "refuse", false);
    if (plan->has_narrowing)
        put_chain(&bt, "narrow", false);
    put_chain(&bt, "output", true);
    put_refuse(&bt);

    /* output: the sandbox's own loopback is its own business. */
    struct nftnl_rule *r = rule_new("output");
    uint32_t lo = 1; /* loopback is interface 1 in every new namespace */
    add_meta(r, NFT_META_OIF, NFT_REG32_00);
    add_cmp(r, NFT_REG32_00, &lo, 4);
    add_verdict(r, NF_ACCEPT, NULL);
    rule_put(&bt, r);
    if (!policy->open) {
        put_dns_elsewhere(&bt);
        /* Deny wins: the host's own addresses and the operator's denied ranges. */
        put_lookup_rule(&bt, "output", SET_HOST4, NFT_JUMP, "refuse");
        put_lookup_rule(&bt, "output", SET_HOST6, NFT_JUMP, "refuse");
        put_both(&bt, SET_DENY4, &policy->deny, NULL, "output", NFT_JUMP, "refuse");
    }
    if (plan->has_narrowing) {
        put_both(&bt, SET_REQUEST4, &plan->narrowing, NULL, "narrow", NFT_RETURN, NULL);
        if (narrow) {
            put_lookup_rule(&bt, "narrow", SET_NARROW4, NFT_RETURN, NULL);
            put_lookup_rule(&bt, "narrow", SET_NARROW6, NFT_RETURN, NULL);
        }
        r = rule_new("narrow");
        add_verdict(r, NFT_JUMP, "refuse");
        rule_put(&bt, r);
        r = rule_new("output");
        add_verdict(r, NFT_JUMP, "narrow");
        rule_put(&bt, r);
    }
    put_both(&bt, SET_ALLOW4, &policy->allow, NULL, "output", NF_ACCEPT, NULL);
    if (named) {
        put_lookup_rule(&bt, "output", SET_NAMED4, NF_ACCEPT, NULL);
        put_lookup_rule(&bt, "output", SET_NAMED6, NF_ACCEPT, NULL);
    }
    if (policy->open) {
        /* Nothing else: the request's narrowing above is all there is. */
    } else if (policy->allowlist_only) {
        r = rule_new("output");
        add_verdict(r, NFT_JUMP, "refuse");
        rule_put(&bt, r);
    } else {
        rbx_egress_list defaults = {.cidrs = (rbx_cidr *)rbx_egress_default_deny,
                                    .cidr_count = rbx_egress_default_deny_count};
        put_both(&bt, SET_DEFAULT4, &defaults, NULL, "output", NFT_JUMP, "refuse");
    }

    *bt_out = bt;
    return batch_finish(bt_out);
}

/* What makes two plans' batches the same: the policy, the host's
 * addresses, the narrowing. Consecutive executions nearly always share
 * it, so the last batch is kept and sent again (building one with libnftnl
 * costs about as much as the kernel's applying it). */
static char *plan_key(const rbx_egress_plan *plan, size_t *len)
{
    const rbx_egress_list *lists[] = {&plan->host, &plan->narrowing};
    size_t n = sizeof plan->policy + 1;
    for (size_t i = 0; i < 2; i++)
        n += sizeof(size_t) * 2 + lists[i]->cidr_count * sizeof(rbx_cidr);
    char *key = calloc(1, n);
    if (!key)
        return NULL;
    size_t at = 0;
    memcpy(key, &plan->policy, sizeof plan->policy);
    at += sizeof plan->policy;
    key[at++] = plan->has_narrowing;
    for (size_t i = 0; i < 2; i++) {
        size_t domains = lists[i]->domain_count > 0; /* whether its sets of answers exist */
        memcpy(key + at, &lists[i]->cidr_count, sizeof(size_t));
        memcpy(key + at + sizeof(size_t), &domains, sizeof(size_t));
        at += 2 * sizeof(size_t);
        for (size_t c = 0; c < lists[i]->cidr_count; c++) {
            rbx_cidr cidr = {0}; /* padding zeroed: keys compare as bytes */
            cidr.family = lists[i]->cidrs[c].family;
            cidr.prefix = lists[i]->cidrs[c].prefix;
            memcpy(cidr.addr, lists[i]->cidrs[c].addr, sizeof cidr.addr);
            memcpy(key + at, &cidr, sizeof cidr);
            at += sizeof cidr;
        }
    }
    *len = at;
    return key;
}

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static char *cached_key, *cached_bytes;
static size_t cached_key_len, cached_len;

/* The plan's batch as bytes (malloc'ed), from the cache or built. */
static char *batch_bytes(const rbx_egress_plan *plan, size_t *len)
{
    size_t key_len = 0;
    char *key = plan_key(plan, &key_len);
    char *bytes = NULL;
    pthread_mutex_lock(&cache_lock);
    if (key && cached_key && key_len == cached_key_len && !memcmp(key, cached_key, key_len) &&
        (bytes = malloc(cached_len))) {
        memcpy(bytes, cached_bytes, cached_len);
        *len = cached_len;
    }
    pthread_mutex_unlock(&cache_lock);
    if (bytes) {
        free(key);
        return bytes;
    }
    batch bt;
    if (!build(plan, &bt)) {
        batch_close(&bt);
        free(key);
        return NULL;
    }
    *len = rbx_nft->mnl_nlmsg_batch_size(bt.b);
    bytes = malloc(*len);
    char *copy = malloc(*len);
    if (bytes && copy) {
        memcpy(bytes, rbx_nft->mnl_nlmsg_batch_head(bt.b), *len);
        memcpy(copy, bytes, *len);
        pthread_mutex_lock(&cache_lock);
        free(cached_key);
        free(cached_bytes);
        cached_key = key, cached_key_len = key_len;
        cached_bytes = copy, cached_len = *len;
        key = copy = NULL;
        pthread_mutex_unlock(&cache_lock);
    }
    free(key);
    free(copy);
    batch_close(&bt);
    return bytes;
}

static atomic_bool ready;

bool rbx_egress_rules_ready(void)
{
    return atomic_load(&ready);
}

void rbx_egress_rules_prepare(const rbx_egress_plan *plan)
{
    rbx_error ignored;
    size_t len = 0;
    if (rbx_nft_load(&ignored) == RBX_OK)
        free(batch_bytes(plan, &len));
    atomic_store(&ready, true);
}

rbx_status rbx_egress_rules_install(int nl_fd, const rbx_egress_plan *plan, rbx_error *err)
{
    atomic_store(&ready, true);
    rbx_status loaded = rbx_nft_load(err);
    if (loaded != RBX_OK)
        return loaded;
    size_t len = 0;
    char *bytes = batch_bytes(plan, &len);
    int rc = bytes ? send_bytes(nl_fd, bytes, len) : -1;
    int error = bytes ? errno : ENOMEM;
    free(bytes);
    if (rc != 0)
        return rbx_fail(err, RBX_ESYSTEM,
                        "cannot install the egress policy in the sandbox's network namespace "
                        "(nftables): %s%s; without it the network cannot be given safely (run "
                        "with --no-network, or let the operator choose --egress-default open; "
                        "see runbox check)",
                        strerror(error),
                        error == ENOENT || error == EOPNOTSUPP
                            ? " (a kernel module is missing: nf_tables, nft_reject_inet and "
                              "nft_objref are needed)"
                            : "");
    return RBX_OK;
}

int rbx_egress_rules_deny_hosts(int nl_fd, const rbx_egress_list *hosts)
{
    rbx_error ignored;
    if (rbx_nft_load(&ignored) != RBX_OK) /* said when the rules were installed */
        return -1;
    batch bt;
    if (!batch_open(&bt, 4096 + hosts->cidr_count * 64))
        return -1;
    put_hosts(&bt, hosts);
    int rc = batch_send(nl_fd, &bt);
    batch_close(&bt);
    return rc;
}

int rbx_egress_rules_remove(int nl_fd)
{
    rbx_error ignored;
    if (rbx_nft_load(&ignored) != RBX_OK)
        return -1;
    batch bt;
    if (!batch_open(&bt, 4096))
        return -1;
    /* Made first (a no-op when it is there), so that the batch never
     * fails on a table that is not. */
    static const uint16_t steps[][2] = {{NFT_MSG_NEWTABLE, NLM_F_CREATE}, {NFT_MSG_DELTABLE, 0}};
    for (size_t i = 0; i < 2; i++) {
        struct nftnl_table *t = rbx_nft->nftnl_table_alloc();
        rbx_nft->nftnl_table_set_str(t, NFTNL_TABLE_NAME, TABLE);
        rbx_nft->nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
        rbx_nft->nftnl_table_nlmsg_build_payload(batch_msg(&bt, steps[i][0], steps[i][1]), t);
        rbx_nft->nftnl_table_free(t);
        batch_next(&bt);
    }
    int rc = batch_send(nl_fd, &bt);
    batch_close(&bt);
    return rc;
}

int rbx_egress_rules_admit(int nl_fd, bool narrow, int family, const uint8_t *addr)
{
    uint32_t id = narrow ? (family == AF_INET ? SET_NARROW4 : SET_NARROW6)
                         : (family == AF_INET ? SET_NAMED4 : SET_NAMED6);
    rbx_error ignored;
    if (rbx_nft_load(&ignored) != RBX_OK) /* said when the rules were installed */
        return -1;
    batch bt;
    if (!batch_open(&bt, 4096))
        return -1;
    struct nftnl_set *s = rbx_nft->nftnl_set_alloc();
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_TABLE, TABLE);
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_NAME, set_names[id]);
    struct nftnl_set_elem *e = rbx_nft->nftnl_set_elem_alloc();
    rbx_nft->nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, addr, family == AF_INET ? 4 : 16);
    rbx_nft->nftnl_set_elem_add(s, e);
    rbx_nft->nftnl_set_elems_nlmsg_build_payload(
        batch_msg(&bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE), s);
    rbx_nft->nftnl_set_free(s);
    batch_next(&bt);
    int rc = batch_send(nl_fd, &bt);
    batch_close(&bt);
    return rc;
}

void rbx_egress_report_note(rbx_egress_report *report, const char *destination)
{
    for (size_t i = 0; i < report->count; i++)
        if (!strcmp(report->to[i], destination))
            return;
    if (report->count < RBX_EGRESS_REPORT_MAX)
        snprintf(report->to[report->count++], sizeof report->to[0], "%s", destination);
}

static int counter_cb(const struct nlmsghdr *nlh, void *data)
{
    struct nftnl_obj *o = rbx_nft->nftnl_obj_alloc();
    if (o && rbx_nft->nftnl_obj_nlmsg_parse(nlh, o) == 0)
        *(uint64_t *)data += rbx_nft->nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
    rbx_nft->nftnl_obj_free(o);
    return MNL_CB_OK;
}

typedef struct elems_walk {
    rbx_egress_report *report;
    bool v4;
} elems_walk;

static int elem_cb(struct nftnl_set_elem *e, void *data)
{
    elems_walk *walk = data;
    uint32_t len = 0;
    const uint8_t *key = rbx_nft->nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
    uint32_t addr_len = walk->v4 ? 4 : 16;
    if (!key || len < addr_len + 2)
        return 0;
    unsigned port = (unsigned)key[addr_len] << 8 | key[addr_len + 1];
    char text[64];
    rbx_egress_format(walk->v4 ? AF_INET : AF_INET6, key, port, text, sizeof text);
    rbx_egress_report_note(walk->report, text);
    return 0;
}

static int elems_cb(const struct nlmsghdr *nlh, void *data)
{
    struct nftnl_set *s = rbx_nft->nftnl_set_alloc();
    if (s && rbx_nft->nftnl_set_elems_nlmsg_parse(nlh, s) >= 0)
        rbx_nft->nftnl_set_elem_foreach(s, elem_cb, data);
    rbx_nft->nftnl_set_free(s);
    return MNL_CB_OK;
}

/* One question that is not a batch (a read); cb sees the answers. */
static void ask(int fd, const struct nlmsghdr *h, mnl_cb_t cb, void *data)
{
    drain(fd);
    if (send(fd, h, h->nlmsg_len, 0) == (ssize_t)h->nlmsg_len)
        (void)talk(fd, h->nlmsg_seq, cb, data);
}

static void take_denied(int fd, uint32_t id, rbx_egress_report *report)
{
    char buf[512];
    struct nftnl_set *s = rbx_nft->nftnl_set_alloc();
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_TABLE, TABLE);
    rbx_nft->nftnl_set_set_str(s, NFTNL_SET_NAME, set_names[id]);
    rbx_nft->nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
    uint32_t seq = 1;
    struct nlmsghdr *h =
        rbx_nft->nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP, seq);
    rbx_nft->nftnl_set_elems_nlmsg_build_payload(h, s);
    elems_walk walk = {.report = report, .v4 = id == SET_DENIED4};
    ask(fd, h, elems_cb, &walk);
    /* Flushed for the next call of a kernel: a delete naming no element. */
    batch bt;
    if (batch_open(&bt, 4096)) {
        rbx_nft->nftnl_set_elems_nlmsg_build_payload(batch_msg(&bt, NFT_MSG_DELSETELEM, 0), s);
        batch_next(&bt);
        (void)batch_send(fd, &bt);
        batch_close(&bt);
    }
    rbx_nft->nftnl_set_free(s);
}

void rbx_egress_rules_take_report(int nl_fd, rbx_egress_report *report)
{
    rbx_error ignored;
    if (rbx_nft_load(&ignored) != RBX_OK) /* no rules were installed: nothing to report */
        return;
    char buf[512];
    struct nftnl_obj *o = rbx_nft->nftnl_obj_alloc();
    rbx_nft->nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, TABLE);
    rbx_nft->nftnl_obj_set_str(o, NFTNL_OBJ_NAME, "refused");
    rbx_nft->nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
    uint32_t seq = 1;
    struct nlmsghdr *h =
        rbx_nft->nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETOBJ_RESET, NFPROTO_INET, NLM_F_ACK, seq);
    rbx_nft->nftnl_obj_nlmsg_build_payload(h, o);
    rbx_nft->nftnl_obj_free(o);
    uint64_t packets = 0;
    ask(nl_fd, h, counter_cb, &packets);
    report->refused += packets;
    if (packets) {
        take_denied(nl_fd, SET_DENIED4, report);
        take_denied(nl_fd, SET_DENIED6, report);
    }
}
