/* envd's files (../shared/E2B-SANDBOX-PROTOCOL.md sections 3 to 5): what
 * e2b_envd.c's routes call, and what its modules share.
 *
 * The sandbox's view: runbox's session directory is /home/user inside the
 * sandbox (E2B_DEFAULT_CWD), and it is all of the sandbox's filesystem that
 * envd serves here. Relative paths resolve against /home/user for both of
 * E2B's users ("user" and "root": a runbox sandbox has one user, so root's
 * relative paths land in /home/user too), "~" is /home/user, ".." is
 * resolved by the path's text first and may not climb out, and an absolute
 * path elsewhere (/etc, /tmp, /root) is refused with permission_denied
 * (403). Below that, the engine resolves every path beneath the session
 * directory without following links (rbx_file_*). */
#ifndef RBX_HTTP_E2B_ENVD_H
#define RBX_HTTP_E2B_ENVD_H

#include "http/http.h"

/* e2b_envd_view.c: paths, users and entries as envd shows them. */
#define E2B_PATH_MAX 4096

/* The session path (relative; "" for /home/user itself) of a path as the
 * SDK sends it; false with err (400, or 403 outside /home/user). */
bool e2b_envd_path(const char *given, char *rel, size_t size, http_error *err);
/* The same for a JSON string field of a request ("path", "source"...). */
bool e2b_envd_path_field(json_t *body, const char *field, char *rel, size_t size,
                         http_error *err);
/* E2B's user of a request: the username query (files) or Authorization:
 * Basic base64("user:") (RPCs); "user" when none. Accepts "user" and
 * "root"; else 401, as envd answers a user it does not know. */
bool e2b_envd_user(struct MHD_Connection *connection, bool from_query, http_error *err);
/* The entry as envd's EntryInfo (JSON names as the SDKs read them). */
json_t *e2b_envd_entry_json(const rbx_file_entry *entry);
/* "/home/user" followed by the session path. */
void e2b_envd_shown_path(const char *rel, char *out, size_t size);
/* An engine error in envd's words: ENOENT is not_found (404), a path
 * through a link or out of the session invalid_argument (400), a full
 * disk 507 (the SDK's NotEnoughSpace; resource_exhausted in Connect). */
void e2b_envd_engine_error(http_error *err, const rbx_error *engine_err);

/* e2b_files.c: GET and POST /files. */
/* Whether the request is for /files by a signed URL (e2b_signed.c): its
 * signature, not its headers, names the sandbox. */
bool e2b_files_signed(const http_request *req);
enum MHD_Result e2b_handle_files_get(http_request *req);
enum MHD_Result e2b_handle_files_post(http_request *req);

/* e2b_filesystem.c: filesystem.Filesystem's unary methods. */
enum MHD_Result e2b_handle_fs_stat(http_request *req);
enum MHD_Result e2b_handle_fs_make_dir(http_request *req);
enum MHD_Result e2b_handle_fs_move(http_request *req);
enum MHD_Result e2b_handle_fs_list_dir(http_request *req);
enum MHD_Result e2b_handle_fs_remove(http_request *req);
enum MHD_Result e2b_handle_fs_unknown(http_request *req);
/* A unary call's own work: its answer to the request's message (body) in
 * the request's sandbox, or NULL with err. */
typedef json_t *e2b_fs_call(http_request *req, const e2b_sandbox_view *view, json_t *body,
                            http_error *err);
/* e2b_watch.c: runs every unary call of filesystem.Filesystem:
 * sweeps idle watchers, finds the request's sandbox, checks its user and
 * reads its message, then runs call and answers its message or error. */
enum MHD_Result e2b_fs_unary(http_request *req, e2b_fs_call *call);

/* e2b_watch.c: WatchDir (a server stream) and the polling watcher
 * (CreateWatcher, GetWatcherEvents, RemoveWatcher). Bounded per sandbox
 * and in all; a polling watcher nobody asks for goes after
 * E2B_WATCHER_IDLE_S (at the next filesystem call of any sandbox), and
 * every watcher goes with its sandbox's directory. */
#define E2B_WATCHES_PER_SANDBOX 8
/* Each holds an inotify instance (128 per user by default), and the
 * engine's inotify budget (file_watch.c, a quarter of the host's limits)
 * may refuse one sooner. */
#define E2B_WATCHES_MAX 64
#define E2B_WATCHER_IDLE_S 600
enum MHD_Result e2b_handle_fs_watch_dir(http_request *req);
enum MHD_Result e2b_handle_fs_create_watcher(http_request *req);
enum MHD_Result e2b_handle_fs_get_watcher_events(http_request *req);
enum MHD_Result e2b_handle_fs_remove_watcher(http_request *req);
/* Frees the polling watchers left idle (every filesystem call does). */
void e2b_watchers_sweep(void);
/* The control plane calls it when a sandbox is killed, paused or expires:
 * its watchers end (streams with unavailable). */
void e2b_watchers_sandbox_gone(const char *sandbox_id);

#endif
