/* Request bodies: bounded while they arrive, and parsed as JSON by jansson
 * only once their nesting is known to be shallow. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* jansson recurses once per nesting level (up to 2048 deep): documents
 * deeper than this are refused before it sees them. */
#define JSON_DEPTH_MAX 64

void http_body_init(http_body *body, size_t limit)
{
    *body = (http_body){.limit = limit};
}

void http_body_free(http_body *body)
{
    free(body->data);
    body->data = NULL;
}

void http_body_append(http_body *body, const char *data, size_t len)
{
    if (body->too_large)
        return; /* past the limit the rest is read and dropped, never kept */
    if (len > body->limit - body->len) {
        body->too_large = true;
        http_body_free(body);
        body->len = body->cap = 0;
        return;
    }
    if (body->len + len > body->cap) {
        size_t cap = body->cap ? body->cap : 16384;
        while (cap < body->len + len)
            cap *= 2;
        char *grown = realloc(body->data, cap);
        if (!grown) {
            body->too_large = true; /* cannot keep it: refuse it like a large one */
            http_body_free(body);
            body->len = body->cap = 0;
            return;
        }
        body->data = grown;
        body->cap = cap;
    }
    memcpy(body->data + body->len, data, len);
    body->len += len;
}

static bool has_body(struct MHD_Connection *connection)
{
    const char *length =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return (length && strtoull(length, NULL, 10) > 0) ||
           MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                       MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

/* application/json, with or without parameters such as charset. */
static bool is_json_type(const char *type)
{
    static const char json[] = "application/json";
    if (!type || strncasecmp(type, json, sizeof json - 1))
        return false;
    char next = type[sizeof json - 1];
    return next == 0 || next == ';' || next == ' ' || next == '\t';
}

bool http_body_expect(http_request *req, http_error *err)
{
    struct MHD_Connection *c = req->connection;
    body_kind kind = req->route->body;
    const char *type =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if ((kind == BODY_JSON || (kind == BODY_JSON_OPTIONAL && has_body(c))) && !is_json_type(type)) {
        http_error_set(err, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
                       "send the body as JSON, with 'Content-Type: application/json'");
        return false;
    }
    /* Refused from the headers alone, before a byte of the body is read. */
    const char *length =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length && strtoull(length, NULL, 10) > req->body.limit) {
        http_error_set(err, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                       "the body is larger than the limit of %zu bytes", req->body.limit);
        return false;
    }
    return true;
}

/* The deepest nesting of arrays and objects, counted outside strings. */
static bool depth_within(const char *text, size_t len, int max)
{
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                return false;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return true;
}

bool http_json_depth_ok(const char *text, size_t len)
{
    return depth_within(text, len, JSON_DEPTH_MAX);
}

json_t *http_json_parse(const char *text, size_t len, http_error *err)
{
    if (!depth_within(text, len, JSON_DEPTH_MAX)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_json",
                       "the JSON is nested deeper than %d levels", JSON_DEPTH_MAX);
        return NULL;
    }
    json_error_t jerr;
    /* NUL is allowed inside strings (code and stdin are bytes); jansson
     * refuses invalid UTF-8 and, with this flag, duplicate keys. */
    json_t *value =
        json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!value) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_json",
                       "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                       jerr.text);
        return NULL;
    }
    if (!json_is_object(value)) {
        json_decref(value);
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_json", "the body must be a JSON object");
        return NULL;
    }
    return value;
}

bool http_body_json(http_request *req, json_t **object, http_error *err)
{
    const http_body *body = &req->body;
    *object = NULL;
    if (body->len == 0 && req->route->body == BODY_JSON_OPTIONAL)
        return true;
    *object = http_json_parse(body->data, body->len, err);
    return *object != NULL;
}
