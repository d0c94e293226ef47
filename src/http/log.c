/* Structured logs: one JSON object per line on stderr, so that a collector
 * needs no parser of its own. Request bodies and tokens are never logged. */
#include "http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

json_t *http_log_event(const char *event)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    char when[40], stamp[64];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", gmtime_r(&now.tv_sec, &tm));
    snprintf(stamp, sizeof stamp, "%s.%03ldZ", when, now.tv_nsec / 1000000);
    json_t *line = json_object();
    json_object_set_new(line, "time", json_string(stamp));
    json_object_set_new(line, "event", json_string(event));
    return line;
}

void http_log_emit(json_t *line)
{
    char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(line);
    if (!text)
        return;
    size_t len = strlen(text);
    text[len] = '\n'; /* replaces the terminator: written by length below */
    /* One write per line, so that lines of concurrent requests never mix. */
    for (size_t done = 0; done <= len;) {
        ssize_t n = write(STDERR_FILENO, text + done, len + 1 - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    free(text);
}

/* The length of the valid UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_sequence(const unsigned char *p, size_t left)
{
    unsigned char c = p[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0;
    }
    if (left < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

json_t *http_json_text(const char *data, size_t len)
{
    json_t *valid = json_stringn(data, len);
    if (valid)
        return valid;
    /* Each invalid byte becomes U+FFFD (3 bytes): at most 3 times longer. */
    char *clean = malloc(len * 3 + 1);
    if (!clean)
        return json_string("");
    size_t used = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence((const unsigned char *)data + i, len - i);
        if (n) {
            memcpy(clean + used, data + i, n);
            used += n;
            i += n;
        } else {
            memcpy(clean + used, "\xEF\xBF\xBD", 3);
            used += 3;
            i++;
        }
    }
    json_t *text = json_stringn(clean, used);
    free(clean);
    return text ? text : json_string("");
}
