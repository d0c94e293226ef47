/* The Connect protocol with its JSON codec, as E2B's SDKs speak it to envd
 * (../shared/E2B-SANDBOX-PROTOCOL.md section 5): unary calls are a JSON
 * body each way; streams are envelopes (a flag byte, a 4-byte big-endian
 * length, the JSON) ending with an end-of-stream envelope that carries
 * the error, if any. A server stream always answers 200 with exactly
 * "application/connect+json" (Python's client refuses a charset there),
 * and always ends with its end-of-stream envelope (JS's refuses less). */
#include "http/http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define ENVELOPE_HEAD 5
#define FLAG_MESSAGE 0x00
#define FLAG_COMPRESSED 0x01
#define FLAG_END 0x02
#define STREAM_TYPE "application/connect+json"
/* A stream's messages wait for a slow client up to this much; beyond it
 * the producer waits too (its process blocks on its output, as on a slow
 * terminal). */
#define STREAM_QUEUE_LIMIT ((size_t)64 << 10)
/* What MHD takes from a stream at once (its buffer, one per stream). */
#define STREAM_BLOCK ((size_t)16 << 10)
/* A producer that waits this long for a client that takes nothing ends
 * the stream (and its connection): a client that stopped reading. */
#define STREAM_STALL_US ((int64_t)E2B_STREAM_STALL_S * 1000000)
/* How long the streams of a sandbox that goes (or pauses) have to give
 * their clients the end (a process's end event or word that it froze, a
 * watch's error) before they are cut. */
#define STREAM_END_GRACE_US ((int64_t)1000000)
/* Keepalive-Ping-Interval is in seconds; E2B's SDKs send 50. */
#define KEEPALIVE_MAX_S 3600

/* Connect's code for an HTTP status (the one its errors are sent with). */
static const char *connect_code(unsigned status)
{
    switch (status) {
    case 400: case 415: return "invalid_argument";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 409: return "already_exists";
    case 413: case 429: case 507: return "resource_exhausted";
    case 405: case 501: return "unimplemented";
    case 502: case 503: return "unavailable";
    case 504: return "deadline_exceeded";
    default: return "internal";
    }
}

/* The message as a JSON string of any bytes (a path in it may not be UTF-8). */
json_t *e2b_connect_error_body(const http_error *err)
{
    return json_pack("{s:s, s:o}", "code", connect_code(err->status), "message",
                     http_json_text(err->message, strlen(err->message)));
}

static bool type_is(const char *type, const char *wanted)
{
    size_t n = strlen(wanted);
    return type && !strncasecmp(type, wanted, n) &&
           (type[n] == 0 || type[n] == ';' || type[n] == ' ');
}

static const char *content_type(http_request *req)
{
    return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND,
                                       MHD_HTTP_HEADER_CONTENT_TYPE);
}

json_t *e2b_connect_unary_request(http_request *req, http_error *err)
{
    if (!type_is(content_type(req), "application/json")) {
        http_error_set(err, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "invalid_argument",
                       "a unary call's body is JSON: send 'Content-Type: application/json'");
        return NULL;
    }
    /* An empty body is the empty message, as Connect allows. */
    if (req->body.len == 0)
        return json_object();
    return http_json_parse(req->body.data, req->body.len, err);
}

/* The envelope at *pos of the body: its flag and payload; false with err
 * when the body ends inside it. */
static bool next_envelope(const http_body *body, size_t *pos, unsigned *flag, const char **data,
                          size_t *len, http_error *err)
{
    size_t left = body->len - *pos;
    if (left < ENVELOPE_HEAD) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "the body ends inside an envelope's 5-byte head");
        return false;
    }
    const unsigned char *head = (const unsigned char *)body->data + *pos;
    size_t n = (size_t)head[1] << 24 | (size_t)head[2] << 16 | (size_t)head[3] << 8 | head[4];
    if (n > left - ENVELOPE_HEAD) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "an envelope says %zu bytes and the body has %zu", n, left - ENVELOPE_HEAD);
        return false;
    }
    *flag = head[0];
    *data = (const char *)head + ENVELOPE_HEAD;
    *len = n;
    *pos += ENVELOPE_HEAD + n;
    if (*flag & FLAG_COMPRESSED) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "compressed envelopes are not accepted: send them uncompressed");
        return false;
    }
    return true;
}

static bool stream_typed(http_request *req, http_error *err)
{
    if (type_is(content_type(req), STREAM_TYPE))
        return true;
    http_error_set(err, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "invalid_argument",
                   "a streaming call's body is enveloped JSON: send 'Content-Type: " STREAM_TYPE
                   "'");
    return false;
}

