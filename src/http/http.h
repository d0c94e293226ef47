/* runbox serve: the HTTP front end, one more thin layer over the engine.
 *
 * libmicrohttpd runs one thread per connection, so a handler may block for
 * the length of an execution and a slow client holds only its own thread.
 * Each execution gets a thread on the server, which runs it through the
 * engine and feeds its events to the connection's thread; that thread
 * watches the client's socket meanwhile, so a client that goes away
 * cancels its execution at once.
 *
 * One file per concern: serve (the command), options, server (the daemon
 * and the life of a request), routes, reply (JSON and errors), body, auth,
 * admission (the limit and the queue), execution (its life on the server),
 * run (through the engine), events (the queue of its events), stream
 * (streaming responses), execute, sessions, files, metrics, log, watchdog
 * (slow clients); GET /openapi.json serves docs/openapi.json, embedded at
 * build time. With --e2b-listen a second listener speaks E2B's
 * code-interpreter protocol over the same engine and limits: e2b (its
 * routes and events) and e2b_contexts (its contexts, which are sessions
 * with a kernel); and E2B's control plane: e2b_control (its routes),
 * e2b_create (the create body), e2b_list, e2b_describe (what the SDKs
 * read), e2b_sandboxes (the registry) and e2b_lifecycle (kill, pause, and
 * the reaper of expired sandboxes); and envd (e2b_envd.h). /mcp serves
 * MCP's Streamable HTTP transport: mcp_route, mcp_sessions, mcp_exchange
 * (mcp_http.h). */
#ifndef RBX_HTTP_H
#define RBX_HTTP_H

#include "cli/cli.h"
#include "api/base64.h"

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

static inline int64_t http_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* pthread_cond_timedwait for at most ms milliseconds (its clock is the
 * wall clock; callers re-check their own monotonic deadlines). */
static inline void http_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cond, lock, &until);
}

/* options.c: what `runbox serve` was asked to do. */
typedef struct serve_options {
    const char *listen;        /* ADDR:PORT, default 127.0.0.1:8080 */
    unsigned max_running;      /* executions at once, default 2 x cores */
    unsigned max_queue;        /* waiting behind them, default 64 */
    const char *token_file;    /* NULL: RUNBOX_TOKEN, or no token */
    size_t max_body;           /* request bodies (and uploads), default 10 MiB */
    size_t max_download;       /* file downloads, default 100 MiB */
    double grace_s;            /* how long running work may finish on SIGTERM, default 30 */
    unsigned client_timeout_s; /* idle or trickling clients are dropped, default 30 */
    unsigned header_timeout_s; /* for a request's head to come in, default 10 */
    unsigned max_connections;  /* open at once over all listeners, default 1024 */
    unsigned max_per_address;  /* of them from one address (IPv6: one /64), default 256 */
    const char *e2b_listen;    /* ADDR:PORT for E2B's protocol; NULL: not served */
    unsigned mcp_max_sessions;    /* MCP sessions at /mcp at once, default 256 */
    unsigned mcp_max_per_address; /* of them from one address, default 32 */
    unsigned mcp_idle_s;          /* an unused MCP session ends after, default 600 */
} serve_options;

/* Parses argv; returns -1 to go on, else the exit code (--help, usage error). */
int http_options_parse(int argc, char **argv, serve_options *options, cli_globals *globals);

/* log.c: one JSON object per line on stderr, "time" first. */
json_t *http_log_event(const char *event);
void http_log_emit(json_t *line); /* steals line */
/* A JSON string of any bytes: invalid UTF-8 becomes U+FFFD. */
json_t *http_json_text(const char *data, size_t len);

/* admission.c: at most max_running executions, a FIFO of max_queue behind. */
typedef struct admission_ticket {
    struct admission_ticket *next;
    bool admitted;
} admission_ticket;

typedef struct admission {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned running, queued, max_running, max_queue;
    bool closed; /* shutting down: nobody in the queue gets a turn */
    admission_ticket *head, *tail;
} admission;

typedef enum admission_verdict { ADMIT_RUN, ADMIT_QUEUED, ADMIT_FULL } admission_verdict;

void http_admission_init(admission *a, unsigned max_running, unsigned max_queue);
void http_admission_destroy(admission *a);
/* Never blocks: runs now, takes a place in the queue, or is refused. */
admission_verdict http_admission_enter(admission *a, admission_ticket *ticket);
/* Waits for a queued ticket's turn; false (and out of the queue) once
 * *cancelled becomes non-zero. Wake waiters with http_admission_wake. */
bool http_admission_wait(admission *a, admission_ticket *ticket, const atomic_int *cancelled);
void http_admission_wake(admission *a);
/* The same while wanted(arg) says so (asked every 100 ms). */
bool http_admission_wait_while(admission *a, admission_ticket *ticket, bool (*wanted)(void *),
                               void *arg);
/* Shutdown: the queue is given up (its executions never run). */
void http_admission_close(admission *a);
/* An admitted execution ended: the next in the queue runs. */
void http_admission_leave(admission *a);
void http_admission_counts(admission *a, unsigned *running, unsigned *queued);

/* metrics.c */
typedef struct metrics metrics;
metrics *http_metrics_new(void);
void http_metrics_free(metrics *m);
/* An execution that produced a result; outcome is its error_type, or "ok". */
void http_metrics_execution(metrics *m, const char *language, const char *outcome,
                            int64_t duration_ms);
void http_metrics_install(metrics *m);
void http_metrics_response(metrics *m, unsigned status);

