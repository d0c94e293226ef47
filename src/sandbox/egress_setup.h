/* The egress policy put in place beside the making of a sandbox's tap.
 *
 * With the network on, the thread that starts a sandbox makes its tap
 * (sandbox/net.c) and the egress policy's rules go into its network
 * namespace (egress/rules.h) before the program may start. Neither needs
 * the other, and each took about half a millisecond of a cold run's path,
 * one after the other: the rules now go in on another thread while the
 * tap is made, one of the process's kept for the next start (rbx_workers:
 * a server's refills would otherwise make and end one for each). That
 * thread also does the policy's first-use work in a process (libnftnl
 * loaded, the rules built, the resolver's thread started). */
#ifndef RBX_SANDBOX_EGRESS_SETUP_H
#define RBX_SANDBOX_EGRESS_SETUP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "egress/dns.h"
#include "egress/policy.h"
#include "runbox.h"

typedef struct rbx_egress_setup {
    pthread_mutex_t lock;
    pthread_cond_t over; /* the work's end, for the waiting starter */
    bool started;        /* lock and over are made */
    bool running;        /* the work runs on a worker; under lock */
    bool on_finish;      /* no worker could take it: rbx_egress_setup_finish works */
    const rbx_egress_plan *plan;
    int channel;   /* init hands the policy's sockets over through it */
    int fds[2];    /* netlink, resolver: as received, -1 until then */
    bool received; /* init handed them over */
    rbx_status status;
    rbx_error err;
    int64_t work_us; /* the installing, not the wait for init */
} rbx_egress_setup;

/* Starts the work: take the sockets from init when it hands them over,
 * then install the plan's rules, on one of the process's workers. plan and
 * setup must outlive the work (rbx_egress_setup_abandon waits for it).
 * Without a worker, rbx_egress_setup_finish does it all. */
void rbx_egress_setup_start(rbx_egress_setup *setup, const rbx_egress_plan *plan, int channel);
/* Waits for the work and starts the policy's resolver for the sandbox:
 * *guard on RBX_OK. Otherwise err says why; setup->received tells whether
 * init handed the sockets over at all (if not, init may say why). */
rbx_status rbx_egress_setup_finish(rbx_egress_setup *setup, rbx_egress_guard **guard,
                                   rbx_error *err);
/* Waits for the work if it is still running, closes what it received (a
 * start that failed before the finish; init is dead by then, so the wait
 * for its sockets ends) and frees what the start made. Called once after
 * every start, the finish or not; after no start it does nothing. */
void rbx_egress_setup_abandon(rbx_egress_setup *setup);

#endif
