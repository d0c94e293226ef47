/* The egress policy put in place beside the making of a sandbox's tap.
 *
 * With the network on, the thread that starts a sandbox makes its tap
 * (sandbox/net.c) and the egress policy's rules go into its network
 * namespace (egress/rules.h) before the program may start. Neither needs
 * the other, and each took about half a millisecond of a cold run's path,
 * one after the other: the rules now go in on a thread of their own while
 * the tap is made. The thread also does the policy's first-use work in a
 * process (libnftnl loaded, the rules built, the resolver's thread
 * started). */
#ifndef RBX_SANDBOX_EGRESS_SETUP_H
#define RBX_SANDBOX_EGRESS_SETUP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "egress/dns.h"
#include "egress/policy.h"
#include "runbox.h"

typedef struct rbx_egress_setup {
    pthread_t thread;
    bool running;   /* the thread was started and is not joined yet */
    bool on_finish; /* no thread could start: rbx_egress_setup_finish works */
    const rbx_egress_plan *plan;
    int channel;   /* init hands the policy's sockets over through it */
    int fds[2];    /* netlink, resolver: as received, -1 until then */
    bool received; /* init handed them over */
    rbx_status status;
    rbx_error err;
    int64_t work_us; /* the installing, not the wait for init */
} rbx_egress_setup;

/* Starts the work: take the sockets from init when it hands them over,
 * then install the plan's rules. plan must outlive the setup. Without a
 * thread, rbx_egress_setup_finish does it all. */
void rbx_egress_setup_start(rbx_egress_setup *setup, const rbx_egress_plan *plan, int channel);
/* Waits for the work and starts the policy's resolver for the sandbox:
 * *guard on RBX_OK. Otherwise err says why; setup->received tells whether
 * init handed the sockets over at all (if not, init may say why). */
rbx_status rbx_egress_setup_finish(rbx_egress_setup *setup, rbx_egress_guard **guard,
                                   rbx_error *err);
/* Waits for the work if it is still running and closes what it received
 * (a start that failed before the finish; init is dead by then, so the
 * wait for its sockets ends). Again, or after a finish, does nothing. */
void rbx_egress_setup_abandon(rbx_egress_setup *setup);

#endif
