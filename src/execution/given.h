/* What every execution's program is given, whoever runs it (given.c). */
#ifndef RBX_EXECUTION_GIVEN_H
#define RBX_EXECUTION_GIVEN_H

#include "runbox.h"
#include "sessions/session.h"

/* The environment: the fixed list, the session's id, extra (NULL: none)
 * and the request's own variables (request NULL: none). */
char **rbx_execution_env(const rbx_request *request, const rbx_session *session, const char *extra);
void rbx_execution_env_free(char **envp);
/* What a bootstrap reads on fd 3 (runtime.c): envp's entries (NULL: none,
 * the cold start's case), an empty entry, then the code; counted, the two
 * parts' lengths first and the entries as a script of exports instead.
 * malloc'ed. */
char *rbx_code_payload(const rbx_request *request, char *const *envp, bool counted, size_t *len);
/* Whether the request's code may reach outside hosts. */
bool rbx_execution_wants_network(const rbx_engine *engine, const rbx_request *request);
/* The result's egress_denied fields, from what the sandbox's policy refused. */
struct rbx_sandbox;
struct rbx_trace;
void rbx_execution_egress_result(struct rbx_sandbox *sandbox, rbx_result *result,
                                 struct rbx_trace *trace);
struct rbx_cgroup_limits rbx_execution_limits(const rbx_engine *engine, const rbx_request *request);

#endif
