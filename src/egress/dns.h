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

#include "egress/policy.h"
#include "egress/rules.h"
#include "kernels/wire.h"
#include "runbox.h"

typedef struct rbx_egress_guard rbx_egress_guard;

/* Starts the resolver's thread, as the first guard does (sandbox/egress_setup.h). */
void rbx_egress_guard_prepare(void);
/* Takes both descriptors (closed on failure too); plan must outlive the
 * guard. */
rbx_egress_guard *rbx_egress_guard_start(int nl_fd, int dns_fd, const rbx_egress_plan *plan,
                                         rbx_error *err);
/* Adds what was refused since the last call (addresses and names). */
void rbx_egress_guard_take_report(rbx_egress_guard *guard, rbx_egress_report *report);
void rbx_egress_guard_stop(rbx_egress_guard *guard);

/* The parts that read a sandbox's or a resolver's bytes (fuzzed in
 * tests/fuzz): */

/* The one question of a DNS message: the name as text (no final dot),
 * its type and class, and the message's ID. */
typedef struct rbx_egress_question {
    uint8_t id[2];
    uint16_t type, qclass;
    char name[1025]; /* NS_MAXDNAME */
} rbx_egress_question;

/* An address a DNS answer gives. */
typedef struct rbx_egress_address {
    int family;
    uint8_t addr[16];
} rbx_egress_address;

/* The question of a query; false when msg is not one query. */
bool rbx_egress_dns_question(const uint8_t *msg, size_t len, rbx_egress_question *question);
/* Whether msg is the response to question: its ID, the response flag, one
 * question of the same name (in any case), type and class. */
bool rbx_egress_dns_answers(const rbx_egress_question *question, const uint8_t *msg, size_t len);
/* The addresses in msg's answer section that answer question's name: A
 * and AAAA records (of the type asked, both for ANY; class IN) owned by
 * that name or by a name its chain of CNAME records there leads to.
 * Nothing else in the message: other names' records, a chain that starts
 * at another name, the authority and additional sections. No address at
 * all when the chain passes through a name on deny (may be NULL). At most
 * max are written to out; returns how many. */
size_t rbx_egress_dns_addresses(const rbx_egress_question *question, const uint8_t *msg,
                                size_t len, const rbx_egress_list *deny, rbx_egress_address *out,
                                size_t max);
/* Turns the query in msg (len >= 12 bytes) into a REFUSED answer in place;
 * returns its length (the header and the question, at most len). */
size_t rbx_egress_dns_refusal(uint8_t *msg, size_t len);

#endif
