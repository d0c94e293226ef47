/* A session's files as the host reaches them (files.c). */
#ifndef RBX_SESSIONS_FILES_H
#define RBX_SESSIONS_FILES_H

#include "runbox.h"

#include <stdbool.h>

/* files.c: the directories leading to a session file path, made beneath
 * work (owned by the sandbox's user) when create; an fd of the last one,
 * *name pointing at the path's last component. -1 with errno. */
int rbx_files_open_parent(rbx_engine *engine, int work, const char *path, bool create,
                          const char **name);

/* files.c: path checked (rbx_file_path_check), then the directory holding
 * it opened beneath the session's directory without following links (made
 * when create, as rbx_files_open_parent); *dir an fd of it to close,
 * *name the path's last component. */
rbx_status rbx_files_open_holder(rbx_engine *engine, const char *session_id, const char *path,
                                 bool create, int *dir, const char **name, rbx_error *err);

/* files.c: whether a session file path is acceptable (relative, no "..",
 * ".", empty or control-character components, bounded length and depth). */
rbx_status rbx_file_path_check(const char *path, rbx_error *err);

/* files.c: the engine's error for errno after a path was refused or not
 * found (ENOENT, a link or a way out, a socket, a full disk...). */
rbx_status rbx_files_refused(const char *path, rbx_error *err);

/* file_tree.c: fills e from name in dir ("" for dir itself), never
 * following it; rel is its session path. -1 with errno. */
int rbx_files_fill_entry(bool is_root, int dir, const char *name, const char *rel,
                         rbx_file_entry *e);

/* The names of rbx_file_put's temporaries (renamed over the file once
 * written), which watches leave out. */
#define RBX_FILES_UPLOAD_PREFIX ".rbx-upload-"

#endif
