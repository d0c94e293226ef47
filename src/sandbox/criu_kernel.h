/* What of the kernel a checkpoint needs that `criu check` does not ask for
 * (checkpoint.c runs criu's dump of a kernel's sandbox): criu's dump reads
 * the tree's sockets through socket diagnostics and the network
 * namespace's connection tracking through ctnetlink, and fails without
 * either ("Diag module missing", "-22 reported by netlink") where `criu
 * check` passed. A kernel whose modules are installed loads them on the
 * first request; a minimal one (no modprobe, or built without them) does
 * not. */
#ifndef RBX_SANDBOX_CRIU_KERNEL_H
#define RBX_SANDBOX_CRIU_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the kernel answers a socket-diagnostics request (NETLINK_SOCK_DIAG)
 * for a family and, for AF_INET, a protocol: 0, or -errno (-ENOENT: no
 * module serves it, e.g. unix_diag or tcp_diag not loaded). */
int rbx_criu_socket_diag(int family, int protocol);

/* Whether ctnetlink answers (per-CPU statistics, which list no
 * connection): 0, or -errno (-EINVAL: no nf_conntrack_netlink). */
int rbx_criu_conntrack(void);

/* True when one of them is missing; why then says which, and the module. */
bool rbx_criu_kernel_gap(char *why, size_t size);

#endif
