/* The daemons (runbox's API, and E2B's protocol when asked for), and the
 * life of a request: its headers are checked before any body is read
 * (shutdown, token, route, content type, size), the body comes in
 * bounded, the route's handler answers, and its end is logged. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Per connection: request line and headers, and the send buffer. The gate
 * lets in heads of at most HTTP_HEAD_MAX bytes and HTTP_HEADERS_MAX
 * headers, which leaves MHD room to spare (MHD would answer a head it
 * cannot hold with an HTML 431 of its own). */
#define CONNECTION_MEMORY ((size_t)128 * 1024)
_Static_assert(CONNECTION_MEMORY >= 2 * HTTP_HEAD_MAX + HTTP_HEADERS_MAX * 64,
               "MHD must hold every head the gate lets in");

static http_request *request_new(const http_listener *listener, struct MHD_Connection *connection,
                                 const char *url, const char *method)
{
    http_server *server = listener->server;
    http_request *req = calloc(1, sizeof *req);
    if (!req || !(req->path = strdup(url))) {
        free(req);
        return NULL;
    }
    req->server = server;
    req->api = listener->api == &http_e2b_api ? http_e2b_api_pick(connection, url) : listener->api;
    /* MCP's transport speaks JSON-RPC, errors included. */
    if (req->api == &http_runbox_api && !strcmp(url, "/mcp"))
        req->api = &http_mcp_api;
    req->connection = connection;
    snprintf(req->method, sizeof req->method, "%s", method);
    req->started_us = http_now_us();
    http_body_init(&req->body, server->options.max_body);
    pthread_mutex_lock(&server->lock);
    server->requests_active++;
    pthread_mutex_unlock(&server->lock);
    return req;
}

static void request_free(http_request *req)
{
    http_server *server = req->server;
    http_body_free(&req->body);
    free(req->path);
    free(req->session_id);
    free(req->file_path);
    free(req);
    pthread_mutex_lock(&server->lock);
    server->requests_active--;
    pthread_cond_broadcast(&server->changed);
    pthread_mutex_unlock(&server->lock);
}

static bool has_control(const char *path)
{
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return true;
    return false;
}

static enum MHD_Result request_begin(http_request *req)
{
    http_server *server = req->server;
    if (atomic_load(&server->draining))
        return http_reply_fail(req, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting_down",
                               "runbox is shutting down");
    if (has_control(req->path))
        return http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_path",
                               "the path contains a control character or an encoded NUL");
    http_error err;
    if (!http_framing_check(req, &err))
        return http_reply_error(req, &err);
    if (!http_origin_check(server, req->connection, &err))
        return http_reply_error(req, &err);
    if (!http_route_is_open(req->api, req->path) && !req->api->authorized(server, req->connection))
        return http_reply_fail(req, MHD_HTTP_UNAUTHORIZED, "unauthorized",
                               "this server needs its token: send %s", req->api->unauthorized);
    enum MHD_Result queued;
    if (!http_route(req, &queued) || (req->api->admit && !req->api->admit(req, &queued)))
        return queued;
    if ((req->api == &http_runbox_api && !http_session_header_check(req, &err)) ||
        !http_body_expect(req, &err))
        return http_reply_error(req, &err);
    return MHD_YES;
}

/* A body past the limit whose length was not known from its headers (a
 * chunked one): reading stops here. MHD 0.9.75 cannot queue a response
 * while a body comes in, so the 413 is written to the socket directly and
 * MHD told to close the connection; the rest of the body is never read. */
