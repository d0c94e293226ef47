/* Processes (runbox.h's rbx_process_*): programs that run beside a
 * session's executions, each in a sandbox of its own, for as long as they
 * like. The registry and each process's life are in processes.c; each has
 * a thread of its own, which starts its sandbox (so that the sandbox's
 * parent-death signal is that thread's, as a kernel's is its keeper's) and
 * reads its output until nothing of it is left.
 *
 * A process does not hold its session's lock (an execution does, for its
 * length): run_code and commands run side by side. Its session is kept
 * from being removed under it another way: the process holds a shared
 * flock on <session>/processes.lock for its life, and removal first kills
 * this engine's processes of the session (through the engine's
 * session_holders), then takes that lock exclusively, which fails while
 * another runbox process has processes there. A process starting while
 * the session is removed waits for that lock and then finds its session
 * gone. */
#ifndef RBX_PROCESSES_H
#define RBX_PROCESSES_H

#include "runbox.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct rbx_processes rbx_processes;

rbx_processes *rbx_processes_new(void);
/* Kills every process of the engine, waits for them, frees the registry. */
void rbx_processes_free(rbx_engine *engine);
/* Kills this engine's processes of the session and waits for their end;
 * returns how many there were. */
size_t rbx_processes_stop_session(rbx_engine *engine, const char *session_id);
/* Pauses (paused true) or resumes this engine's running processes of the
 * session: a paused E2B sandbox's go to disk where they can (criu, as a
 * hibernated kernel: <session>/hibernated-process-<pid>/, in the
 * session's disk cap), their memory freed, else are frozen in memory;
 * either way they keep their memory, descriptors and terminals but run no
 * instruction until resumed, and cannot tell (a restored terminal is a new
 * one, with the old one's settings and size). One that is starting is
 * paused once it runs. One that can be neither is stopped, its end saying
 * why; one that cannot be restored ends so too. Returns how many were
 * paused (or resumed). */
size_t rbx_processes_pause_session(rbx_engine *engine, const char *session_id, bool paused);
/* Takes the session's processes.lock exclusively (*lock_fd, for the
 * caller to close once the session is gone), so that no process starts in
 * it meanwhile; false when another runbox process has processes there. */
bool rbx_processes_keep_out(int session_dirfd, int *lock_fd);

#endif
