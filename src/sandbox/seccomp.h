/* The sandbox's system-call filter: a default-allow deny-list, in the spirit
 * of Docker's default profile, for the calls that reach past the sandbox
 * (kernel, mounts, namespaces, other processes, the terminal, the clock).
 *
 * It is compiled once in the parent, where allocating is allowed, and
 * installed in the child right before execve, where it is not. */
#ifndef RBX_SANDBOX_SECCOMP_H
#define RBX_SANDBOX_SECCOMP_H

#include <stddef.h>

/* Compiles the policy into a BPF program kept in memory, once per process
 * (later calls return the first outcome). Thread-safe. Returns 0, or -1
 * with a message in why. */
int rbx_seccomp_prepare(char *why, size_t why_size);

/* Installs the prepared program on the calling thread. Meant for the child
 * after PR_SET_NO_NEW_PRIVS, right before execve: async-signal-safe, no
 * allocation, one system call. Returns 0, or -1 with errno set (EINVAL if
 * rbx_seccomp_prepare has not succeeded). */
int rbx_seccomp_install(void);

#endif
