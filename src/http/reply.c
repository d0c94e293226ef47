/* Responses. Every error is JSON, {"error": {"code": ..., "message": ...}},
 * with the status that says whose fault it was: 4xx for the client's
 * mistakes, 5xx only when runbox or the host failed. */
#include "http/http.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void http_error_set(http_error *err, unsigned status, const char *code, const char *fmt, ...)
{
    err->status = status;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

void http_error_from_engine(http_error *err, const rbx_error *engine_err)
{
    switch (engine_err->status) {
    case RBX_EINVAL:
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request", "%s", engine_err->message);
        break;
    case RBX_ENOENT:
        http_error_set(err, MHD_HTTP_NOT_FOUND, "not_found", "%s", engine_err->message);
        break;
    case RBX_EBUSY:
        http_error_set(err, MHD_HTTP_CONFLICT, "busy", "%s", engine_err->message);
        break;
    case RBX_ENOSPC:
        http_error_set(err, MHD_HTTP_INSUFFICIENT_STORAGE, "no_space", "%s", engine_err->message);
        break;
    default:
        http_error_set(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error", "%s",
                       engine_err->message);
        break;
    }
}

json_t *http_error_json(const http_error *err)
{
    json_t *inner = json_object();
    json_object_set_new(inner, "code", json_string(err->code));
    /* Messages may quote what the client sent, bytes and all. */
    json_object_set_new(inner, "message", http_json_text(err->message, strlen(err->message)));
    return inner;
}

size_t http_error_response(const http_error *err, char *buf, size_t size)
{
    json_t *body = json_object();
    json_object_set_new(body, "error", http_error_json(err));
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    if (!text)
        return 0;
    const char *reason = MHD_get_reason_phrase_for(err->status);
    int len = snprintf(buf, size,
                       "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s\n",
                       err->status, reason && *reason ? reason : "Error", strlen(text) + 1,
                       err->status == MHD_HTTP_TOO_MANY_REQUESTS ||
                               err->status == MHD_HTTP_SERVICE_UNAVAILABLE
                           ? "Retry-After: 1\r\n"
                           : "",
                       text);
    free(text);
    return len > 0 && (size_t)len < size ? (size_t)len : 0;
}

enum MHD_Result http_reply(http_request *req, unsigned status, struct MHD_Response *response,
                           uint64_t bytes)
{
    /* One request per connection: the next one's head passes the gate
     * (gate.c), where waiting costs no thread and the head is checked. */
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result queued = MHD_queue_response(req->connection, status, response);
    MHD_destroy_response(response);
    req->status = status;
    req->bytes_sent += bytes;
    return queued;
}

enum MHD_Result http_reply_json_text(http_request *req, unsigned status, char *text,
                                     const char *header, const char *value)
{
    size_t len = text ? strlen(text) : 0;
    char *line = text ? realloc(text, len + 2) : NULL;
    if (!line) {
        free(text);
        return MHD_NO;
    }
    line[len++] = '\n';
    line[len] = 0;
    struct MHD_Response *response =
        MHD_create_response_from_buffer(len, line, MHD_RESPMEM_MUST_FREE);
    if (!response) {
        free(line);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (header)
        MHD_add_response_header(response, header, value);
    return http_reply(req, status, response, len);
}

enum MHD_Result http_reply_json(http_request *req, unsigned status, json_t *body,
                                const char *header, const char *value)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    return http_reply_json_text(req, status, text, header, value);
}

enum MHD_Result http_reply_error(http_request *req, const http_error *err)
{
    json_t *body = NULL;
    if (req->api->error_body)
        body = req->api->error_body(err);
    else if ((body = json_object()))
        json_object_set_new(body, "error", http_error_json(err));
    switch (err->status) {
    case MHD_HTTP_UNAUTHORIZED:
        return http_reply_json(req, err->status, body, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    case MHD_HTTP_TOO_MANY_REQUESTS:
        return http_reply_json(req, err->status, body, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    default: /* 503 too closes the connection, as every response does */
        return http_reply_json(req, err->status, body, NULL, NULL);
    }
}

enum MHD_Result http_reply_fail(http_request *req, unsigned status, const char *code,
                                const char *fmt, ...)
{
    http_error err = {.status = status, .code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.message, sizeof err.message, fmt, ap);
    va_end(ap);
    return http_reply_error(req, &err);
}

enum MHD_Result http_reply_engine(http_request *req, const rbx_error *engine_err)
{
    http_error err;
    http_error_from_engine(&err, engine_err);
    return http_reply_error(req, &err);
}

void http_hold_connection(struct MHD_Connection *connection)
{
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
}

void http_release_connection(const http_server *server, struct MHD_Connection *connection)
{
    /* From 0, MHD also restarts the idle clock: the wait does not count. */
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT,
                              server->options.client_timeout_s);
}