static enum MHD_Result refuse_rest(http_request *req)
{
    http_error err;
    http_error_set(&err, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                   "the body is larger than the limit of %zu bytes", req->body.limit);
    char response[1024];
    size_t len = http_error_response(&err, response, sizeof response);
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info && len && send(info->connect_fd, response, len, MSG_NOSIGNAL | MSG_DONTWAIT) > 0) {
        shutdown(info->connect_fd, SHUT_WR);
        req->status = MHD_HTTP_CONTENT_TOO_LARGE;
        req->bytes_sent += len;
    }
    return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    http_request *req = *con_cls;
    if (!req) {
        if (!(req = request_new(cls, connection, url, method)))
            return MHD_NO;
        *con_cls = req;
        return request_begin(req);
    }
    if (*upload_data_size) {
        http_body_append(&req->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return req->body.too_large ? refuse_rest(req) : MHD_YES;
    }
    /* The whole request is in: the slow-client deadline no longer applies. */
    http_watchdog_request(connection, true);
    if (req->body.too_large)
        return http_reply_fail(req, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                               "the body is larger than the limit of %zu bytes", req->body.limit);
    return req->route->handle(req);
}

static void log_access(const http_request *req, enum MHD_RequestTerminationCode toe)
{
    json_t *line = http_log_event("request");
    json_object_set_new(line, "method", http_json_text(req->method, strlen(req->method)));
    json_object_set_new(line, "path", http_json_text(req->path, strlen(req->path)));
    json_object_set_new(line, "status", json_integer(req->status));
    json_object_set_new(line, "duration_ms",
                        json_integer((http_now_us() - req->started_us) / 1000));
    json_object_set_new(line, "bytes", json_integer((json_int_t)req->bytes_sent));
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        json_object_set_new(line, "aborted", json_true());
    http_log_emit(line);
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_server *server = ((http_listener *)cls)->server;
    http_request *req = *con_cls;
    if (!req)
        return;
    *con_cls = NULL;
    log_access(req, toe);
    if (req->status)
        http_metrics_response(server->metrics, req->status);
    http_watchdog_request(connection, false);
    request_free(req);
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *server = ((http_listener *)cls)->server;
    http_gate_connection(server->gate, connection, code);
    http_watchdog_connection(server->watchdog, connection, socket_context, code);
}

/* MHD decodes %XX in the path before routing (so %2e%2e%2f arrives as
 * "../" and meets the engine's checks). A decoded NUL would cut the path
 * short and silently name another file: %00 becomes a control character
 * instead, which request_begin refuses. */
static size_t unescape(void *cls, struct MHD_Connection *connection, char *text)
{
    for (char *p = strstr(text, "%00"); p; p = strstr(p + 3, "%00"))
        p[2] = '1';
    return MHD_http_unescape(text);
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
    char message[512];
    vsnprintf(message, sizeof message, fmt, ap);
    message[strcspn(message, "\n")] = 0;
    json_t *line = http_log_event("libmicrohttpd");
    json_object_set_new(line, "message", http_json_text(message, strlen(message)));
    http_log_emit(line);
}

static void release(http_server *server)
{
    http_mcp_sessions_free(server->mcp);
    server->mcp = NULL;
    http_gate_free(server->gate);
    server->gate = NULL;
    if (server->watchdog)
        http_watchdog_stop(server->watchdog);
    if (server->metrics)
        http_metrics_free(server->metrics);
    http_admission_destroy(&server->admission);
    /* Every execution was freed with its connection: their jobs are over. */
    rbx_workers_free(server->workers);
    server->workers = NULL;
    pthread_cond_destroy(&server->changed);
    pthread_mutex_destroy(&server->lock);
}

/* A thread per connection: handlers may block for an execution. MHD
 * listens on nothing: the gate accepts, and adds each connection once its
 * head is in (MHD_USE_ITC wakes MHD for it). poll(), not select(): with
 * more than a thousand connections descriptors pass FD_SETSIZE. MHD's own
 * limit is only a backstop; the gate's cap is the one that holds. */
