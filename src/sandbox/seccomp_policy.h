/* The build tool runbox-seccomp-compile (seccomp_policy.c): the policies it
 * compiles, each a set of libseccomp rules over an allow-by-default filter. */
#ifndef RBX_SECCOMP_POLICY_H
#define RBX_SECCOMP_POLICY_H

#include <seccomp.h>
#include <stdint.h>

/* One rule for the system call called name; a name this architecture lacks
 * is skipped. 0, or -1 after saying why on stderr. */
int rbx_policy_add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name,
                        unsigned int arg_cnt, const struct scmp_arg_cmp *args);

/* runbox-net's policy (net_relay_policy.c). */
int rbx_relay_policy_rules(scmp_filter_ctx ctx);

#endif