/* head.c: a request's head (request line and headers), checked before
 * libmicrohttpd reads it. Larger heads, or more headers, are refused with
 * 431 (414 when the request line alone is too long). */
#define HTTP_HEAD_MAX (32 * 1024)
#define HTTP_HEADERS_MAX 100
typedef enum head_verdict { HEAD_INCOMPLETE, HEAD_COMPLETE, HEAD_INVALID } head_verdict;
struct http_error;
/* HEAD_COMPLETE sets *head_len; HEAD_INVALID sets err (a JSON error). */
head_verdict http_head_check(const char *data, size_t len, size_t *head_len,
                             struct http_error *err);

/* gate.c: every connection of every listener waits in one thread, costing
 * no more than its socket, until its request's head is in; then it goes
 * to the listener's MHD daemon. The gate bounds what clients hold (see
 * gate.c): connections per address, a deadline for the head, and a total
 * cap at which the connection that has waited longest is closed. */
typedef struct gate gate;
typedef struct gate_stats {
    unsigned waiting; /* in the gate: their head not yet in */
    unsigned served;  /* handed to MHD: a request being read or answered */
    unsigned addresses;
    uint64_t refused_per_address, refused_full, evicted, timed_out, invalid_head;
} gate_stats;

gate *http_gate_new(const serve_options *options);
/* Connections accepted on listen_fd go to daemon once their head is in. */
bool http_gate_listen(gate *g, int listen_fd, struct MHD_Daemon *daemon);
bool http_gate_start(gate *g);
/* Stops accepting (the listening sockets close) and closes the
 * connections still waiting; MHD's keep being counted until freed. */
void http_gate_stop(gate *g);
void http_gate_free(gate *g);
/* MHD_OPTION_NOTIFY_CONNECTION: MHD's connections count against their
 * address and the total as long as they are open. */
void http_gate_connection(gate *g, struct MHD_Connection *connection,
                          enum MHD_ConnectionNotificationCode code);
void http_gate_stats(gate *g, gate_stats *stats);

/* watchdog.c: drops clients that take too long to send a request. */
typedef struct watchdog watchdog;
watchdog *http_watchdog_start(unsigned limit_s);
void http_watchdog_stop(watchdog *w);
void http_watchdog_connection(watchdog *w, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode code);
/* The connection's request is all in (started), or it is done. */
void http_watchdog_request(struct MHD_Connection *connection, bool started);

typedef struct execution execution;
typedef struct http_server http_server;
typedef struct http_error http_error_view;
typedef struct e2b_contexts e2b_contexts;
typedef struct e2b_sandboxes e2b_sandboxes;
typedef struct e2b_reaper e2b_reaper;
struct route;
struct http_request;

/* One listener's API: its routes, and how its clients show the token. */
typedef struct http_api {
    const char *name; /* "runbox" or "e2b", for the log */
    const struct route *routes;
    size_t route_count;
    bool (*authorized)(const http_server *server, struct MHD_Connection *connection);
    const char *unauthorized; /* what to send instead */
    /* Asked on a request's head once it is routed, before any of its body
     * is read: an API whose clients show a credential of their own (a
     * sandbox's token, a signed URL) checks it here, so that no stranger
     * makes the server read and hold a body. False: its refusal, in the
     * API's words, is queued in *queued. NULL: nothing to check. */
    bool (*admit)(struct http_request *req, enum MHD_Result *queued);
    /* The body of an error in this API's words; NULL: runbox's
     * {"error": {"code", "message"}}. E2B's control plane wants
     * {"code": <status>, "message"}, Connect {"code": "<name>", "message"}. */
    json_t *(*error_body)(const http_error_view *err);
} http_api;

extern const http_api http_runbox_api;      /* routes.c */
extern const http_api http_e2b_api;         /* e2b.c: the code interpreter (port 49999) */
extern const http_api http_e2b_control_api; /* e2b_control.c: POST /v2/sandboxes, ... */
extern const http_api http_e2b_envd_api;    /* e2b_envd.c: envd (port 49983) */
#define E2B_ENVD_PORT "49983"                /* envd's port in E2B's sandboxes */

/* e2b_pick.c: the E2B listener serves three APIs on one origin (the SDK's
 * E2B_API_URL and E2B_SANDBOX_URL may both point at it): the control
 * plane by its paths (/sandboxes..., /v2/sandboxes...), envd and the code
 * interpreter by the E2b-Sandbox-Port header (49983, else 49999). */
const http_api *http_e2b_api_pick(struct MHD_Connection *connection, const char *path);

/* mcp_route.c: MCP's Streamable HTTP transport at /mcp of runbox's
 * listener, an API of its own (JSON-RPC errors). */
extern const http_api http_mcp_api;
typedef struct mcp_sessions mcp_sessions;
/* The MCP sessions of the server, and their reaper (mcp_route.c makes
 * them; the rest is mcp_sessions.c). */
mcp_sessions *http_mcp_sessions_new(http_server *server);
/* Shutdown: every session ends (their streams end, their calls stop). */
void http_mcp_sessions_end_all(mcp_sessions *table);
void http_mcp_sessions_free(mcp_sessions *table);
typedef struct mcp_sessions_stats {
    unsigned open;
    uint64_t opened, expired, evicted, refused, deleted;
} mcp_sessions_stats;
void http_mcp_sessions_stats(mcp_sessions *table, mcp_sessions_stats *stats);

/* What a daemon's callbacks get: the server, and the API it speaks. */
typedef struct http_listener {
    http_server *server;
    const http_api *api;
    struct MHD_Daemon *daemon;
} http_listener;

