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

/* A sandbox's tap and, from its first frame on, the runbox-net relaying
 * it (net_wake.c); zeroed: none. */
typedef struct rbx_net_helper {
    struct rbx_net_link *link;
} rbx_net_helper;

/* Child side: brings the namespace's loopback up (no allocation). */
int rbx_net_loopback_up(void);

/* Parent side: runs work(arg) on this thread in the network namespace of
 * the sandbox (its init's pidfd), and comes back (or aborts: nothing may
 * go on in a sandbox's network). work's return, errno kept. */
int rbx_net_in_sandbox(int sandbox_pidfd, int (*work)(void *arg), void *arg);

/* Parent side: deletes tap0 of the sandbox's network namespace (its
 * helper stopped: a checkpoint, checkpoint.h). 0 or -1 with errno. */
int rbx_net_tap_remove(int sandbox_pidfd);

/* Parent side: makes and configures tap0 in the network namespace of the
 * sandbox (its init's pidfd), from here; its fd, or -1 with err. */
int rbx_net_tap(int sandbox_pidfd, rbx_error *err);
/* net_wake.c: connects the tap to the outside (and takes tap either way):
 * runbox-net starts with it when the sandbox sends its first frame. Most
 * programs never do (names go to runbox's resolver on the sandbox's own
 * loopback), and pay for no relay; the first frame waits in the tap's
 * queue while runbox-net starts. */
rbx_status rbx_net_helper_start(int tap, rbx_net_helper *helper, rbx_error *err);
/* Stops runbox-net, or forgets the tap it never needed; helper zeroed. */
void rbx_net_helper_stop(rbx_net_helper *helper);
/* net.c, for net_wake.c: runbox-net started on tap (fd 3) with the read end
 * of a new pipe as its fd 4 (*exit_fd the write end: closing it stops
 * runbox-net). Returns 0 or an errno. */
int rbx_net_relay_spawn(int tap, pid_t *pid, int *exit_fd);
/* Kills it and leaves its reaping for later (rbx_net_reap). */
void rbx_net_relay_stop(pid_t pid, int exit_fd);
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
