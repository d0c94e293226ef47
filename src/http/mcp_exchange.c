/* A session's output, routed to HTTP. Every message its MCP server sends
 * (from the request's own thread, or a tool call's worker) goes to the
 * exchange it belongs to:
 * - a response to the POST of its request, which then ends;
 * - notifications/progress to the POST whose tools/call carried its
 *   progressToken (an SSE stream; a client that asked for JSON gets only
 *   the response);
 * - any other notification (the server's own) to the GET stream, when one
 *   is open; without one it is dropped, which the spec allows.
 * The connection's thread sends what an exchange holds as it comes, and
 * meanwhile watches the client: a client that leaves before its answer
 * cancels its call (runbox's API does the same with an execution), since
 * runbox offers no resumption (no event ids). */
#include "http/mcp_http.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Unsent bytes an exchange may hold; past it progress is dropped, never a
 * response. */
#define EXCHANGE_PENDING_MAX ((size_t)1 << 20)
/* An SSE comment after this much silence, so that proxies and clients see
 * a live stream and a gone client is noticed. */
#define KEEPALIVE_MS 15000
static const char keepalive[] = ": keepalive\n\n";

struct mcp_exchange {
    mcp_exchange *next;
    mcp_session *session; /* a reference */
    json_t *id;           /* NULL: the GET stream */
    json_t *progress_token;
    bool sse;
    bool listed; /* routing reaches it (the session's lock guards this) */
    event_queue queue;
    http_server *server;
    struct MHD_Connection *connection;
    int client_fd;
    uint64_t *bytes_sent;
    int64_t last_sent_us;
    unsigned status; /* 2026-07-28: its error's HTTP status, once answered */
};

unsigned mcp_http_status_of(int code)
{
    switch (code) {
    case RPC_PARSE_ERROR:
    case RPC_INVALID_REQUEST:
    case RPC_INVALID_PARAMS:
    case RPC_HEADER_MISMATCH:
    case -32021: /* a client capability the request needs is missing */
    case RPC_UNSUPPORTED_VERSION:
        return MHD_HTTP_BAD_REQUEST;
    case RPC_METHOD_NOT_FOUND:
        return MHD_HTTP_NOT_FOUND;
    default:
        return MHD_HTTP_OK;
    }
}

static bool give_up_at_once(void *arg)
{
    (void)arg;
    return true;
}

static mcp_exchange *by_id(mcp_session *session, const json_t *id)
{
    for (mcp_exchange *x = session->exchanges; x; x = x->next)
        if (json_equal(x->id, id))
            return x;
    return NULL;
}

static mcp_exchange *by_token(mcp_session *session, const json_t *token)
{
    for (mcp_exchange *x = session->exchanges; token && x; x = x->next)
        if (x->progress_token && json_equal(x->progress_token, token))
            return x;
    return NULL;
}

static void unlink_exchange(mcp_session *session, mcp_exchange *exchange)
{
    if (exchange == session->listener)
        session->listener = NULL;
    for (mcp_exchange **at = &session->exchanges; *at; at = &(*at)->next)
        if (*at == exchange) {
            *at = exchange->next;
            break;
        }
    exchange->listed = false;
}

/* One message into an exchange: an SSE event, or the JSON body. The
 * caller holds the session's lock. True when the exchange has ended. */
static bool put(mcp_exchange *x, const char *json, bool last, bool droppable)
{
    if (!x->sse && !last)
        return false; /* a JSON answer is the response alone */
    size_t len = strlen(json);
    char *frame = malloc(len + 32);
    if (!frame)
        return false;
    int n = x->sse ? snprintf(frame, len + 32, "event: message\ndata: %s\n\n", json)
                   : snprintf(frame, len + 32, "%s\n", json);
    bool ended = last;
    if (last) {
        http_queue_finish(&x->queue, frame, (size_t)n);
    } else if (!http_queue_push(&x->queue, frame, (size_t)n, give_up_at_once, NULL) &&
               !droppable) {
        /* The GET stream of a client this far behind ends (it may open
         * another) rather than lose the server's notifications unseen. */
        http_queue_finish(&x->queue, NULL, 0);
        ended = true;
    }
    free(frame);
    return ended;
}

void mcp_exchange_route(void *context, json_t *message, bool droppable)
{
    mcp_session *session = context;
    const char *method = json_string_value(json_object_get(message, "method"));
    char *json = json_dumps(message, JSON_COMPACT);
    pthread_mutex_lock(&session->lock);
    mcp_exchange *to;
    if (!method)
        to = by_id(session, json_object_get(message, "id"));
    else if (!strcmp(method, "notifications/progress"))
        to = by_token(session, json_object_get(json_object_get(message, "params"),
                                               "progressToken"));
    else if (session->stateless)
        to = session->exchanges; /* its one request's (a listen stream's) */
    else
        to = session->listener;
    /* 2026-07-28 maps errors to HTTP statuses, for a JSON answer. */
    json_t *error = json_object_get(message, "error");
    if (to && !method && session->stateless && error)
        to->status = mcp_http_status_of((int)json_integer_value(json_object_get(error, "code")));
    /* Once answered (or ended), nothing more goes to it. */
    if (to && json && put(to, json, !method, droppable))
        unlink_exchange(session, to);
    pthread_mutex_unlock(&session->lock);
    free(json);
    json_decref(message);
}