/* server.c: the daemons, and what every handler shares. */
struct http_server {
    rbx_engine *engine;
    serve_options options;
    char *token;                /* NULL: no token required (loopback only) */
    http_listener listener;     /* runbox's API */
    http_listener e2b_listener; /* E2B's protocol, when asked for */
    e2b_contexts *contexts;     /* E2B's contexts (NULL without it) */
    e2b_sandboxes *sandboxes;   /* E2B's sandboxes (NULL without it) */
    e2b_reaper *reaper;         /* kills E2B's sandboxes whose time is up */
    admission admission;
    metrics *metrics;
    watchdog *watchdog;
    gate *gate;
    mcp_sessions *mcp; /* MCP sessions at /mcp */
    atomic_bool draining; /* shutting down: new requests get 503 */
    /* The operator drains the node (POST /v1/admin/drain) before removing
     * it: not ready, no new sessions, the ones it holds still served. */
    atomic_bool drain_requested;
    /* Executions (execution.c), so that shutdown and session removal can
     * reach them; live counts those not finished, active
     * the requests between their headers and their end. */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    rbx_workers *workers; /* the executions' threads (rbx_workers, runbox.h) */
    execution *executions;
    unsigned live;
    unsigned requests_active;
};

/* Sets up what the server shares and starts the daemon on listen_fd, and
 * one for E2B's protocol on e2b_fd unless it is -1. */
int http_server_start(http_server *server, int listen_fd, int e2b_fd);
/* Stops accepting, lets work finish within the grace period, cancels the
 * rest, and stops the daemon. */
void http_server_shutdown(http_server *server);

/* The body of a request, kept up to a limit; past it only counted. */
typedef struct http_body {
    char *data;
    size_t len, cap, limit;
    bool too_large;
} http_body;

/* One HTTP request, from its headers to its end (MHD's con_cls). */
typedef struct http_request {
    http_server *server;
    const http_api *api;
    struct MHD_Connection *connection;
    char method[16];
    char *path; /* decoded, for routing and the access log */
    const struct route *route;
    char *session_id; /* {id} of the route, when it has one */
    char *file_path;  /* {path} of the route, when it has one */
    int64_t started_us;
    http_body body;
    unsigned status;     /* what was queued; 0: nothing yet */
    uint64_t bytes_sent; /* the response body's bytes */
    /* What the API's admit hook found for its handler, "" for nothing: the
     * E2B listener's sandbox whose token signed a file URL (the handler
     * checks that one again instead of searching every sandbox's). */
    char admitted[72];
} http_request;

typedef enum MHD_Result (*route_handler)(http_request *req);

/* What a route expects as its body. */
typedef enum body_kind { BODY_NONE, BODY_JSON, BODY_JSON_OPTIONAL, BODY_RAW } body_kind;

typedef struct route {
    const char *method;
    const char *pattern; /* literal segments, {id} (one segment), {path} (the rest) */
    route_handler handle;
    body_kind body;
    bool open; /* answered without the token */
} route;

/* routes.c: finds the route for req in its API (and its {id} and
 * {path}); on a miss queues 404 or 405 and returns false. */
bool http_route(http_request *req, enum MHD_Result *queued);
/* True for a path of the API that needs no token (checked before routing). */
bool http_route_is_open(const http_api *api, const char *path);

/* reply.c: every response goes through here (status and size are logged). */
struct http_error {
    unsigned status;
    const char *code;
    char message[600];
};
typedef struct http_error http_error;

