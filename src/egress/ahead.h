/* The egress policy's first-use work, done beside a sandbox's start: a
 * process's first network-on sandbox (every cold `runbox run --network`)
 * would otherwise load libnftnl, build the plan's rules and start the
 * resolver's thread on the way to its program, about a millisecond after
 * the sandbox's init has its namespaces. */
#ifndef RBX_EGRESS_AHEAD_H
#define RBX_EGRESS_AHEAD_H

#include <pthread.h>
#include <stdbool.h>

#include "egress/policy.h"

typedef struct rbx_egress_ahead {
    pthread_t thread;
    bool running;
} rbx_egress_ahead;

/* Starts that work on a thread of its own, unless this process has done it
 * (then it costs nothing); plan must outlive rbx_egress_ahead_wait. */
void rbx_egress_ahead_start(rbx_egress_ahead *ahead, const rbx_egress_plan *plan);
/* Waits for it to end; again, or after no start (zeroed), returns at once. */
void rbx_egress_ahead_wait(rbx_egress_ahead *ahead);

#endif
