/* Sessions (session.c): taking one for an execution, making one, naming
 * what goes to the trash. */
#ifndef RBX_SESSIONS_SESSION_H
#define RBX_SESSIONS_SESSION_H

#include "runbox.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct rbx_session {
    char id[RBX_SESSION_ID_MAX + 1];
    bool one_off;
    int lock_fd;
    int dir_fd;           /* the session's root directory */
    char work_path[4400]; /* empty for a one-off run */
} rbx_session;

/* Takes the session within wait_s (or until cancel_fd, if not -1, becomes
 * readable), creating it on first use. */
rbx_status rbx_session_acquire(rbx_engine *engine, const char *id, double wait_s, int cancel_fd,
                               rbx_session *session, rbx_error *err);
void rbx_session_release(rbx_engine *engine, rbx_session *session);

/* Names an entry of the sessions' trash: "<kind>-<pid>-<random>". */
void rbx_trash_name(char *out, size_t size, const char *kind);
/* Makes a complete session directory (lock, work/) named temp in the
 * sessions' trash, created at `created`; *dir_out is its fd. The caller
 * renames it into place. Returns 0 or -1 with errno. */
int rbx_session_build(rbx_engine *engine, const char *temp, int64_t created, int *dir_out);

/* An O_PATH fd of an existing session's work directory. */
rbx_status rbx_session_work_fd(rbx_engine *engine, const char *id, int *fd, rbx_error *err);

#endif