json_t *e2b_connect_client_stream(http_request *req, http_error *err)
{
    if (!stream_typed(req, err))
        return NULL;
    json_t *messages = json_array();
    size_t pos = 0;
    while (messages && pos < req->body.len) {
        unsigned flag;
        const char *data;
        size_t len;
        if (!next_envelope(&req->body, &pos, &flag, &data, &len, err)) {
            json_decref(messages);
            return NULL;
        }
        if (flag & FLAG_END)
            break;
        json_t *message = http_json_parse(data, len, err);
        if (!message) {
            json_decref(messages);
            return NULL;
        }
        json_array_append_new(messages, message);
    }
    return messages;
}

json_t *e2b_connect_stream_request(http_request *req, http_error *err)
{
    json_t *messages = e2b_connect_client_stream(req, err);
    if (!messages)
        return NULL;
    if (json_array_size(messages) != 1) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                       "a server-streaming call takes exactly one message, not %zu",
                       json_array_size(messages));
        json_decref(messages);
        return NULL;
    }
    json_t *message = json_incref(json_array_get(messages, 0));
    json_decref(messages);
    return message;
}

enum MHD_Result e2b_connect_reply(http_request *req, json_t *message)
{
    return http_reply_json(req, MHD_HTTP_OK, message, NULL, NULL);
}

/* --- server streams ------------------------------------------------------------------ */

/* The streams of one sandbox: the bytes they hold together (queued for
 * their clients, or charged by their producers), and the way to end them
 * all when the sandbox goes. */
typedef struct stream_group {
    struct stream_group *next;
    char sandbox[128];
    size_t members;
    atomic_size_t held;
} stream_group;

struct e2b_stream {
    http_server *server;
    struct MHD_Connection *connection;
    uint64_t *bytes_sent;
    int client_fd;
    event_queue queue;
    char *keepalive; /* the keepalive message's envelope, or NULL */
    size_t keepalive_len;
    int64_t keepalive_us;
    int64_t last_sent_us;
    _Atomic int64_t push_since_us; /* when the producer's current send began */
    atomic_bool gone;
    /* The client's socket may be shut down (to end a stalled or orphaned
     * stream) only while MHD has the response, so before it closes it. */
    pthread_mutex_t socket_lock;
    bool response_gone;
    stream_group *group; /* NULL: a stream of no sandbox */
    e2b_stream *next_member;
    atomic_size_t charged; /* of group->held: queued messages' bytes */
    /* Two owners: the producer (until e2b_stream_end) and the response
     * (until MHD frees it); the last one frees the stream. */
    atomic_int owners;
};

/* A message as an envelope (flag, length, JSON); NULL when it cannot be. */
static char *envelope(unsigned flag, const char *json, size_t *len)
{
    size_t n = strlen(json);
    if (n > 0xffffffffu)
        return NULL;
    char *frame = malloc(ENVELOPE_HEAD + n);
    if (!frame)
        return NULL;
    frame[0] = (char)flag;
    frame[1] = (char)(n >> 24);
    frame[2] = (char)(n >> 16);
    frame[3] = (char)(n >> 8);
    frame[4] = (char)n;
    memcpy(frame + ENVELOPE_HEAD, json, n);
    *len = ENVELOPE_HEAD + n;
    return frame;
}

static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static stream_group *groups;
static e2b_stream *members; /* every stream of a group */

static void refund(e2b_stream *stream, size_t n)
{
    if (stream->group && n)
        atomic_fetch_sub(&stream->group->held, n);
}

/* Out of its group (the last member frees it), its charge refunded. */
static void leave_group(e2b_stream *stream)
{
    stream_group *g = stream->group;
    if (!g)
        return;
    pthread_mutex_lock(&groups_lock);
    for (e2b_stream **at = &members; *at; at = &(*at)->next_member)
        if (*at == stream) {
            *at = stream->next_member;
            break;
        }
    refund(stream, atomic_load(&stream->charged));
    if (--g->members == 0)
        for (stream_group **at = &groups; *at; at = &(*at)->next)
            if (*at == g) {
                *at = g->next;
                free(g);
                break;
            }
    stream->group = NULL;
    pthread_mutex_unlock(&groups_lock);
}

static void stream_release(e2b_stream *stream)
{
    if (atomic_fetch_sub(&stream->owners, 1) != 1)
        return;
    leave_group(stream);
    http_queue_destroy(&stream->queue);
    pthread_mutex_destroy(&stream->socket_lock);
    free(stream->keepalive);
    free(stream);
}

/* Cuts the stream: the producer's sends fail from now on, and the
 * client's connection ends even when it reads nothing (MHD then frees
 * the response). */
