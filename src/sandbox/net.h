#include "runbox.h"

#include <sys/types.h>
/* The sandbox's network. Every execution gets its own network namespace.
 * Off: only loopback. On: a tap device, tap0, whose frames runbox-net
 * (sandbox/net_relay.c, libslirp) relays as a user-mode NAT to the
 * outside, with the host's loopback unreachable (runbox's own API listens
 * there). */
#ifndef RBX_NET_H
#define RBX_NET_H

/* The helper program, beside runbox (rbx_net_helper_path). */
#define RBX_NET_HELPER "runbox-net"
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
    int exit_fd; /* closing it makes runbox-net exit */
} rbx_net_helper;

/* Child side: brings the namespace's loopback up (no allocation). */
int rbx_net_loopback_up(void);

/* Parent side: makes and configures tap0 in the network namespace of the
 * sandbox (its init's pidfd), from here; its fd, or -1 with err. */
int rbx_net_tap(int sandbox_pidfd, rbx_error *err);
/* Connects the tap to the outside: starts runbox-net with it (and closes
 * tap here either way). Nothing waits for runbox-net: frames the program
 * sends before it reads them wait in the tap's queue. */
rbx_status rbx_net_helper_start(int tap, rbx_net_helper *helper, rbx_error *err);
void rbx_net_helper_stop(rbx_net_helper *helper);
/* Reaps the stopped helpers that have finished exiting, without waiting for
 * the others: called when the engine goes away. A killed helper takes
 * ~25 ms more to exit (the kernel tears its tap device down); a `runbox
 * run` that waited for it would return that much later. It is killed and
 * holds nothing by then; once runbox exits, init reaps it like any orphan. */
void rbx_net_reap(void);
/* Whether the helper is installed (for runbox check and clear errors). */
bool rbx_net_helper_available(void);
/* Where it is looked for: runbox-net beside the running program; "" when
 * that cannot be told. */
const char *rbx_net_helper_path(void);

#endif