void http_error_set(http_error *err, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* origin.c: refuses what a browser sends on behalf of another site (an
 * Origin not the server's own) and, on a server without a token, requests
 * for a name that is not loopback (DNS rebinding). */
bool http_origin_check(const http_server *server, struct MHD_Connection *connection,
                       http_error *err);
void http_error_from_engine(http_error *err, const rbx_error *engine_err);
enum MHD_Result http_reply(http_request *req, unsigned status, struct MHD_Response *response,
                           uint64_t bytes);
/* file_reply.c: the first size bytes of the file open at fd (taken: closed
 * with the response) as a body, read as they are sent; a file that shrank
 * meanwhile ends the response early (the connection closes), never hangs
 * it. Adds what it sends to *bytes_sent. NULL (fd left open) if out of
 * memory. For every file a sandbox can change. */
struct MHD_Response *http_file_response(int fd, uint64_t size, uint64_t *bytes_sent);
/* A JSON text (malloc'ed, taken) as the body; header may be NULL. */
enum MHD_Result http_reply_json_text(http_request *req, unsigned status, char *text,
                                     const char *header, const char *value);
/* The JSON object (stolen) as the body; header may be NULL. */
enum MHD_Result http_reply_json(http_request *req, unsigned status, json_t *body,
                                const char *header, const char *value);
enum MHD_Result http_reply_error(http_request *req, const http_error *err);
enum MHD_Result http_reply_fail(http_request *req, unsigned status, const char *code,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
enum MHD_Result http_reply_engine(http_request *req, const rbx_error *engine_err);
json_t *http_error_json(const http_error *err);
/* The error as a whole HTTP/1.1 response (Connection: close), for answers
 * written straight to the socket; its length, 0 when it does not fit. */
size_t http_error_response(const http_error *err, char *buf, size_t size);
/* Long work ahead: no idle timeout until http_release_connection. */
void http_hold_connection(struct MHD_Connection *connection);
void http_release_connection(const http_server *server, struct MHD_Connection *connection);

/* body.c */
void http_body_init(http_body *body, size_t limit);
void http_body_append(http_body *body, const char *data, size_t len);
void http_body_free(http_body *body);
/* Checks what a route's body needs before reading it (415, 413). */
bool http_body_expect(http_request *req, http_error *err);
/* The body as a JSON object (NULL for an absent optional body). */
bool http_body_json(http_request *req, json_t **object, http_error *err);
/* False when text nests arrays and objects deeper than the limit. */
bool http_json_depth_ok(const char *text, size_t len);
/* A JSON object, its nesting bounded first; NULL and err on failure. */
json_t *http_json_parse(const char *text, size_t len, http_error *err);

/* auth.c */
int http_auth_load(const serve_options *options, char **token, char *why, size_t why_size);
/* Authorization: Bearer TOKEN (runbox's API). */
bool http_auth_ok(const http_server *server, struct MHD_Connection *connection);
/* The token in any of these headers (E2B's SDK sends X-Access-Token on
 * executions, E2B-Traffic-Access-Token elsewhere), or Bearer. */
bool http_auth_ok_headers(const http_server *server, struct MHD_Connection *connection,
                          const char *const *headers);
bool http_address_is_loopback(const struct sockaddr *addr);

/* events.c: the bounded queue between an execution and its client. */
typedef struct event_queue {
    pthread_mutex_t lock;
    pthread_cond_t room;
    char *data;
    size_t start, end, cap, limit;
    bool finished; /* the last event is in */
    int wake_fd;   /* readable when there is news for the client */
} event_queue;

int http_queue_init(event_queue *q, size_t limit);
void http_queue_destroy(event_queue *q);
/* Adds one event; blocks while the queue is full, until stop() says to
 * give up (then the event is dropped and false returned). */
bool http_queue_push(event_queue *q, const char *text, size_t len, bool (*stop)(void *), void *arg);
/* Adds the last event, whatever the queue holds. */
void http_queue_finish(event_queue *q, const char *text, size_t len);
void http_queue_wake(event_queue *q);
size_t http_queue_take(event_queue *q, char *buf, size_t max, bool *finished);
bool http_queue_has_data(event_queue *q);
/* Waits up to timeout_ms for news in the queue; false when the client on
 * client_fd (-1: none watched) has gone meanwhile. */
bool http_queue_wait(event_queue *q, int client_fd, int timeout_ms);

typedef enum stream_format { STREAM_NONE, STREAM_NDJSON, STREAM_SSE } stream_format;

/* How a stream is written for a client that speaks another protocol than
 * runbox's own events (e2b.c); malloc'ed frames, *len set. */
typedef struct stream_dialect {
    /* A chunk of output, or a rich output's JSON (RBX_DISPLAY). */
    char *(*output)(rbx_stream stream, const char *data, size_t len, size_t *frame_len);
    /* The end of the stream: from the result, or (result NULL) from why
     * there is none. */
    char *(*end)(const rbx_result *result, const http_error *err, size_t *frame_len);
    const char *keepalive; /* sent after keepalive_ms of silence */
    int keepalive_ms;
    const char *content_type;
} stream_dialect;
/* events.c: one event framed for the wire: an NDJSON line or an SSE message. */
char *http_stream_frame(stream_format format, const char *type, const char *json, size_t *len);
/* stream.c: the streaming reply of an execution (which it then owns). */
enum MHD_Result http_stream_reply(http_request *req, execution *ex);

/* The body of POST /v1/execute is parsed by the CLI's api_form (form.c),
 * which the local socket shares. */

/* execution.c: one execution's life on the server. */
typedef enum cancel_reason {
    CANCEL_NONE,
    CANCEL_CLIENT_GONE,
    CANCEL_SHUTDOWN,
    CANCEL_SESSION_REMOVED,
} cancel_reason;

struct execution {
    http_server *server;
    struct MHD_Connection *connection;
    int client_fd;        /* watched for the client going away */
    uint64_t *bytes_sent; /* the request's count, for the access log */
    api_form form;
    stream_format format;
    const stream_dialect *dialect;           /* NULL: runbox's own events */
    char *kernel_cwd;                        /* the request's, owned */
    int64_t last_sent_us;                    /* for the dialect's keepalive */
    char session_id[RBX_SESSION_ID_MAX + 1]; /* "" for a one-off run */
    int cancel_read;                         /* the request's cancel_fd */
    atomic_int cancel_fd;                    /* its pipe's write end: closed to cancel */
    atomic_int cancelled;                    /* a cancel_reason; the first one stays */
    admission_ticket ticket;
    int64_t deadline_us; /* how long output may wait for a slow client */
    event_queue events;
    /* Its job ran on one of the server's workers (started) and is over:
     * its thread no longer touches it (under the server's lock). */
    bool started, linked, job_over;
    atomic_bool done;
    bool has_result; /* else error says why there is none */
    char *result;    /* the result's JSON, as the client gets it */
    http_error error;
    execution *prev, *next; /* the server's list */
};

/* Takes the parsed body; on failure err says why (and body is freed). */
execution *http_execution_new(http_request *req, json_t *body, http_error *err);
/* Starts it unless admission refuses (ADMIT_FULL: not started). */
admission_verdict http_execution_start(execution *ex);
/* Starts it for the request and holds the connection for its length; or,
 * when the queue is full, frees it, queues 429 in *refused and returns
 * false. */
bool http_execution_admit(http_request *req, execution *ex, enum MHD_Result *refused);
/* Waits up to timeout_ms (-1: no limit) for news: output or the end. False
 * when the client went away; the execution is then cancelled. */
bool http_execution_wait(execution *ex, int timeout_ms);
bool http_execution_done(execution *ex);
/* After the end: whether there is a result, else why not. */
bool http_execution_succeeded(execution *ex, http_error *err);
/* After the end: the result's JSON (the caller frees it). */
char *http_execution_take_result(execution *ex);
void http_execution_cancel(execution *ex, cancel_reason reason);
/* Cancels the execution if it still runs, waits for it, frees it. */
void http_execution_free(execution *ex);

/* Cancels the executions of a session, queued or running. */
void http_executions_cancel_session(http_server *server, const char *session_id);
void http_executions_cancel_all(http_server *server);
/* Waits until none runs, or until deadline_us; true when none does. */
bool http_executions_wait_idle(http_server *server, int64_t deadline_us);

/* run.c: the execution on its thread, through the engine. */
/* Makes the execution's cancel pipe; -1 when there is no room for it. */
int http_run_prepare(execution *ex);
/* Runs it; fills its result, or its error when the engine refused. */
void http_run(execution *ex);

/* Route handlers. */
enum MHD_Result http_handle_execute(http_request *req);
/* execute.c: runs the execution body asks for (the body is taken). */
enum MHD_Result http_execute(http_request *req, json_t *body);
/* cluster.c */
enum MHD_Result http_handle_drain(http_request *req);
enum MHD_Result http_handle_live(http_request *req);
enum MHD_Result http_handle_session_export(http_request *req);
enum MHD_Result http_handle_session_import(http_request *req);
/* The X-Runbox-Session header, when sent, is a session id and agrees with
 * the path's. */
bool http_session_header_check(http_request *req, http_error *err);
/* The session a balancer routed the request by: the path's, else the
 * header's; NULL when neither names one. */
const char *http_routed_session(const http_request *req);
/* A body naming a session (named, may be NULL) must name the routed one. */
bool http_session_agrees(const http_request *req, const char *named, http_error *err);
/* True (and err) when a draining node refuses work for session_id (NULL: a
 * one-off execution): only the sessions it holds are served. */
bool http_drain_refuses(http_request *req, const char *session_id, http_error *err);

/* framing.c: refuses a request whose framing or routing headers are
 * ambiguous (Content-Length with Transfer-Encoding, a header sent twice). */
bool http_framing_check(http_request *req, http_error *err);
enum MHD_Result http_handle_images(http_request *req);
enum MHD_Result http_handle_sessions_create(http_request *req);
enum MHD_Result http_handle_sessions_list(http_request *req);
enum MHD_Result http_handle_session_get(http_request *req);
enum MHD_Result http_handle_session_delete(http_request *req);
enum MHD_Result http_handle_session_restart(http_request *req);
enum MHD_Result http_handle_files_list(http_request *req);
enum MHD_Result http_handle_file_put(http_request *req);
enum MHD_Result http_handle_file_get(http_request *req);
enum MHD_Result http_handle_file_delete(http_request *req);
enum MHD_Result http_handle_health(http_request *req);
enum MHD_Result http_handle_metrics(http_request *req);
enum MHD_Result http_handle_openapi(http_request *req);
/* playground.c: the web page (GET /) and its script and style. */
enum MHD_Result http_handle_page(http_request *req);

/* e2b_state_file.c: the E2B listener's state files (its sandboxes and
 * contexts), JSON objects written whole. Loading gives the file's JSON,
 * or NULL: *absent when there is no file yet, else why. Saving writes
 * root (taken; NULL fails) to a new file, synced and renamed over path. */
json_t *e2b_state_load(const char *path, bool *absent, char *why, size_t why_size);
bool e2b_state_save(const char *path, json_t *root);

/* e2b_contexts.c: E2B's contexts. Each belongs to a sandbox (or, for
 * requests that name none or E2B's debug sandbox, to no sandbox: "").
 * The default one of each language runs in the sandbox's own session (so
 * the languages share its files); one made with POST /contexts is a
 * session of its own whose kernel of its language starts in its cwd (its
 * own variables and, since a session is the engine's unit of files, its
 * own files too). They are kept in <state>/e2b-contexts.json, so a
 * restarted server knows them (their kernels start afresh, as after any
 * restart). */
/* Contexts made with POST /contexts: at most E2B_SANDBOX_CONTEXTS_MAX a
 * sandbox, so that one sandbox cannot take every other's room, and
 * E2B_CONTEXTS_MAX in all, the last bound. A sandbox's default contexts
 * (one a language) count against neither, so its executions always find
 * theirs; E2B_DEFAULT_CONTEXTS_MAX only bounds what a damaged state file
 * could hold (a few languages for each of E2B_SANDBOXES_MAX sandboxes). */
#define E2B_SANDBOX_CONTEXTS_MAX 64
#define E2B_CONTEXTS_MAX 1024
#define E2B_DEFAULT_CONTEXTS_MAX (8 * (E2B_SANDBOXES_MAX + 1))
/* The session's directory inside the sandbox: E2B's /home/user too. */
#define E2B_DEFAULT_CWD "/home/user"
#define E2B_SANDBOX_ID_MAX 64

/* A session's or a sandbox's id, for lists of them. */
typedef struct e2b_name {
    char text[RBX_SESSION_ID_MAX + 1];
} e2b_name;

typedef struct e2b_context {
    char id[RBX_SESSION_ID_MAX + 1];
    char sandbox[E2B_SANDBOX_ID_MAX + 1];    /* "": no sandbox of the control plane's */
    char session_id[RBX_SESSION_ID_MAX + 1]; /* where its kernel runs */
    char language[16];                       /* runbox's canonical name */
    char cwd[RBX_KERNEL_CWD_MAX + 1];
} e2b_context;

e2b_contexts *e2b_contexts_open(const char *state_dir, char *why, size_t why_size);
void e2b_contexts_free(e2b_contexts *contexts);
/* Context id of the sandbox (only its own). */
bool e2b_contexts_find(e2b_contexts *contexts, const char *sandbox, const char *id,
                       e2b_context *out);
/* The default context of language in the sandbox (made when missing);
 * session_id is the sandbox's session (NULL: sandbox "" and its own). */
bool e2b_contexts_default(e2b_contexts *contexts, const char *sandbox, const char *session_id,
                          const char *language, e2b_context *out);
/* A new context; false and err when there is no room (429
 * too_many_contexts, naming the cap) or it cannot be kept. */
bool e2b_contexts_add(e2b_contexts *contexts, const char *sandbox, const char *language,
                      const char *cwd, e2b_context *out, http_error *err);
bool e2b_contexts_remove(e2b_contexts *contexts, const char *sandbox, const char *id);
/* Removes every context of the sandbox; returns (malloc'ed, *count) the
 * sessions of those made with POST /contexts, for the caller to remove. */
e2b_name *e2b_contexts_remove_sandbox(e2b_contexts *contexts, const char *sandbox,
                                      size_t *count);
/* The sessions of the sandbox's contexts made with POST /contexts. */
e2b_name *e2b_contexts_sessions(e2b_contexts *contexts, const char *sandbox, size_t *count);
/* The sandbox's contexts, as E2B lists them: [{id, language, cwd}]. */
json_t *e2b_contexts_list(e2b_contexts *contexts, const char *sandbox);
json_t *e2b_context_json(const e2b_context *context);

/* e2b_sandboxes.c: E2B's sandboxes (../shared/E2B-SANDBOX-PROTOCOL.md),
 * made through the control plane (e2b_control.c); each is a runbox
 * session ("e2b-" and its id) with an unguessable id and access tokens of
 * its own. The registry is kept in memory and in <state>/e2b-sandboxes.json
 * (written whole, a new file renamed over the old, mode 0600), so a
 * restarted server still knows them. envd's and the code interpreter's
 * handlers find theirs here. */
#define E2B_SANDBOXES_MAX 1024
#define E2B_TOKEN_MAX 64
#define E2B_TEMPLATE_MAX 128
/* The envd version the control plane reports; the SDKs switch features by
 * it (E2B-SANDBOX-PROTOCOL.md section 7): 0.6.4 enables all of them. */
#define E2B_ENVD_VERSION "0.6.4"
/* A sandbox's life: 300 s unless the create body says, at most a day. */
#define E2B_DEFAULT_TIMEOUT_S 300
#define E2B_MAX_TIMEOUT_S 86400

typedef struct e2b_sandbox {
    char id[E2B_SANDBOX_ID_MAX + 1];
    char session_id[RBX_SESSION_ID_MAX + 1]; /* its files and kernels */
    char envd_token[E2B_TOKEN_MAX + 1];      /* X-Access-Token */
    char traffic_token[E2B_TOKEN_MAX + 1];   /* E2B-Traffic-Access-Token */
    char template_id[E2B_TEMPLATE_MAX + 1];
    char image[RBX_IMAGE_NAME_MAX]; /* "": the operator's default */
    int network;                    /* as rbx_request.network (-1: the default) */
    json_t *metadata;               /* object of strings */
    json_t *env_vars;               /* object of strings */
    json_t *egress_allow;           /* array of strings, or NULL */
    json_t *network_settings;       /* the create body's "network", or NULL */
    int64_t started_ms, end_ms;     /* wall clock, ms since the epoch */
    bool paused;
    bool auto_pause; /* its time up, it is paused rather than killed */
} e2b_sandbox;

e2b_sandboxes *e2b_sandboxes_open(const char *state_dir, char *why, size_t why_size);
void e2b_sandboxes_free(e2b_sandboxes *sandboxes);
/* Registers sandbox (its settings filled; id, session and tokens are made
 * here and written to it). Takes the references of its JSON fields. */
bool e2b_sandboxes_add(e2b_sandboxes *sandboxes, e2b_sandbox *sandbox, char *why,
                       size_t why_size);
/* A copy of sandbox id (its JSON fields referenced: release it). */
bool e2b_sandboxes_get(e2b_sandboxes *sandboxes, const char *id, e2b_sandbox *out);
void e2b_sandbox_release(e2b_sandbox *sandbox);
/* Copies of all of them (release each, free the array). */
e2b_sandbox *e2b_sandboxes_all(e2b_sandboxes *sandboxes, size_t *count);
/* A copy of the first sandbox running at now_ms for which matches holds,
 * asked of each in turn under the registry's lock (so it must be quick
 * and take no lock of its own), without copying the others. */
typedef bool e2b_sandbox_match(const e2b_sandbox *sandbox, void *context);
bool e2b_sandboxes_find_running(e2b_sandboxes *sandboxes, int64_t now_ms,
                                e2b_sandbox_match *matches, void *context, e2b_sandbox *out);
/* Changes, written through; false when id is not there (or, with paused,
 * when it already was in that state: *was_paused says). */
bool e2b_sandboxes_set_end(e2b_sandboxes *sandboxes, const char *id, int64_t end_ms);
bool e2b_sandboxes_set_paused(e2b_sandboxes *sandboxes, const char *id, bool paused,
                              int64_t end_ms, bool *was_paused);
bool e2b_sandboxes_remove(e2b_sandboxes *sandboxes, const char *id, e2b_sandbox *removed);
/* Ids of running sandboxes whose end has passed (malloc'ed). */
e2b_name *e2b_sandboxes_expired(e2b_sandboxes *sandboxes, int64_t now_ms, size_t *count);
/* Sessions of sandboxes killed within the last E2B_GRAVE_S seconds: a
 * request that found the sandbox just before its kill may still have
 * started an execution, which makes the session anew; the reaper removes
 * it again. bury records one; graves lists them (malloc'ed). */
#define E2B_GRAVE_S 60
void e2b_sandboxes_bury(e2b_sandboxes *sandboxes, const char *session_id);
e2b_name *e2b_sandboxes_graves(e2b_sandboxes *sandboxes, int64_t now_ms, size_t *count);
int64_t e2b_now_ms(void);

/* The id E2B's SDKs use in debug mode: requests with it, or with none,
 * are served as before the control plane (the sandbox ""). */
#define E2B_DEBUG_SANDBOX_ID "debug_sandbox_id"
/* The sandbox a request names (E2b-Sandbox-Id), or NULL for none or the
 * debug one. */
const char *e2b_request_sandbox_id(struct MHD_Connection *connection);

typedef struct e2b_sandbox_view {
    char id[E2B_SANDBOX_ID_MAX + 1];
    char session_id[RBX_SESSION_ID_MAX + 1]; /* its files and kernels */
    char image[RBX_IMAGE_NAME_MAX];          /* "": the operator's default */
    int network;                             /* as rbx_request.network */
    json_t *env;          /* its envVars, an object of strings (a reference), or NULL */
    json_t *egress_allow; /* an array of strings narrowing egress, or NULL */
} e2b_sandbox_view;

/* Which of a sandbox's ports a request is for, which decides the token it
 * must show: envd its access token (X-Access-Token) alone; the code
 * interpreter, a traffic port, E2B-Traffic-Access-Token or X-Access-Token. */
typedef enum e2b_port { E2B_PORT_ENVD, E2B_PORT_CODE_INTERPRETER } e2b_port;

/* The running sandbox that a request to envd or the code interpreter is
 * for (its E2b-Sandbox-Id), once its token for the port matches. False
 * with err set otherwise: 502 "sandbox ... was not found" for an unknown,
 * killed, expired or paused one (the SDKs' words for it), 401 for a wrong
 * or missing token. view NULL: the checks alone, as the APIs' admit hooks
 * make them on a request's head, before its body is read. */
bool e2b_sandbox_for_request(http_server *server, struct MHD_Connection *connection,
                             e2b_port port, e2b_sandbox_view *view, http_error *err);
void e2b_sandbox_view_release(e2b_sandbox_view *view);
/* The view of a sandbox found for a request, unless view is NULL; the
 * sandbox is released either way. */
bool e2b_sandbox_found(http_server *server, struct e2b_sandbox *sandbox, e2b_sandbox_view *view,
                       http_error *err);
/* Tokens compared in a time that depends on the expected one's length only. */
bool e2b_same_token(const char *given, const char *expected);

/* e2b_signed.c: envd's signed file URLs (the SDK's download_url and
 * upload_url): GET or POST /files with ?signature= and no E2b-Sandbox-Id, as
 * a browser or curl sends them. The sandbox is the one the host names
 * (49983-<id>.<domain>), else the running one whose access token signs the
 * path, the operation and the user; false with err (401) when none does or
 * the signature has expired; view NULL: the checks alone, as on the head.
 * signer: the sandbox to try first when the host names none ("": search),
 * and on success the one that signed: the admit hook's find, so that the
 * handler does not search again (a search hashes once per sandbox). */
bool e2b_signed_file_request(struct MHD_Connection *connection);
bool e2b_sandbox_for_signed_file(http_server *server, struct MHD_Connection *connection,
                                 bool write, char signer[E2B_SANDBOX_ID_MAX + 1],
                                 e2b_sandbox_view *view, http_error *err);

/* e2b_list.c: GET /v2/sandboxes, the control plane's (e2b_control.c) list. */
enum MHD_Result e2b_handle_list(http_request *req);
/* e2b_describe.c: what the SDKs read of a sandbox: the Sandbox of create
 * and connect (how to reach it), ListedSandbox, SandboxDetail; times as
 * RFC 3339. */
json_t *e2b_sandbox_json(const e2b_sandbox *sandbox);
json_t *e2b_listed_json(http_server *server, const e2b_sandbox *sandbox);
json_t *e2b_detail_json(http_server *server, const e2b_sandbox *sandbox);
json_t *e2b_time_json(int64_t ms);

/* e2b_create.c: the create body's "timeout" (absent: the default), and
 * the sandbox it asks for (the image its template names, its envVars,
 * metadata, network and egress), every field checked; 400 with why. */
bool e2b_create_timeout(json_t *body, int64_t *timeout_s, http_error *err);
bool e2b_create_settings(http_server *server, json_t *body, e2b_sandbox *sandbox,
                         http_error *err);

/* e2b_lifecycle.c: what ends or suspends a sandbox, for the control plane
 * and the reaper. Kill: its executions are cancelled, its kernels and
 * processes stop, its session (and its contexts' sessions) removed. Pause:
 * its executions are cancelled, its processes frozen and its kernels
 * hibernated; its files stay. Both false when the sandbox is not there
 * (pause: or was paused already, *was_paused). Resume: the sandbox, no
 * longer paused, has its processes thawed. */
bool e2b_sandbox_kill(http_server *server, const char *id);
bool e2b_sandbox_pause(http_server *server, const char *id, bool *was_paused);
void e2b_sandbox_resume(http_server *server, const char *id, const char *session_id);
/* One thread on the server kills sandboxes whose end has passed. */
e2b_reaper *e2b_reaper_start(http_server *server);
void e2b_reaper_stop(e2b_reaper *reaper);

/* e2b_connect.c: the Connect protocol with its JSON codec, as E2B's SDKs
 * speak it to envd (E2B-SANDBOX-PROTOCOL.md section 5). Errors of a unary
 * call are http_reply_error's (envd's API writes Connect's error body). */
/* A unary call's request (application/json): a JSON object; NULL with err
 * (400 invalid_argument) otherwise. The caller owns it. */
json_t *e2b_connect_unary_request(http_request *req, http_error *err);
/* A server-stream call's request: exactly one enveloped message
 * (application/connect+json). */
json_t *e2b_connect_stream_request(http_request *req, http_error *err);
/* A client-stream call's messages, in order, as a JSON array: every
 * envelope up to the end-of-stream frame or the body's end. */
json_t *e2b_connect_client_stream(http_request *req, http_error *err);
/* 200 application/json with the message (stolen). */
enum MHD_Result e2b_connect_reply(http_request *req, json_t *message);
/* Connect's error body, {"code": "<name>", "message"}, its code from the
 * error's HTTP status: envd's API writes its errors so (and here, not in
 * e2b_envd.c, so that the services its routes name may use these helpers
 * without a circle). */
json_t *e2b_connect_error_body(const http_error *err);

/* A server stream's response. The handler opens it (which queues the 200
 * response) and hands it to a producer thread of its own; the connection's
 * thread sends each message as it comes, and keepalive_json (such as
 * {"event":{"keepalive":{}}}) after the Keepalive-Ping-Interval seconds of
 * silence the client asked for. */
typedef struct e2b_stream e2b_stream;
/* NULL (and *queued set to what was answered) when it cannot be opened. */
e2b_stream *e2b_stream_open(http_request *req, const char *keepalive_json,
                            enum MHD_Result *queued);
/* One message (stolen). Blocks while the client lags far behind; false
 * once the client has gone, when the producer should stop, or when the
 * message has waited E2B_STREAM_STALL_S for room (then the stream and its
 * connection end). */
bool e2b_stream_send(e2b_stream *stream, json_t *message);
/* The streams of one sandbox share one budget of bytes held for their
 * clients (E2B_SANDBOX_STREAM_BUDGET: what is queued and what producers
 * charge), and end together when it goes. */
#define E2B_SANDBOX_STREAM_BUDGET ((size_t)4 << 20)
#define E2B_STREAM_STALL_S 30
/* The stream joins its sandbox's (by the sandbox's session id); false
 * when out of memory (the stream goes on alone). */
bool e2b_stream_join(e2b_stream *stream, const char *sandbox);
/* The producer's own holdings, charged (or refunded) to the budget. */
void e2b_stream_charge(e2b_stream *stream, size_t bytes, bool charge);
bool e2b_stream_over_budget(e2b_stream *stream);
/* What one sandbox's streams hold now, in bytes. */
size_t e2b_streams_held(const char *sandbox);
/* The sandbox went (or paused): waits (a second at most) for its streams
 * to give their clients their ends, then ends those left, read or not
 * (their producers' sends fail and their connections close). */
void e2b_streams_end_sandbox(const char *sandbox);
bool e2b_stream_client_gone(e2b_stream *stream);
/* The end-of-stream frame: {} or the error (err NULL: success). The
 * producer calls it exactly once; the stream is no longer its own after. */
void e2b_stream_end(e2b_stream *stream, const http_error *err);
/* A server stream that fails before it starts: 200 and the error in its
 * end-of-stream frame (JS's client maps a non-200 stream from its status
 * alone, 404 as unimplemented). */
enum MHD_Result e2b_stream_refused(http_request *req, const http_error *err);
/* A call refused before it runs, in the shape its client reads: a stream
 * (Content-Type application/connect+json) as e2b_stream_refused, any other
 * request with the status and a Connect error body. */
enum MHD_Result e2b_connect_refuse(http_request *req, const http_error *err);

/* e2b_process.c: envd's process.Process, E2B's commands and terminals
 * (the engine's processes, rbx_process_*), one handler per RPC. */
enum MHD_Result http_e2b_process_start(http_request *req);
enum MHD_Result http_e2b_process_connect(http_request *req);
enum MHD_Result http_e2b_process_list(http_request *req);
enum MHD_Result http_e2b_process_send_input(http_request *req);
enum MHD_Result http_e2b_process_stream_input(http_request *req);
enum MHD_Result http_e2b_process_send_signal(http_request *req);
enum MHD_Result http_e2b_process_close_stdin(http_request *req);
enum MHD_Result http_e2b_process_update(http_request *req);

/* The page's files, built from web/ and embedded at build time. */
extern const char http_page_html[], http_page_js[], http_page_css[];
extern const unsigned long http_page_html_size, http_page_js_size, http_page_css_size;
/* docs/openapi.json, embedded at build time (cmake/embed.cmake). */
extern const char http_openapi_json[];
extern const unsigned long http_openapi_json_size;

#endif