static void stream_cut(e2b_stream *stream)
{
    atomic_store(&stream->gone, true);
    pthread_mutex_lock(&stream->socket_lock);
    if (!stream->response_gone && stream->client_fd >= 0)
        shutdown(stream->client_fd, SHUT_RDWR);
    pthread_mutex_unlock(&stream->socket_lock);
}

/* Cuts it from outside its producer, which may be waiting for room. */
static void stream_abort(e2b_stream *stream)
{
    stream_cut(stream);
    http_queue_wake(&stream->queue);
}

bool e2b_stream_join(e2b_stream *stream, const char *sandbox)
{
    pthread_mutex_lock(&groups_lock);
    stream_group *g = groups;
    while (g && strcmp(g->sandbox, sandbox))
        g = g->next;
    if (!g && strlen(sandbox) < sizeof g->sandbox && (g = calloc(1, sizeof *g))) {
        snprintf(g->sandbox, sizeof g->sandbox, "%s", sandbox);
        atomic_init(&g->held, 0);
        g->next = groups;
        groups = g;
    }
    if (g) {
        g->members++;
        stream->group = g;
        stream->next_member = members;
        members = stream;
    }
    pthread_mutex_unlock(&groups_lock);
    return g != NULL;
}

void e2b_streams_end_sandbox(const char *sandbox)
{
    int64_t deadline = http_now_us() + STREAM_END_GRACE_US;
    for (;;) {
        bool late = http_now_us() >= deadline, left = false;
        pthread_mutex_lock(&groups_lock);
        for (e2b_stream *s = members; s; s = s->next_member)
            if (!strcmp(s->group->sandbox, sandbox)) {
                left = true;
                if (late)
                    stream_abort(s);
            }
        pthread_mutex_unlock(&groups_lock);
        if (!left || late)
            return;
        usleep(20000);
    }
}

void e2b_stream_charge(e2b_stream *stream, size_t bytes, bool charge)
{
    if (stream->group && charge)
        atomic_fetch_add(&stream->group->held, bytes);
    else
        refund(stream, bytes);
}

bool e2b_stream_over_budget(e2b_stream *stream)
{
    return stream->group && atomic_load(&stream->group->held) >= E2B_SANDBOX_STREAM_BUDGET;
}

size_t e2b_streams_held(const char *sandbox)
{
    size_t held = 0;
    pthread_mutex_lock(&groups_lock);
    for (stream_group *g = groups; g; g = g->next)
        if (!strcmp(g->sandbox, sandbox))
            held = atomic_load(&g->held);
    pthread_mutex_unlock(&groups_lock);
    return held;
}

/* What left the queue for the client is no longer the group's: the
 * charged messages come before the uncharged end frame. */
static void taken(e2b_stream *stream, size_t n)
{
    if (!stream->group)
        return;
    size_t charged = atomic_load(&stream->charged);
    size_t back = n < charged ? n : charged;
    atomic_fetch_sub(&stream->charged, back);
    refund(stream, back);
}

/* MHD's content reader, on the connection's thread (thread per
 * connection, so it may block here until there is something to send). */