mcp_exchange *mcp_exchange_open(http_request *req, mcp_session *session, json_t *id,
                                json_t *progress_token, bool sse, http_error *err)
{
    mcp_exchange *x = calloc(1, sizeof *x);
    if (!x || http_queue_init(&x->queue, EXCHANGE_PENDING_MAX) != 0) {
        free(x);
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                       "out of memory for a response");
        mcp_session_release(session);
        return NULL;
    }
    x->session = session;
    x->id = json_incref(id);
    x->progress_token = json_incref(progress_token);
    x->sse = sse;
    x->server = req->server;
    x->connection = req->connection;
    x->bytes_sent = &req->bytes_sent;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    x->client_fd = info ? info->connect_fd : -1;
    pthread_mutex_lock(&session->lock);
    bool taken = id ? by_id(session, id) != NULL : session->listener != NULL;
    if (!taken) {
        x->next = session->exchanges;
        session->exchanges = x;
        if (!id)
            session->listener = x;
        x->listed = true;
    }
    pthread_mutex_unlock(&session->lock);
    if (taken) {
        if (id)
            http_error_set(err, MHD_HTTP_CONFLICT, "id_in_use",
                           "a request with this id is still waiting for its answer in this "
                           "session; use another id");
        else
            http_error_set(err, MHD_HTTP_CONFLICT, "stream_open",
                           "this session has a GET stream open already (one at a time)");
        x->session = NULL;
        json_decref(x->id);
        json_decref(x->progress_token);
        http_queue_destroy(&x->queue);
        free(x);
        mcp_session_release(session);
        return NULL;
    }
    return x;
}

/* MHD's content reader, on the connection's own thread (thread per
 * connection: a long call holds only its connection). */
static ssize_t read_exchange(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    mcp_exchange *x = cls;
    for (;;) {
        bool finished;
        size_t n = http_queue_take(&x->queue, buf, max, &finished);
        int64_t now = http_now_us();
        if (!n && !finished && x->sse && now - x->last_sent_us >= KEEPALIVE_MS * 1000 &&
            sizeof keepalive - 1 <= max) {
            n = sizeof keepalive - 1;
            memcpy(buf, keepalive, n);
        }
        if (n) {
            x->last_sent_us = now;
            *x->bytes_sent += n;
            return (ssize_t)n;
        }
        if (finished) {
            http_release_connection(x->server, x->connection);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        int64_t due_ms = (x->last_sent_us + KEEPALIVE_MS * 1000 - now) / 1000;
        int wait_ms = x->sse ? (due_ms < 1 ? 1 : (int)due_ms) : 1000;
        if (!http_queue_wait(&x->queue, x->client_fd, wait_ms))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

/* The response is done with the exchange: answered, or the client left. */
static void free_exchange(void *cls)
{
    mcp_exchange *x = cls;
    mcp_session *session = x->session;
    pthread_mutex_lock(&session->lock);
    bool unanswered = x->listed && x->id;
    if (x->listed)
        unlink_exchange(session, x);
    pthread_mutex_unlock(&session->lock);
    /* The client left before its answer: its call stops (a request that is
     * no call is answered at once, and finds nothing to cancel). */
    if (unanswered)
        mcp_calls_cancel(session->server->calls, x->id);
    json_decref(x->id);
    json_decref(x->progress_token);
    http_queue_destroy(&x->queue);
    free(x);
    mcp_session_release(session);
}

enum MHD_Result mcp_exchange_reply(http_request *req, mcp_exchange *x, const char *session_header)
{
    struct MHD_Response *response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, read_exchange, x,
                                          free_exchange);
    if (!response) {
        free_exchange(x);
        return MHD_NO;
    }
    x->last_sent_us = http_now_us();
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                            x->sse ? "text/event-stream" : "application/json");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(response, "X-Accel-Buffering", "no");
    if (session_header)
        MHD_add_response_header(response, "Mcp-Session-Id", session_header);
    /* A JSON answer given already (a request other than a call or a
     * listen is answered while it is taken) has its error's status. */
    pthread_mutex_lock(&x->session->lock);
    unsigned status = !x->sse && x->status ? x->status : MHD_HTTP_OK;
    pthread_mutex_unlock(&x->session->lock);
    /* A call lasts as long as its code: no idle timeout until it ends. */
    http_hold_connection(req->connection);
    return http_reply(req, status, response, 0);
}

void mcp_exchange_end_all(mcp_session *session)
{
    pthread_mutex_lock(&session->lock);
    while (session->exchanges) {
        mcp_exchange *x = session->exchanges;
        http_queue_finish(&x->queue, NULL, 0);
        unlink_exchange(session, x);
    }
    pthread_mutex_unlock(&session->lock);
}
