/* The local sockets: how a short-lived `runbox` reaches the kernels of a
 * long-lived one (stateful sessions). Unix sockets in the state directory
 * that only its owner's uid may open (mode 0600, and the peer's
 * credentials are checked): <state>/runbox.sock, served by a running
 * `runbox serve`, and <state>/daemon-<key>.sock, one per configuration of
 * `runbox daemon` (key: a digest of every option it was started with),
 * which the CLI starts on demand and which exits once its last kernel is
 * gone. A CLI's calls go only to a process configured as it is.
 *
 * One request per connection, a line of JSON; the answer is lines of JSON:
 *   {"op": "execute", "request": {...as HTTP's POST /v1/execute...},
 *    "config": the caller's rbx_engine_fingerprint}
 *       (code that is not UTF-8 as "code_bytes", see below)
 *       -> the stream's events ({"type": "stdout" | "stderr" | "display"}),
 *          then {"type": "result", ...} or {"type": "error", ...}
 *       A process configured otherwise than "config" says declines the
 *       call ({"type": "declined"}): the CLI runs a one-off run itself,
 *       and takes a stateful call to its own configuration's daemon.
 *   {"op": "restart", "session_id": ID, "language": L or null}
 *       -> {"type": "restarted", "stopped": N} (an error answer, as when
 *          another process holds one of its kernels, has "stopped" too)
 *   {"op": "remove", "session_id": ID, "wait": SECONDS}
 *       -> {"type": "removed"}
 *   {"op": "ping"} -> {"type": "pong", "pid": N, "options": [...]}
 *       (options: those a daemon was started with, as argv, so that a CLI
 *       can say which of its own differ)
 *   {"op": "stop"} -> {"type": "stopping"}: a daemon exits (its kernels go);
 *       runbox serve refuses (stop it as a server)
 * A process that is closing (a daemon gone idle, a server stopping)
 * answers any connection it did not take before with {"type": "closing"},
 * having read nothing of it: the client connects again.
 * Errors: {"type": "error", "status": "invalid" | "not_found" | "busy" |
 * "system" | "no_space", "message": ...}. The client hanging up cancels
 * its execution. */
#ifndef RBX_LOCAL_H
#define RBX_LOCAL_H

#include "runbox.h"

#include <jansson.h>
#include <stdbool.h>

#define LOCAL_SOCKET "runbox.sock"
/* A daemon's: LOCAL_DAEMON_PREFIX, its key (16 hex digits), LOCAL_DAEMON_SUFFIX. */
#define LOCAL_DAEMON_PREFIX "daemon-"
#define LOCAL_DAEMON_SUFFIX ".sock"
/* The longest request line: a program of 1 MiB, escaped as JSON. */
#define LOCAL_MAX_LINE ((size_t)8 << 20)

typedef struct local_server local_server;

/* Binds <state_dir>/runbox.sock unless a live runbox owns it already
 * (then returns -1 and sets *owner_pid to its pid, or 0 when unknown).
 * A socket left by a runbox that died is replaced. */
int local_listen(const char *state_dir, int *owner_pid, char *why, size_t why_size);
/* The same for the socket <state_dir>/<name>. */
int local_listen_at(const char *state_dir, const char *name, int *owner_pid, char *why,
                    size_t why_size);
/* Connects to <state_dir>/<name>; -1 with errno when nobody serves it. */
int local_connect(const char *state_dir, const char *name);
/* Serves the socket on a thread of its own (one more per connection). */
local_server *local_server_start(rbx_engine *engine, int listen_fd, bool stoppable);
/* What "ping" answers as "options" (stolen; before serving starts). */
void local_server_set_options(local_server *server, json_t *options);
/* Whether a "stop" came (for a daemon), waiting for one at most wait_ms. */
bool local_server_stop_asked(local_server *server, int wait_ms);
/* Connections served now, and when the last one ended (monotonic ms). */
bool local_server_idle(local_server *server, int64_t *since_ms);
/* Takes no call any more, if none was served since since_ms (as
 * local_server_idle said it) and none is now; then every connection is
 * answered "closing". Whether it closes. */
bool local_server_close_if_idle(local_server *server, int64_t since_ms);
/* Takes no new call: each connection from now on is answered "closing". */
void local_server_close(local_server *server);
/* Waits until no connection is served, or until until_ms (monotonic);
 * whether none is. */
bool local_server_wait_idle(local_server *server, int64_t until_ms);
/* Stops accepting (a connection not yet taken is answered "closing"),
 * cancels what runs, waits for its connections. */
void local_server_stop(local_server *server);

/* Code that is not UTF-8 on the socket: "code_bytes" in the request, a
 * string of code points U+0000 to U+00FF, one per byte (bytes.c). From
 * JSON, a string holding the bytes themselves (jansson keeps any bytes in
 * a string made without its UTF-8 check), or NULL when value is not such
 * a string. */
json_t *local_bytes_to_json(const char *data, size_t len);
json_t *local_bytes_from_json(json_t *value);

/* What a status is called on the socket, and back. */
const char *local_status_name(rbx_status status);
rbx_status local_status_from_name(const char *name);

#endif