static bool start_daemon(http_listener *listener, http_server *server, const http_api *api,
                         int listen_fd)
{
    const serve_options *o = &server->options;
    *listener = (http_listener){.server = server, .api = api};
    listener->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
            MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_request, listener, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, o->client_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        2 * o->max_connections, MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, listener, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, listener, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
    if (!listener->daemon)
        return false;
    if (!http_gate_listen(server->gate, listen_fd, listener->daemon)) {
        MHD_stop_daemon(listener->daemon);
        listener->daemon = NULL;
        return false;
    }
    return true;
}

int http_server_start(http_server *server, int listen_fd, int e2b_fd)
{
    const serve_options *o = &server->options;
    pthread_mutex_init(&server->lock, NULL);
    pthread_cond_init(&server->changed, NULL);
    http_admission_init(&server->admission, o->max_running, o->max_queue);
    server->metrics = http_metrics_new();
    server->watchdog = http_watchdog_start(o->client_timeout_s);
    server->gate = http_gate_new(o);
    server->mcp = http_mcp_sessions_new(server);
    /* Up to 8 wait for the next execution, 2 s each (the pool's spares'
     * idle time): enough for a client at concurrency 8. */
    server->workers = rbx_workers_new(8, 2000);
    if (!server->metrics || !server->watchdog || !server->gate || !server->mcp ||
        !server->workers ||
        !start_daemon(&server->listener, server, &http_runbox_api, listen_fd)) {
        release(server);
        return -1;
    }
    /* E2B's sandboxes end on their own when their time is up. */
    if ((e2b_fd >= 0 && !start_daemon(&server->e2b_listener, server, &http_e2b_api, e2b_fd)) ||
        (e2b_fd >= 0 && server->sandboxes && !(server->reaper = e2b_reaper_start(server))) ||
        !http_gate_start(server->gate)) {
        e2b_reaper_stop(server->reaper);
        server->reaper = NULL;
        MHD_stop_daemon(server->listener.daemon);
        if (server->e2b_listener.daemon)
            MHD_stop_daemon(server->e2b_listener.daemon);
        release(server);
        return -1;
    }
    return 0;
}

static void log_shutdown(http_server *server, const char *stage)
{
    pthread_mutex_lock(&server->lock);
    unsigned live = server->live;
    pthread_mutex_unlock(&server->lock);
    json_t *line = http_log_event(stage);
    json_object_set_new(line, "executions", json_integer(live));
    http_log_emit(line);
}

/* Results still on their way to their clients get there first. */
static void wait_requests(http_server *server, int64_t deadline_us)
{
    pthread_mutex_lock(&server->lock);
    int64_t left_ms;
    while (server->requests_active > 0 && (left_ms = (deadline_us - http_now_us()) / 1000) > 0)
        http_cond_wait_ms(&server->changed, &server->lock, left_ms < 100 ? left_ms : 100);
    pthread_mutex_unlock(&server->lock);
}

void http_server_shutdown(http_server *server)
{
    atomic_store(&server->draining, true);
    http_gate_stop(server->gate); /* no new connections: the listening sockets close */
    /* Sandboxes outlive the server (they are in its state directory): none
     * is killed while it stops; a restarted one reaps those that expired. */
    e2b_reaper_stop(server->reaper);
    server->reaper = NULL;
    http_admission_close(&server->admission);
    log_shutdown(server, "draining");
    int64_t grace_end = http_now_us() + (int64_t)(server->options.grace_s * 1e6);
    if (!http_executions_wait_idle(server, grace_end)) {
        log_shutdown(server, "grace_over_cancelling");
        http_executions_cancel_all(server);
        http_executions_wait_idle(server, INT64_MAX);
    }
    /* MCP sessions end: their GET streams close, their calls stop. */
    http_mcp_sessions_end_all(server->mcp);
    wait_requests(server, http_now_us() + (int64_t)server->options.client_timeout_s * 1000000);
    MHD_stop_daemon(server->listener.daemon);
    if (server->e2b_listener.daemon)
        MHD_stop_daemon(server->e2b_listener.daemon);
    log_shutdown(server, "stopped");
    release(server);
}
