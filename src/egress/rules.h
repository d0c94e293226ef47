/* The egress policy as nftables rules in a sandbox's own network namespace,
 * spoken through a netlink socket that the sandbox's init opened there (so
 * that runbox needs no privilege over the namespace beyond owning it).
 *
 *   table inet runbox
 *     chain output (hook output): own loopback accepted; DNS anywhere but
 *       runbox's resolver refused; denied ranges and the host's addresses
 *       refused; the request's narrowing (chain narrow); the operator's
 *       allowed ranges and names accepted; then the default ranges refused
 *       (public mode) or everything refused (allow-list mode).
 *     chain refuse: notes the destination in set denied4/denied6, counts
 *       it in counter "refused", rejects (the program sees EHOSTUNREACH or
 *       EPERM at once, not a hang).
 *     sets named4/named6, narrow4/narrow6: addresses runbox's resolver
 *       answered for allowed names. */
#ifndef RBX_EGRESS_RULES_H
#define RBX_EGRESS_RULES_H

#include "egress/policy.h"
#include "runbox.h"

/* What the policy refused, for the result. */
typedef struct rbx_egress_report {
    uint64_t refused;
    size_t count;
    char to[RBX_EGRESS_REPORT_MAX][128];
} rbx_egress_report;

/* Adds a destination to the report unless it is there already. */
void rbx_egress_report_note(rbx_egress_report *report, const char *destination);

rbx_status rbx_egress_rules_install(int nl_fd, const rbx_egress_plan *plan, rbx_error *err);
/* Removes the policy's rules from the namespace of nl_fd (a sandbox about
 * to be checkpointed: a restored one gets them anew). 0 or -1. */
int rbx_egress_rules_remove(int nl_fd);
/* What install does first in a process, done ahead (sandbox/egress_setup.h):
 * libnftnl loaded, the plan's rules built and kept. Failures are left for
 * install to report. */
void rbx_egress_rules_prepare(const rbx_egress_plan *plan);
/* Whether this process has installed or prepared rules already. */
bool rbx_egress_rules_ready(void);
/* Makes an address that the resolver answered reachable (set "named" or
 * "narrow"); 0 on success. */
int rbx_egress_rules_admit(int nl_fd, bool narrow, int family, const uint8_t *addr);
/* Adds addresses to the host's in a sandbox's rules (what the host gained
 * since they were installed; those it has already stay); 0 on success. */
int rbx_egress_rules_deny_hosts(int nl_fd, const rbx_egress_list *hosts);
/* Reads and resets what was refused since the last call. */
void rbx_egress_rules_take_report(int nl_fd, rbx_egress_report *report);

#endif
