/* The sandbox's system-call filter: a default-allow deny-list, in the spirit
 * of Docker's default profile, for the calls that reach past the sandbox
 * (kernel, mounts, namespaces, other processes, the terminal, the clock).
 *
 * The policy is in seccomp_policy.c, compiled into a BPF program when runbox
 * is built; it is installed in the child right before execve. */
#ifndef RBX_SANDBOX_SECCOMP_H
#define RBX_SANDBOX_SECCOMP_H

#include <stddef.h>

/* Whether this kernel can install filters: 0, or -1 with a message in why. */
int rbx_seccomp_available(char *why, size_t why_size);

/* The program's length, in BPF instructions. */
size_t rbx_seccomp_instructions(void);

/* Installs the program on the calling thread. Meant for the child after
 * PR_SET_NO_NEW_PRIVS, right before execve: async-signal-safe, no
 * allocation, one system call. Returns 0, or -1 with errno set. */
int rbx_seccomp_install(void);

#endif
