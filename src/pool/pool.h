/* Prepared sandboxes: one-off executions served from a warm pool. A
 * long-lived runbox (serve, mcp, the CLI's daemon) keeps sandboxes ready
 * ahead of demand: namespaces made, root built, cgroup created, scratch
 * space made, network and egress rules in place, and the interpreter
 * started and blocked reading its first input (runtime.c's bootstrap), with
 * nothing of any user's code in it. An execution takes one, gets its own
 * session's directory mounted as the home, its limits written to the
 * cgroup, and hands over its environment and code; the bootstrap applies
 * the environment, steps into the home and runs the code exactly as a cold
 * start would.
 *
 * A prepared sandbox serves one execution and is destroyed: never reused.
 * Each lives on a thread of its own (its keeper), which made it (so its
 * user namespace is owned by a uid of its own and it dies with the thread,
 * as every sandbox does) and tears it down after its execution, off the
 * request's path. A manager thread sizes the pool per shelf (language,
 * network and, for requests with requirements, dependency environment) to
 * demand: a shelf found empty grows, a shelf not taken from
 * for a while shrinks, every sandbox is replaced when it gets old, and the
 * memory the waiting sandboxes hold stays under the operator's cap. An
 * execution never waits for the pool: an empty shelf means a cold start. */
#ifndef RBX_POOL_H
#define RBX_POOL_H

#include "engine/engine.h"
#include "envs/deps.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sandbox/sandbox.h"

typedef struct rbx_pool rbx_pool;

/* One prepared sandbox, as the execution that took it sees it. */
typedef struct rbx_pooled {
    rbx_sandbox sandbox;
    int code_fd;               /* runbox's end of the bootstrap's fd 3 (a socket) */
    uint64_t cpu_usec_at_take; /* the interpreter's start, not the execution's */
} rbx_pooled;

/* Starts the pool's manager for the engine (engine->pool). Returns NULL
 * with why when the pool is turned off or cannot work here. */
rbx_pool *rbx_pool_start(rbx_engine *engine, char *why, size_t why_size);
/* Destroys every prepared sandbox and waits for the keepers. */
void rbx_pool_stop(rbx_pool *pool);

/* A prepared sandbox of this language, network choice and dependency
 * environment (NULL: none), or NULL: the shelf was empty (it grows for
 * next time). Never waits. */
rbx_pooled *rbx_pool_take(rbx_pool *pool, const rbx_runtime *runtime, bool network,
                          const rbx_env *env);
/* The execution is over (or never began): its keeper destroys it. */
void rbx_pool_done(rbx_pool *pool, rbx_pooled *pooled);

/* Zeroes when pool is NULL. */
void rbx_pool_stats_get(rbx_pool *pool, rbx_pool_stats *stats);

#endif
