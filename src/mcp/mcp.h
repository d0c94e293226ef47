/* runbox mcp: a Model Context Protocol server on stdio, one more thin front
 * end over the engine. Newline-delimited JSON-RPC 2.0 comes in on stdin and
 * goes out on stdout; a reader thread answers the protocol, worker threads
 * run tool calls, and one writer thread owns stdout. */
#ifndef RBX_MCP_H
#define RBX_MCP_H

#include "runbox.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define MCP_LATEST_VERSION "2025-11-25"
/* The stateless revision: no initialize, every request names its revision
 * in its _meta (envelope.c). */
#define MCP_STATELESS_VERSION "2026-07-28"
/* Tool calls that run at once; more wait in a queue of MCP_MAX_WAITING. */
#define MCP_MAX_CALLS 8
#define MCP_MAX_WAITING 64
/* The longest message read: room for the largest program (1 MiB) once
 * escaped as JSON, unless it is mostly control characters. */
#define MCP_MAX_LINE ((size_t)4 << 20)

/* JSON-RPC 2.0 error codes, and one of its server-defined range. */
enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    RPC_SERVER_BUSY = -32000,
    /* MCP 2026-07-28's: headers that contradict the body, a revision not served. */
    RPC_HEADER_MISMATCH = -32020,
    RPC_UNSUPPORTED_VERSION = -32022,
};

/* output.c: where the server's messages go: stdout (one writer thread),
 * or a transport's sink. */
typedef struct mcp_output mcp_output;
mcp_output *mcp_output_start(int fd);
/* Gets every message (stolen) on the thread that sends it; droppable for
 * progress, which a lagging client may lose. */
typedef void (*mcp_sink_fn)(void *context, json_t *message, bool droppable);
mcp_output *mcp_output_to(mcp_sink_fn sink, void *context);
/* Queues one message (a response or a notification); steals it. */
void mcp_output_send(mcp_output *output, json_t *message);
/* From now on every result sent says its resultType ("complete"), as MCP
 * 2026-07-28 wants. */
void mcp_output_type_results(mcp_output *output);
/* The same for progress, which is dropped while the client lags behind. */
void mcp_output_send_progress(mcp_output *output, json_t *message);
/* Writes what is queued (waiting at most drain_ms), then stops the writer
 * (a sink's output is only freed). */
void mcp_output_stop(mcp_output *output, int drain_ms);

/* jsonrpc.c: what a message is, and the replies. */
typedef enum rpc_kind { RPC_REQUEST, RPC_NOTIFICATION, RPC_RESPONSE, RPC_INVALID } rpc_kind;

typedef struct rpc_message {
    json_t *id;         /* borrowed; NULL for notifications and undetectable ids */
    const char *method; /* NULL for responses */
    json_t *params;     /* borrowed; NULL when absent */
} rpc_message;

