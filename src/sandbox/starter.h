/* Starting a sandbox's init without copying runbox (see starter.c).
 *
 * A starter is a thread of runbox that does nothing but clone. A sandbox's
 * init is cloned from one with CLONE_VM | CLONE_VFORK, as posix_spawn
 * starts a program: init runs in runbox's own memory, on a stack of its
 * own, and the starter thread sleeps in the kernel until init has executed
 * runbox-init (or died). Only a sleeping thread's thread-local storage
 * (errno, the stack guard) is shared, so nothing races; and the thread that
 * asked for the sandbox stays free to map init's users and to make its
 * network while init waits for them. */
#ifndef RBX_SANDBOX_STARTER_H
#define RBX_SANDBOX_STARTER_H

#include <stdbool.h>
#include <sys/types.h>

#include <linux/sched.h>

/* Whether this build has rbx_clone3_call (x86-64 and arm64): elsewhere
 * init is cloned as a copy of runbox, as it was before starters. */
bool rbx_starter_supported(void);

/* clone3(args) whose child runs fn(arg) on args->stack and exits with its
 * return value; returns in the parent as clone3 does (the child's pid, or
 * -1 with errno). The child must not return into any frame of the
 * parent's: this call has none it needs. */
long rbx_clone3_call(struct clone_args *args, int (*fn)(void *), void *arg);

typedef struct rbx_starter_job rbx_starter_job;

/* What a starter thread runs for the caller: it clones, with
 * rbx_clone3_call, CLONE_VM | CLONE_VFORK and CLONE_PARENT_SETTID into
 * job->pid, on the stacks rbx_starter_stacks gives, and returns the
 * child's pid or -1 with errno. The child calls rbx_starter_started(job)
 * before anything else. */
typedef pid_t (*rbx_starter_clone)(rbx_starter_job *job, void *arg);

/* A job's states, in order (starter.c). A job not begun is over. */
enum { RBX_STARTER_POSTED, RBX_STARTER_STARTED, RBX_STARTER_OVER };

struct rbx_starter_job {
    rbx_starter_clone clone;
    void *arg;
    int state; /* a futex word: see starter.c */
    pid_t pid; /* the child's, written by the kernel (CLONE_PARENT_SETTID) */
    int error; /* errno of a clone that failed */
    int stacks_left; /* the child and its own child are off the stacks */
};

/* Hands job to a starter thread. Returns the child's pid once it runs (it
 * has called rbx_starter_started), or -1 with errno when no thread could
 * be made (job->error stays 0: the caller may clone otherwise) or the
 * clone failed (job->error is errno); then the job is over. */
pid_t rbx_starter_begin(rbx_starter_job *job, rbx_starter_clone clone, void *arg);

/* In the child, before anything else: its pid is in place for the caller. */
void rbx_starter_started(rbx_starter_job *job);

/* In the child, just before it executes: neither it nor a child it
 * started (CLONE_VM) will use the starter's stacks again. */
void rbx_starter_stacks_left(rbx_starter_job *job);

/* Waits until the child no longer runs in runbox's memory (it executed a
 * program or ended), after which nothing it was handed is in use; at most
 * timeout_ms (< 0: no limit). False when it still runs then. */
bool rbx_starter_end(rbx_starter_job *job, int timeout_ms);

/* On a starter thread: its two stacks, one for the child it clones and
 * one for that child's own CLONE_VM child (the program, before it executes),
 * made once a thread, with a guard page below each. */
typedef struct rbx_starter_stacks {
    char *init, *program; /* lowest addresses */
    size_t size;          /* of each */
} rbx_starter_stacks;
rbx_starter_stacks rbx_starter_stacks_here(void);

#endif
