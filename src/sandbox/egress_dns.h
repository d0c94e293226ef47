/* runbox's resolver for sandboxes with the network on. Each such sandbox
 * has a UDP socket on its own loopback (RBX_SANDBOX_NAMESERVER, port 53)
 * that its init opened and handed over; one thread of the runbox process
 * answers every sandbox's socket: a name the policy refuses gets REFUSED
 * (and is reported), any other is asked of the operator's resolver from
 * the host's side, and the addresses answered for a name the policy
 * allows are admitted into the sandbox's rules before the answer goes
 * back, so that the program can connect to them and to nothing else that
 * it did not resolve. The guard also owns the sandbox's netlink socket:
 * every use of it is serialised here. */
#ifndef RBX_EGRESS_DNS_H
#define RBX_EGRESS_DNS_H

#include "sandbox/egress_rules.h"

typedef struct rbx_egress_guard rbx_egress_guard;

/* Takes both descriptors (closed on failure too); plan must outlive the
 * guard. */
rbx_egress_guard *rbx_egress_guard_start(int nl_fd, int dns_fd, const rbx_egress_plan *plan,
                                         rbx_error *err);
/* Adds what was refused since the last call (addresses and names). */
void rbx_egress_guard_take_report(rbx_egress_guard *guard, rbx_egress_report *report);
void rbx_egress_guard_stop(rbx_egress_guard *guard);

/* The parts that read a sandbox's bytes (fuzzed in tests/fuzz): */
/* The name a DNS query asks about; false when msg is not one query. */
bool rbx_egress_dns_question(const uint8_t *msg, size_t len, char *name, size_t size);
/* Turns the query in msg (len >= 12 bytes) into a REFUSED answer in place;
 * returns its length (the header and the question, at most len). */
size_t rbx_egress_dns_refusal(uint8_t *msg, size_t len);

#endif
