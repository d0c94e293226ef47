/* The egress policy: which destinations an execution with the network on
 * may reach. The operator's lists (rbx_config, or a file) are parsed once
 * into an rbx_egress_policy; each execution compiles it with its request's
 * narrowing into an rbx_egress_plan, which the sandbox enforces with
 * nftables rules in its own network namespace (sandbox/egress_rules.h) and
 * runbox's own resolver (sandbox/egress_dns.h). */
#ifndef RBX_EGRESS_H
#define RBX_EGRESS_H

#include <netinet/in.h>
#include "runbox.h"

/* An address range: family AF_INET or AF_INET6, address in network order. */
typedef struct rbx_cidr {
    int family;
    uint8_t addr[16];
    uint8_t prefix;
} rbx_cidr;

/* A domain rule: "example.com" matches that name only, "*.example.com" any
 * name below it (not example.com itself). Stored lower-case, no final dot. */
typedef struct rbx_domain {
    char name[254];
    bool wildcard;
} rbx_domain;

typedef struct rbx_egress_list {
    rbx_cidr *cidrs;
    size_t cidr_count;
    rbx_domain *domains;
    size_t domain_count;
} rbx_egress_list;

typedef struct rbx_egress_policy {
    rbx_egress_list allow, deny;
    bool allowlist_only;
    bool open;                        /* no policy: only a request's narrowing is enforced */
    struct sockaddr_storage resolver; /* where names are resolved */
    socklen_t resolver_len;
    char resolver_text[64];
    uint64_t file_digest; /* of the egress file's bytes as loaded (0: none), for
                             rbx_engine_fingerprint: edited since, it is
                             another configuration */
} rbx_egress_policy;

/* What one sandbox enforces: the operator's policy, the host's addresses
 * at the time, and the request's narrowing (has_narrowing false: none). */
typedef struct rbx_egress_plan {
    const rbx_egress_policy *policy;
    rbx_egress_list host; /* the host's own addresses, always refused */
    uint64_t host_generation; /* which listing of them (rbx_egress_host_addresses) */
    bool has_narrowing;
    rbx_egress_list narrowing;
} rbx_egress_plan;

/* The ranges refused by default (public-internet mode): loopback,
 * link-local, private, shared, unique-local, multicast, broadcast. */
extern const rbx_cidr rbx_egress_default_deny[];
extern const size_t rbx_egress_default_deny_count;

/* Parses a list of entries separated by commas or white space into list
 * (appending). what names the list in messages ("--egress-allow"). */
rbx_status rbx_egress_list_parse(rbx_egress_list *list, const char *text, const char *what,
                                 rbx_error *err);
/* One entry; index >= 0 is shown in messages as what[index]. */
rbx_status rbx_egress_entry_add(rbx_egress_list *list, const char *entry, const char *what,
                                int index, rbx_error *err);
void rbx_egress_list_free(rbx_egress_list *list);

/* The operator's policy from the configuration (lists, file, resolver). */
rbx_status rbx_egress_policy_load(rbx_egress_policy *policy, const rbx_config *config,
                                  rbx_error *err);
void rbx_egress_policy_free(rbx_egress_policy *policy);
/* The policy in words, for runbox check. */
void rbx_egress_policy_describe(const rbx_egress_policy *policy, char *text, size_t size);

/* The request's egress_allow, checked and parsed into list. */
rbx_status rbx_egress_narrowing_parse(rbx_egress_list *list, const rbx_request *request,
                                      rbx_error *err);
/* Whether the plan needs rules at all (not with an open policy and no
 * narrowing). */
bool rbx_egress_plan_has_rules(const rbx_egress_plan *plan);
/* host_addresses.c: the host's own addresses (and the NAT64 forms of its
 * IPv4 ones) that keep keeps for policy (rbx_egress_host_matters) into an
 * empty list, kept between calls until they change; *generation says which
 * listing of them the list has (it grows). */
typedef bool (*rbx_egress_host_keep)(const void *policy, int family, const uint8_t *addr);
rbx_status rbx_egress_host_addresses(rbx_egress_host_keep keep, const void *policy,
                                     rbx_egress_list *list, uint64_t *generation, rbx_error *err);
/* The entries of all (count of them) that keep keeps for policy into the
 * empty list out: the one selection loop, for plans and for the pushes to
 * live sandboxes (rbx_egress_host_select). */
rbx_status rbx_egress_host_select_by(rbx_egress_host_keep keep, const void *policy,
                                     const rbx_cidr *all, size_t count, rbx_egress_list *out,
                                     rbx_error *err);
/* The descriptor that is readable when the kernel says the host's
 * addresses changed; -1 when there is none (then every plan lists them). */
int rbx_egress_host_watch(void);
/* Reads what the kernel said and lists them again if it said anything;
 * true, with a copy of all of them into the empty list and its
 * generation, when the kept list is newer than known. */
bool rbx_egress_host_refresh(uint64_t known, rbx_egress_list *list, uint64_t *generation);
/* A plan for one sandbox; request may be NULL (an install). */
rbx_status rbx_egress_plan_make(rbx_egress_plan *plan, const rbx_egress_policy *policy,
                                const rbx_request *request, rbx_error *err);
void rbx_egress_plan_free(rbx_egress_plan *plan);

/* Whether a host's own address needs a rule of its own under policy: not
 * when the policy refuses it whatever a request or a name says (in the
 * operator's deny list, or refused by the public default in a range the
 * operator did not allow), nor under an open policy, which refuses none. */
bool rbx_egress_host_matters(const rbx_egress_policy *policy, int family, const uint8_t *addr);
/* The addresses of all that matter to policy into the empty list out;
 * -1 when out of memory. */
int rbx_egress_host_select(const rbx_egress_policy *policy, const rbx_egress_list *all,
                           rbx_egress_list *out);

/* Whether the public default refuses an address (family AF_INET or
 * AF_INET6, network order). */
bool rbx_egress_default_refuses(int family, const uint8_t *addr);
/* Whether an address that answers a name the policy allows may be admitted
 * into the sandbox's rules: never the host's own addresses or the
 * operator's denied ranges, and an address of the ranges refused by
 * default only when the operator's allow list holds it as a CIDR (or the
 * policy is open). */
bool rbx_egress_name_may_admit(const rbx_egress_plan *plan, int family, const uint8_t *addr);

/* Whether a name matches one of the list's domains. */
bool rbx_egress_domain_listed(const rbx_egress_list *list, const char *name);

/* How a name asked of the sandbox's resolver is treated. */
typedef struct rbx_egress_name_verdict {
    bool refused;      /* not resolved at all */
    bool named_allow;  /* its addresses are reachable as the operator allows them */
    bool named_narrow; /* its addresses pass the request's narrowing */
} rbx_egress_name_verdict;

rbx_egress_name_verdict rbx_egress_judge_name(const rbx_egress_plan *plan, const char *name);

/* Formats a destination "ADDR:PORT" / "[V6]:PORT" (port 0: the address alone). */
void rbx_egress_format(int family, const uint8_t *addr, unsigned port, char *text, size_t size);

#endif
