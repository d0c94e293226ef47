/* A request's head (its request line and headers), checked by the gate
 * before libmicrohttpd sees it. MHD answers a head it cannot take with an
 * HTML page of its own (431, 414, 400, 505) that cannot be changed; every
 * head it would refuse is refused here first, in the API's JSON, so MHD
 * only ever gets heads it accepts. Its rules (0.9.75, not pedantic): lines
 * end in CRLF or a bare LF; the request line is METHOD SP TARGET SP
 * HTTP/d.d; a header line has a colon, or continues the one before it
 * (starting with a space or a tab); Content-Length is decimal digits that
 * fit in 64 bits. */
#include "http/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The end of the line that starts at p (its LF), or NULL. */
static const char *line_end(const char *p, const char *end)
{
    return memchr(p, '\n', (size_t)(end - p));
}

/* A line's length without its CR. */
static size_t line_length(const char *p, const char *lf)
{
    size_t len = (size_t)(lf - p);
    return len && p[len - 1] == '\r' ? len - 1 : len;
}

static bool is_token_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static head_verdict refuse(http_error *err, unsigned status, const char *code, const char *what)
{
    http_error_set(err, status, code, "%s", what);
    return HEAD_INVALID;
}

static head_verdict too_large(http_error *err)
{
    http_error_set(err, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large",
                   "the request's head is larger than the limit of %d bytes (or has more than "
                   "%d headers)",
                   HTTP_HEAD_MAX, HTTP_HEADERS_MAX);
    return HEAD_INVALID;
}

/* METHOD SP TARGET SP HTTP/1.x */
static head_verdict check_request_line(const char *p, size_t len, http_error *err)
{
    size_t method = 0;
    while (method < len && is_token_char(p[method]))
        method++;
    const char *last_space = len ? memrchr(p, ' ', len) : NULL;
    if (method == 0 || method == len || p[method] != ' ' || !last_space ||
        last_space == p + method)
        return refuse(err, MHD_HTTP_BAD_REQUEST, "malformed_request",
                      "the request line is not METHOD TARGET HTTP/1.1");
    const char *version = last_space + 1;
    size_t version_len = len - (size_t)(version - p);
    if (version_len != 8 || strncmp(version, "HTTP/", 5) || version[6] != '.' ||
        version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9')
        return refuse(err, MHD_HTTP_BAD_REQUEST, "malformed_request",
                      "the request line does not end in an HTTP version such as HTTP/1.1");
    if (version[5] != '1')
        return refuse(err, MHD_HTTP_HTTP_VERSION_NOT_SUPPORTED, "http_version_not_supported",
                      "only HTTP/1.0 and HTTP/1.1 are served");
    return HEAD_COMPLETE;
}

/* Decimal digits that fit in 64 bits (MHD's own parse takes no sign, no
 * spaces inside). */
static head_verdict check_content_length(const char *value, size_t len, http_error *err)
{
    while (len && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (len == 0)
        return refuse(err, MHD_HTTP_BAD_REQUEST, "invalid_content_length",
                      "Content-Length is empty");
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (value[i] < '0' || value[i] > '9')
            return refuse(err, MHD_HTTP_BAD_REQUEST, "invalid_content_length",
                          "Content-Length is not a number of bytes");
        if (n > (UINT64_MAX - (uint64_t)(value[i] - '0')) / 10)
            return refuse(err, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                          "Content-Length is too large");
        n = n * 10 + (uint64_t)(value[i] - '0');
    }
    return HEAD_COMPLETE;
}

static bool name_is(const char *p, size_t len, const char *name)
{
    return strlen(name) == len && !strncasecmp(p, name, len);
}

/* One header line (not a continuation). */
static head_verdict check_header(const char *p, size_t len, http_error *err)
{
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return refuse(err, MHD_HTTP_BAD_REQUEST, "malformed_request",
                      "a header line has no colon");
    size_t name_len = (size_t)(colon - p);
    if (name_is(p, name_len, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        const char *value = colon + 1;
        while (value < p + len && (*value == ' ' || *value == '\t'))
            value++;
        return check_content_length(value, (size_t)(p + len - value), err);
    }
    return HEAD_COMPLETE;
}

head_verdict http_head_check(const char *data, size_t len, size_t *head_len, http_error *err)
{
    const char *p = data, *end = data + len;
    /* Empty lines before the request line are skipped (RFC 9112 2.2). */
    while (p < end && (*p == '\r' || *p == '\n'))
        p++;
    const char *lf = line_end(p, end);
    if (!lf) {
        if (len <= HTTP_HEAD_MAX)
            return HEAD_INCOMPLETE;
        http_error_set(err, MHD_HTTP_URI_TOO_LONG, "uri_too_long",
                       "the request line is longer than the limit of %d bytes", HTTP_HEAD_MAX);
        return HEAD_INVALID;
    }
    head_verdict verdict = check_request_line(p, line_length(p, lf), err);
    unsigned headers = 0;
    bool seen_header = false;
    for (p = lf + 1; verdict == HEAD_COMPLETE; p = lf + 1) {
        if (!(lf = line_end(p, end)))
            break;
        size_t line_len = line_length(p, lf);
        if (line_len == 0) {
            *head_len = (size_t)(lf + 1 - data);
            /* The whole head counts, with the line ends it was sent with. */
            return *head_len > HTTP_HEAD_MAX ? too_large(err) : HEAD_COMPLETE;
        }
        if (p[0] == ' ' || p[0] == '\t') { /* continues the header before */
            if (!seen_header)
                return refuse(err, MHD_HTTP_BAD_REQUEST, "malformed_request",
                              "the first header line starts with a space");
            continue;
        }
        if (++headers > HTTP_HEADERS_MAX)
            return too_large(err);
        seen_header = true;
        verdict = check_header(p, line_len, err);
    }
    if (verdict != HEAD_COMPLETE)
        return verdict;
    return len > HTTP_HEAD_MAX ? too_large(err) : HEAD_INCOMPLETE;
}
