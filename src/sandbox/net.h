#include "runbox.h"

#include <sys/types.h>
/* The sandbox's network. Every execution gets its own network namespace.
 * Off: only loopback. On: slirp4netns gives it a user-mode NAT to the
 * outside, with the host's loopback unreachable (runbox's own API listens
 * there). */
#ifndef RBX_NET_H
#define RBX_NET_H

#define RBX_SLIRP4NETNS "/usr/bin/slirp4netns"
/* runbox's resolver (sandbox/egress_dns.h), on the sandbox's own loopback:
 * names are resolved under the egress policy, not by the network helper. */
#define RBX_SANDBOX_NAMESERVER "127.0.0.53"

typedef enum rbx_net_mode {
    RBX_NET_LOOPBACK, /* a network namespace with only loopback */
    RBX_NET_OUTSIDE,  /* ... connected to the outside, host loopback unreachable */
    RBX_NET_HOST,     /* the host's own network (an operator's choice for installs) */
} rbx_net_mode;

typedef struct rbx_net_helper {
    pid_t pid;
    int exit_fd;  /* closing it makes slirp4netns exit */
    int ready_fd; /* readable once the interface is configured; -1 after */
} rbx_net_helper;

/* Child side: brings the namespace's loopback up (no allocation). */
int rbx_net_loopback_up(void);

/* Parent side: starts connecting the network namespace of sandbox_pid to
 * the outside; rbx_net_helper_wait_ready waits until its interface is
 * configured (meanwhile the sandbox can build its root). */
rbx_status rbx_net_helper_start(pid_t sandbox_pid, rbx_net_helper *helper, rbx_error *err);
rbx_status rbx_net_helper_wait_ready(rbx_net_helper *helper, rbx_error *err);
void rbx_net_helper_stop(rbx_net_helper *helper);
/* Reaps the stopped helpers that have finished exiting, without waiting for
 * the others: called when the engine goes away. A killed helper takes
 * ~25 ms more to exit (the kernel tears its tap device down); a `runbox
 * run` that waited for it would return that much later. It is killed and
 * holds nothing by then; once runbox exits, init reaps it like any orphan. */
void rbx_net_reap(void);
/* Whether the helper is installed (for runbox check and clear errors). */
bool rbx_net_helper_available(void);

#endif
