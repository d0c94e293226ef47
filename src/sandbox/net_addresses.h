/* The sandbox's side of the user-mode network: tap0's address, the
 * gateway that leads out (libslirp's, in runbox-net) and the MTU. runbox
 * configures tap0 with them (sandbox/net.c), runbox-net
 * (sandbox/net_relay.c) serves the same network. Plain text and numbers:
 * runbox-net includes nothing else of runbox. */
#ifndef RBX_NET_ADDRESSES_H
#define RBX_NET_ADDRESSES_H

#define RBX_NET_TAP "tap0"
#define RBX_NET_MTU 65520
#define RBX_NET_NETWORK "10.0.2.0"
#define RBX_NET_NETMASK "255.255.255.0"
#define RBX_NET_ADDRESS "10.0.2.100" /* the sandbox's */
#define RBX_NET_GATEWAY "10.0.2.2"   /* the host, as libslirp shows it (not its loopback) */

#endif
