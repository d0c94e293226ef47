/* POST /v1/execute: the answer is the engine's result object (200 whatever
 * the code did), or its events as they happen when the client asks for a
 * stream. */
#include "http/http.h"

#include <string.h>

/* "stream": false wins; else text/event-stream, then NDJSON, is chosen by
 * the Accept header or "stream": true. */
static stream_format wanted_format(struct MHD_Connection *connection, int stream)
{
    const char *accept =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    if (stream == 0)
        return STREAM_NONE;
    if (accept && strcasestr(accept, "text/event-stream"))
        return STREAM_SSE;
    if (stream == 1 || (accept && strcasestr(accept, "application/x-ndjson")))
        return STREAM_NDJSON;
    return STREAM_NONE;
}

static enum MHD_Result plain_reply(http_request *req, execution *ex)
{
    while (!http_execution_done(ex))
        if (!http_execution_wait(ex, -1)) {
            http_execution_free(ex); /* the client left: nobody to answer */
            return MHD_NO;
        }
    http_release_connection(req->server, req->connection);
    http_error err;
    bool succeeded = http_execution_succeeded(ex, &err);
    char *json = http_execution_take_result(ex);
    http_execution_free(ex);
    if (!succeeded)
        return http_reply_error(req, &err);
    return http_reply_json_text(req, MHD_HTTP_OK, json, NULL, NULL);
}

enum MHD_Result http_execute(http_request *req, json_t *body)
{
    http_error err;
    execution *ex = http_execution_new(req, body, &err);
    if (!ex)
        return http_reply_error(req, &err);
    ex->format = wanted_format(req->connection, ex->form.stream);
    enum MHD_Result refused;
    if (!http_execution_admit(req, ex, &refused))
        return refused;
    return ex->format == STREAM_NONE ? plain_reply(req, ex) : http_stream_reply(req, ex);
}