static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    e2b_stream *stream = cls;
    for (;;) {
        bool finished;
        size_t n = http_queue_take(&stream->queue, buf, max, &finished);
        taken(stream, n);
        int64_t now = http_now_us();
        if (!n && !finished && stream->keepalive &&
            now - stream->last_sent_us >= stream->keepalive_us && stream->keepalive_len <= max) {
            n = stream->keepalive_len;
            memcpy(buf, stream->keepalive, n);
        }
        if (n) {
            stream->last_sent_us = now;
            *stream->bytes_sent += n;
            return (ssize_t)n;
        }
        if (finished) {
            http_release_connection(stream->server, stream->connection);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        int wait_ms = 1000;
        if (stream->keepalive) {
            int64_t due_ms = (stream->last_sent_us + stream->keepalive_us - now) / 1000;
            wait_ms = due_ms < 1 ? 1 : due_ms < wait_ms ? (int)due_ms : wait_ms;
        }
        if (!http_queue_wait(&stream->queue, stream->client_fd, wait_ms)) {
            atomic_store(&stream->gone, true);
            http_queue_wake(&stream->queue);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

/* The response is done with the stream, the client gone or served. */
static void free_stream(void *cls)
{
    e2b_stream *stream = cls;
    pthread_mutex_lock(&stream->socket_lock);
    stream->response_gone = true;
    pthread_mutex_unlock(&stream->socket_lock);
    atomic_store(&stream->gone, true);
    http_queue_wake(&stream->queue);
    stream_release(stream);
}

/* The interval the client asked for, in seconds; 0: none. */
static unsigned keepalive_interval(struct MHD_Connection *connection)
{
    const char *value =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
    if (!value)
        return 0;
    char *end;
    unsigned long s = strtoul(value, &end, 10);
    if (*end || value[0] == '-' || s == 0)
        return 0;
    return s > KEEPALIVE_MAX_S ? KEEPALIVE_MAX_S : (unsigned)s;
}

e2b_stream *e2b_stream_open(http_request *req, const char *keepalive_json,
                            enum MHD_Result *queued)
{
    e2b_stream *stream = calloc(1, sizeof *stream);
    if (!stream || http_queue_init(&stream->queue, STREAM_QUEUE_LIMIT) != 0) {
        free(stream);
        *queued = http_reply_fail(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
                                  "out of memory for a stream");
        return NULL;
    }
    stream->server = req->server;
    stream->connection = req->connection;
    stream->bytes_sent = &req->bytes_sent;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    stream->client_fd = info ? info->connect_fd : -1;
    unsigned interval = keepalive_interval(req->connection);
    if (interval && keepalive_json) {
        stream->keepalive = envelope(FLAG_MESSAGE, keepalive_json, &stream->keepalive_len);
        stream->keepalive_us = (int64_t)interval * 1000000;
    }
    stream->last_sent_us = http_now_us();
    atomic_init(&stream->push_since_us, 0);
    atomic_init(&stream->gone, false);
    atomic_init(&stream->owners, 2);
    atomic_init(&stream->charged, 0);
    pthread_mutex_init(&stream->socket_lock, NULL);
    struct MHD_Response *response = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, STREAM_BLOCK, read_stream, stream, free_stream);
    if (!response) {
        pthread_mutex_destroy(&stream->socket_lock);
        http_queue_destroy(&stream->queue);
        free(stream->keepalive);
        free(stream);
        *queued = MHD_NO;
        return NULL;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, STREAM_TYPE);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(response, "X-Accel-Buffering", "no");
    /* A stream lasts as long as its process or watch: no idle timeout
     * while it is open (the keepalive keeps proxies' clocks too). */
    http_hold_connection(req->connection);
    *queued = http_reply(req, MHD_HTTP_OK, response, 0);
    if (*queued != MHD_YES) {
        /* MHD has freed the response, and with it the response's share. */
        stream_release(stream);
        return NULL;
    }
    return stream;
}

/* The producer gives up: the client went, the stream was ended from
 * outside, or one message has waited STREAM_STALL_US for room (a client
 * that stopped reading, or takes a trickle: then the stream ends, its
 * process runs on). Called with the queue's lock held. */
static bool client_gone(void *arg)
{
    e2b_stream *stream = arg;
    if (atomic_load(&stream->gone))
        return true;
    if (http_now_us() - atomic_load(&stream->push_since_us) < STREAM_STALL_US)
        return false;
    stream_cut(stream);
    return true;
}

bool e2b_stream_client_gone(e2b_stream *stream)
{
    return atomic_load(&stream->gone);
}

bool e2b_stream_send(e2b_stream *stream, json_t *message)
{
    char *json = message ? json_dumps(message, JSON_COMPACT) : NULL;
    json_decref(message);
    size_t len = 0;
    char *frame = json ? envelope(FLAG_MESSAGE, json, &len) : NULL;
    free(json);
    if (!frame)
        return !client_gone(stream);
    /* Charged before it is queued, so that the client's take finds it. */
    if (stream->group) {
        atomic_fetch_add(&stream->charged, len);
        e2b_stream_charge(stream, len, true);
    }
    atomic_store(&stream->push_since_us, http_now_us());
    bool sent = http_queue_push(&stream->queue, frame, len, client_gone, stream);
    if (!sent && stream->group) {
        atomic_fetch_sub(&stream->charged, len);
        refund(stream, len);
    }
    free(frame);
    return sent;
}

void e2b_stream_end(e2b_stream *stream, const http_error *err)
{
    json_t *end = json_object();
    if (err) {
        json_t *error = e2b_connect_error_body(err);
        json_object_set_new(end, "error", error ? error : json_object());
    }
    char *json = json_dumps(end, JSON_COMPACT);
    json_decref(end);
    size_t len = 0;
    char *frame = envelope(FLAG_END, json ? json : "{}", &len);
    free(json);
    http_queue_finish(&stream->queue, frame, len);
    free(frame);
    stream_release(stream);
}

enum MHD_Result e2b_stream_refused(http_request *req, const http_error *err)
{
    enum MHD_Result queued;
    e2b_stream *stream = e2b_stream_open(req, NULL, &queued);
    if (stream)
        e2b_stream_end(stream, err);
    return queued;
}

enum MHD_Result e2b_connect_refuse(http_request *req, const http_error *err)
{
    return type_is(content_type(req), STREAM_TYPE) ? e2b_stream_refused(req, err)
                                                   : http_reply_error(req, err);
}
