/* Streaming responses: the execution's events (events.c) go to the client
 * as they happen, on the connection's thread, which waits for them and
 * meanwhile watches the client (execution.c). */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>

/* MHD's content reader: runs on the connection's thread, which may block
 * here (thread per connection) until there is something to send. */
static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max)
{
    execution *ex = cls;
    const stream_dialect *dialect = ex->dialect;
    int wait_ms = dialect && dialect->keepalive_ms ? dialect->keepalive_ms : -1;
    for (;;) {
        bool finished;
        size_t n = http_queue_take(&ex->events, buf, max, &finished);
        if (!n && !finished && wait_ms > 0 &&
            http_now_us() - ex->last_sent_us >= (int64_t)wait_ms * 1000 &&
            strlen(dialect->keepalive) <= max) {
            n = strlen(dialect->keepalive);
            memcpy(buf, dialect->keepalive, n);
        }
        if (n) {
            ex->last_sent_us = http_now_us();
            *ex->bytes_sent += n;
            return (ssize_t)n;
        }
        if (finished) {
            /* Back to the idle timeout: a client that stops reading the
             * end of a stream is dropped like any idle client. */
            http_release_connection(ex->server, ex->connection);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (!http_execution_wait(ex, wait_ms))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

/* The response is freed when the connection is done with it, including
 * when the client left mid-stream: the execution is cancelled then. */
static void free_execution(void *cls)
{
    http_execution_free(cls);
}

/* The status line waits for the first event (or the end) for at most this
 * long, so that a request the engine refuses at once still gets its 4xx
 * status; later failures arrive as an "error" event. */
#define COMMIT_WAIT_MS 500

enum MHD_Result http_stream_reply(http_request *req, execution *ex)
{
    int64_t commit_at = http_now_us() + COMMIT_WAIT_MS * 1000;
    while (!http_execution_done(ex) && !http_queue_has_data(&ex->events)) {
        int64_t left_ms = (commit_at - http_now_us()) / 1000;
        if (left_ms <= 0)
            break;
        if (!http_execution_wait(ex, (int)left_ms)) {
            http_execution_free(ex);
            return MHD_NO;
        }
    }
    http_error err;
    if (http_execution_done(ex) && !http_execution_succeeded(ex, &err)) {
        http_execution_free(ex);
        http_release_connection(req->server, req->connection);
        return http_reply_error(req, &err);
    }
    struct MHD_Response *response = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 64 * 1024, read_events, ex, free_execution);
    if (!response) {
        http_execution_free(ex);
        return MHD_NO;
    }
    ex->last_sent_us = http_now_us();
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                            ex->dialect                ? ex->dialect->content_type
                            : ex->format == STREAM_SSE ? "text/event-stream"
                                                       : "application/x-ndjson");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    /* Proxies such as nginx would otherwise buffer the stream. */
    MHD_add_response_header(response, "X-Accel-Buffering", "no");
    return http_reply(req, MHD_HTTP_OK, response, 0);
}
