/* Stateful sessions: the engine's kernels, one per session and language,
 * each a long-lived sandbox (sandbox/kernel.h) holding a live interpreter.
 * A kernel starts with its session's first stateful call, serves its calls
 * one at a time (the session's lock orders them with stateless runs), is
 * stopped when it stays idle too long, when its session goes, or to make
 * room for another under the cap (the least recently used idle one first).
 *
 * A kernel outlives the thread of the call that started it: each has a
 * thread of its own, which starts its sandbox (so the sandbox's parent
 * death signal and its user namespace's owner are that thread's) and stops
 * it. Other runbox processes on the state directory see it through a lock
 * file in its session (<session>/kernel-<language>.lock): held while it
 * lives, naming its process, last touched when its last call ended. */
#ifndef RBX_KERNELS_H
#define RBX_KERNELS_H

#include "base/trace.h"
#include "envs/deps.h"
#include "languages/runtime.h"
#include "runbox.h"
#include "sessions/session.h"

#include <pthread.h>

typedef struct rbx_kernels rbx_kernels;

rbx_kernels *rbx_kernels_new(void);
/* Stops every kernel of the engine. */
void rbx_kernels_free(rbx_engine *engine);

/* One stateful call, in a session already taken by the caller. */
typedef struct rbx_kernel_call {
    const rbx_request *request;
    const rbx_runtime *runtime;
    struct rbx_root *root; /* the image it runs on */
    const rbx_session *session;
    const rbx_env *env; /* the requirements' environment, or NULL */
    double timeout_s;   /* what is left of the request's */
    double asked_s;     /* the request's own, for messages */
    int kill_fd;        /* rbx_session_cancel's */
    rbx_output_fn on_output;
    void *user;
    rbx_trace *trace;
} rbx_kernel_call;

rbx_status rbx_kernel_run(rbx_engine *engine, const rbx_kernel_call *call, rbx_result *result,
                          rbx_error *err);

/* Stops this engine's kernels of the session (of language, or all with
 * NULL); returns how many. */
size_t rbx_kernels_stop_session(rbx_engine *engine, const char *session_id, const char *language);
/* Fills info's kernels from the lock files in the session's directory. */
void rbx_kernels_describe(int session_dirfd, bool session_busy, rbx_session_info *info);
/* For moves (carry.c), in a session's directory the caller holds: whether
 * its kernel of language hibernated (no process holds it, and its lock
 * file says so); and a carried one's lock file written: hibernated, its
 * images bytes large, or (lost_why) a tombstone whose reason the next call
 * gives. 0 or -1 with errno. */
bool rbx_kernel_hibernated_in(int session_dir, const char *language);
int rbx_kernel_mark_carried(int session_dir, const char *language, uint64_t bytes,
                            const char *lost_why);
/* A live kernel of another process in the session: its pid, or 0. */
int rbx_kernels_foreign_owner(rbx_engine *engine, int session_dirfd);

#endif