/* Sorts a parsed message; for RPC_INVALID, why says what is wrong. */
rpc_kind rpc_read(json_t *json, rpc_message *message, char *why, size_t why_size);
/* Complete response messages; id is borrowed, result stolen. */
json_t *rpc_result(json_t *id, json_t *result);
json_t *rpc_error(json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
json_t *rpc_notification(const char *method, json_t *params);
/* A JSON string of any bytes: invalid UTF-8 becomes U+FFFD. */
json_t *rpc_text(const char *data, size_t len);
void rpc_reply(mcp_output *output, json_t *id, json_t *result);
void rpc_fail(mcp_output *output, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* tools.c: the tools, as tools/list shows them to a model. */
typedef enum mcp_tool_kind {
    MCP_TOOL_EXECUTE,
    MCP_TOOL_LIST_SESSIONS,
    MCP_TOOL_CLOSE_SESSION,
} mcp_tool_kind;

typedef struct mcp_tool {
    const char *name;
    mcp_tool_kind kind;
    const char *language;      /* executions: the runtime's canonical name */
    const char *code_argument; /* executions: "code", or "command" for bash */
} mcp_tool;

const mcp_tool *mcp_tool_find(const char *name);
/* The "tools" array of tools/list; its texts name the engine's limits. */
json_t *mcp_tools_describe(const rbx_config *config);

/* arguments.c: a call's arguments against its tool's inputSchema. */
bool mcp_arguments_check(const json_t *schema, const json_t *arguments, char *why, size_t size);

/* One tools/call request, from its arrival to its response. */
typedef struct mcp_call {
    json_t *id;
    const mcp_tool *tool;
    json_t *arguments;      /* checked against the tool's inputSchema */
    json_t *progress_token; /* NULL: the client wants no progress */
    int log_level;          /* MCP 2026-07-28: _meta's logLevel for this call, or -1 */
    int cancel_fd;          /* becomes readable when the call is cancelled */
    atomic_bool cancelled;  /* the client cancelled: nothing more is sent for it */
} mcp_call;

/* admit.c: checks a tools/call request and fills call (tool, arguments,
 * progress token); answers it and returns false when it does not pass. */
bool mcp_call_admit(mcp_output *output, const json_t *tools, json_t *id, json_t *params,
                    bool arguments_as_results, mcp_call *call);

/* toolrun.c: runs a call on the engine; returns its response message. */
json_t *mcp_tool_run(rbx_engine *engine, mcp_output *output, mcp_call *call);
/* A CallToolResult with isError: true and the message as its text. */
json_t *mcp_tool_error(const char *message);

/* progress.c: a running program's output as notifications/progress. */
typedef struct mcp_progress {
    mcp_output *output;
    mcp_call *call;
    uint64_t bytes;  /* output so far: the progress value */
    uint64_t budget; /* bytes still streamed; the result keeps the rest */
} mcp_progress;

void mcp_progress_init(mcp_progress *progress, mcp_output *output, mcp_call *call, uint64_t budget);
/* An rbx_output_fn: returns non-zero to stop a cancelled call's program. */
int mcp_progress_on_output(void *user, rbx_stream stream, const char *data, size_t len);

/* calls.c: tool calls on worker threads, their queue and cancellation. */
typedef struct mcp_calls mcp_calls;
mcp_calls *mcp_calls_start(rbx_engine *engine, mcp_output *output, json_t *tools);
/* Answers a tools/call request: refuses bad params at once, else queues
 * the call. Bad arguments become a tool error when arguments_as_results
 * (MCP 2025-11-25), else a -32602 protocol error (earlier revisions). */
void mcp_calls_accept(mcp_calls *calls, json_t *id, json_t *params, bool arguments_as_results);
/* notifications/cancelled: stops the call and suppresses its response. */
void mcp_calls_cancel(mcp_calls *calls, const json_t *request_id);
/* Turns to run code, when a transport shares the host with other work
 * (runbox serve: its --max-running and --max-queue). take blocks until the
 * call may run, or returns false (full, or the call was cancelled while it
 * waited); give_back follows each taken turn. */
typedef struct mcp_turns {
    bool (*take)(void *context, mcp_call *call);
    void (*give_back)(void *context);
    void *context;
} mcp_turns;
void mcp_calls_share(mcp_calls *calls, const mcp_turns *turns);
/* Cancels every call, waits for the workers, frees; false (nothing freed)
 * when a worker did not stop in time. */
bool mcp_calls_stop(mcp_calls *calls);

/* envelope.c: a request of MCP 2026-07-28 carries its own revision and
 * the client's capabilities in params._meta, and over HTTP repeats them in
 * headers (NULL on stdio). duplicated names a routing header sent twice. */
typedef struct mcp_envelope_headers {
    const char *version, *method, *name, *duplicated;
} mcp_envelope_headers;
/* 0 when the request may be served; else its JSON-RPC error code, why
 * the message, and *data the error's data (or NULL). */
int mcp_envelope_check(const char *method, const json_t *params,
                       const mcp_envelope_headers *headers, json_t **data, char *why,
                       size_t why_size);
/* Every revision runbox serves, newest first. */
json_t *mcp_supported_versions(void);

/* server.c: the reader loop. */
typedef struct mcp_client mcp_client;

typedef struct mcp_server {
    rbx_engine *engine;
    mcp_output *output;
    mcp_client *client; /* its subscriptions and log level (client.c) */
    mcp_calls *calls;
    json_t *tools;
    const char *version; /* the negotiated revision; NULL before initialize */
} mcp_server;
/* Serves MCP 2026-07-28, stateless, from now on: no initialize, every
 * request checked against its envelope, results marked complete. */
void mcp_server_go_stateless(mcp_server *server);

/* Serves until stdin ends or stop_fd becomes readable; returns 0, or 1
 * when the server could not start. in_fd and out_fd are the protocol. */
int mcp_serve(rbx_engine *engine, int in_fd, int out_fd, int stop_fd);

/* One MCP session behind any transport: messages in (parsed by the
 * transport), responses and notifications out through output. */
mcp_server *mcp_server_open(rbx_engine *engine, mcp_output *output);
void mcp_server_take(mcp_server *server, json_t *message);
/* Cancels its calls and frees it (not its output); false when a call did
 * not stop in time (then it is left allocated, and output in use). */
bool mcp_server_close(mcp_server *server);

/* lifecycle.c: initialize and ping, and server/discover of 2026-07-28. */
void mcp_answer_initialize(mcp_server *server, const rpc_message *request);
void mcp_answer_discover(mcp_server *server, const rpc_message *request);
/* A list or read result of 2026-07-28 says how long it may be cached
 * (ttlMs) and by whom (cacheScope); earlier revisions get result as is. */
void mcp_reply_cacheable(mcp_server *server, json_t *id, json_t *result, int ttl_ms);
void mcp_answer_ping(mcp_server *server, const rpc_message *request);

/* ---- Resources, subscriptions, logging and completion (issue 33) ----
 * Each session's regular files are resources; a client subscribes to them
 * (resources/subscribe, or a subscriptions/listen stream of MCP
 * 2026-07-28) and hears of changes, which are found by comparing a
 * session's file list before and after each tool call that ran in it. */
#define MCP_RESOURCE_PREFIX "runbox://sessions/"
#define MCP_RESOURCE_TEMPLATE "runbox://sessions/{session_id}/files/{+path}"
#define MCP_RESOURCES_PAGE 100                 /* resources/list entries per page */
#define MCP_RESOURCE_READ_MAX ((size_t)4 << 20) /* the largest file resources/read returns */
#define MCP_LINKS_MAX 16                       /* resource_link items in one tool result */
#define MCP_SNAPSHOT_MAX 10000                 /* files of a session compared after a call */
#define MCP_SUBSCRIPTIONS_MAX 256              /* resources/subscribe URIs per client */
#define MCP_LISTEN_MAX 16                      /* open subscriptions/listen streams per client */
#define MCP_URI_MAX 2048

/* JSON-RPC error of MCP: the URI names no resource. */
#define RPC_RESOURCE_NOT_FOUND (-32002)

/* resource_uri.c: URIs of session files, and what their content is. */
typedef enum mcp_uri_kind { MCP_URI_FILE, MCP_URI_FOREIGN, MCP_URI_INVALID } mcp_uri_kind;
/* The URI of a session's file (malloc'ed), its path percent-encoded. */
char *mcp_resource_uri(const char *session_id, const char *path);
/* Splits a URI of runbox's own into session id and decoded path;
 * MCP_URI_FOREIGN for another scheme, MCP_URI_INVALID (why says what) for
 * one that cannot name a file (.., encoded slashes, NUL...). */
mcp_uri_kind mcp_resource_uri_parse(const char *uri, char session_id[RBX_SESSION_ID_MAX + 1],
                                    char *path, size_t path_size, char *why, size_t why_size);
const char *mcp_mime_by_name(const char *path);                          /* NULL: unknown */
const char *mcp_mime_by_magic(const unsigned char *data, size_t len);    /* NULL: unknown */
/* Valid UTF-8 without NUL bytes: sent as text, not as a base64 blob. */
bool mcp_text_content(const char *data, size_t len);

/* client.c: what runbox knows of the client at the other end of one
 * output: its revision, subscriptions, listen streams and log level. The
 * workers that run tool calls know only the output they answer on, so
 * the client is found by its output (mcp_client is declared above). */
mcp_client *mcp_client_start(mcp_output *output);
/* NULL when none was started for this output. */
mcp_client *mcp_client_of(mcp_output *output);
void mcp_client_set_version(mcp_client *client, const char *version);
/* Ends open listen streams (their results are sent), then frees. */
void mcp_client_stop(mcp_client *client);
/* notifications/cancelled for a listen stream ends it, without a response. */
void mcp_client_cancel(mcp_client *client, const json_t *request_id);
bool mcp_client_subscribe(mcp_client *client, const char *uri, char *why, size_t why_size);
void mcp_client_unsubscribe(mcp_client *client, const char *uri);
/* A subscriptions/listen request: acknowledges it, or answers its error. */
void mcp_client_listen(mcp_client *client, json_t *id, const json_t *filter);
/* Tells the client what changed: updated for each subscribed URI in
 * changed, list_changed when files came or went. */
void mcp_client_notify(mcp_client *client, const json_t *changed_uris, bool list_changed);
/* MCP 2026-07-28 has no sessions: a change one request made is told to the
 * listen streams every other request of that revision holds open in this
 * process (which all came with the server's one token); a no-op for a
 * client of a handshake revision, whose session is its own. */
void mcp_client_notify_peers(mcp_client *client, const json_t *changed_uris, bool list_changed);
/* resource_link items go only to clients of 2025-06-18 and later. */
bool mcp_client_takes_links(mcp_client *client);
/* A client of a handshake revision is told the list changed once it has
 * asked for the list (resources/list): until then it holds none to renew. */
void mcp_client_set_listed(mcp_client *client);
/* Whether a change of session_id's files would be told to anyone: the
 * client, or (MCP 2026-07-28) a peer's listen stream, subscribed to one of
 * them or to the list's changes. */
bool mcp_client_watches(mcp_client *client, const char *session_id);

/* changes.c: a session's files before and after a tool call, listed only
 * when someone needs the changes; the listing after a call is kept as the
 * next call's before (of MCP_KEPT_MAX sessions, the last used). */
#define MCP_KEPT_MAX 8
typedef struct mcp_snapshot mcp_snapshot;
typedef struct mcp_file {
    char *path; /* relative to the session's directory */
    uint64_t size;
    int64_t modified_unix;
    bool hashed;   /* hash holds an FNV-1a of the content */
    uint64_t hash; /* a check for change, not for tampering */
} mcp_file;
/* The session's regular files (an empty snapshot when it does not exist),
 * without hashing anything: for listings, not for comparing. */
mcp_snapshot *mcp_snapshot_list(rbx_engine *engine, const char *session_id);
/* Its files, sorted by path. */
const mcp_file *mcp_snapshot_files(const mcp_snapshot *snapshot, size_t *count);
void mcp_snapshot_free(mcp_snapshot *snapshot);
/* The session's files before a call in it (the listing kept from the
 * last call, else a new one), or NULL when nobody needs what the call
 * changes: no resource_link items are wanted (links false, or a client
 * that takes none) and mcp_client_watches says no. */
mcp_snapshot *mcp_changes_before(rbx_engine *engine, mcp_output *output, const char *session_id,
                                 bool links);
/* Compares before (NULL: nothing to do) with the session's files now:
 * notifies the output's client, keeps the new listing for the next call,
 * and returns the resource_link items (at most MCP_LINKS_MAX, the rest
 * counted in a text item) of files created or changed, or NULL when none.
 * Frees before. */
json_t *mcp_changes_report(rbx_engine *engine, mcp_output *output, const char *session_id,
                           mcp_snapshot *before);

/* logging.c: notifications/message for the server's own events. */
typedef enum mcp_log_level {
    MCP_LOG_DEBUG, MCP_LOG_INFO, MCP_LOG_NOTICE, MCP_LOG_WARNING,
    MCP_LOG_ERROR, MCP_LOG_CRITICAL, MCP_LOG_ALERT, MCP_LOG_EMERGENCY,
    MCP_LOG_OFF, /* before logging/setLevel: nothing is sent */
} mcp_log_level;
/* The level of a name ("warning"), or -1. */
int mcp_log_level_of(const char *name);
void mcp_client_set_log_level(mcp_client *client, mcp_log_level level);
mcp_log_level mcp_client_log_level(mcp_client *client);
/* Sends {event, message, ...fields} at level when the client asked for it:
 * with logging/setLevel, or (MCP 2026-07-28) with the logLevel in the
 * _meta of the request it concerns, request_level (-1: none). Steals
 * fields (an object or NULL). */
void mcp_log(mcp_output *output, int request_level, mcp_log_level level, const char *event,
             json_t *fields, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The level a request's _meta asks for, or -1. */
int mcp_log_level_requested(const json_t *meta);

/* The methods, for server.c's table. resources.c: */
void mcp_answer_resources_list(mcp_server *server, const rpc_message *request);
void mcp_answer_resource_templates(mcp_server *server, const rpc_message *request);
void mcp_answer_resources_read(mcp_server *server, const rpc_message *request);
void mcp_answer_resources_subscribe(mcp_server *server, const rpc_message *request);
void mcp_answer_resources_unsubscribe(mcp_server *server, const rpc_message *request);
void mcp_answer_subscriptions_listen(mcp_server *server, const rpc_message *request);
/* logging.c and completion.c: */
void mcp_answer_logging_set_level(mcp_server *server, const rpc_message *request);
void mcp_answer_completion(mcp_server *server, const rpc_message *request);

#endif
