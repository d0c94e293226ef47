/* The egress policy's first-use work, beside a sandbox's start (ahead.h). */
#include "egress/ahead.h"
#include "egress/dns.h"
#include "egress/rules.h"

static void *prepare(void *plan)
{
    rbx_egress_rules_prepare(plan);
    rbx_egress_guard_prepare();
    return NULL;
}

void rbx_egress_ahead_start(rbx_egress_ahead *ahead, const rbx_egress_plan *plan)
{
    ahead->running = false;
    /* Nothing to do ahead once done; a failure to start a thread only
     * leaves the work to its first use, where failures are reported. */
    if (!rbx_egress_rules_ready())
        ahead->running = pthread_create(&ahead->thread, NULL, prepare, (void *)plan) == 0;
}

void rbx_egress_ahead_wait(rbx_egress_ahead *ahead)
{
    if (ahead->running)
        pthread_join(ahead->thread, NULL);
    ahead->running = false;
}
