/* Bounded capture of a program's output: the head and the tail of each
 * stream are kept, whatever the program prints, so memory stays bounded and
 * the agent still sees how the output began and how it ended. */
#include "base/capture.h"
#include "runbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rbx_capture_init(rbx_capture *capture, size_t cap)
{
    memset(capture, 0, sizeof *capture);
    capture->head_cap = cap / 2;
    capture->tail_cap = cap - capture->head_cap;
    return 0;
}

void rbx_capture_add(rbx_capture *capture, const char *data, size_t len)
{
    capture->total += len;
    if (capture->head_len < capture->head_cap) {
        size_t take = capture->head_cap - capture->head_len;
        if (take > len)
            take = len;
        /* Allocated on first use, so an execution that prints nothing costs nothing. */
        if (!capture->head && !(capture->head = malloc(capture->head_cap)))
            return;
        memcpy(capture->head + capture->head_len, data, take);
        capture->head_len += take;
        data += take;
        len -= take;
    }
    if (len == 0 || capture->tail_cap == 0)
        return;
    if (!capture->tail) {
        capture->tail = malloc(capture->tail_cap);
        if (!capture->tail)
            return;
    }
    if (len >= capture->tail_cap) {
        memcpy(capture->tail, data + len - capture->tail_cap, capture->tail_cap);
        capture->tail_len = capture->tail_cap;
        capture->tail_pos = 0;
        return;
    }
    size_t first = capture->tail_cap - capture->tail_pos;
    if (first > len)
        first = len;
    memcpy(capture->tail + capture->tail_pos, data, first);
    memcpy(capture->tail, data + first, len - first);
    capture->tail_pos = (capture->tail_pos + len) % capture->tail_cap;
    capture->tail_len += len;
    if (capture->tail_len > capture->tail_cap)
        capture->tail_len = capture->tail_cap;
}

void rbx_capture_free(rbx_capture *capture)
{
    free(capture->head);
    free(capture->tail);
    capture->head = capture->tail = NULL;
}

char *rbx_capture_finish(rbx_capture *capture, const char *stream_name, uint64_t *dropped,
                         size_t *len)
{
    uint64_t kept = capture->head_len + capture->tail_len;
    *dropped = capture->total - kept;
    char marker[160] = "";
    if (*dropped)
        snprintf(marker, sizeof marker, "\n[runbox: %llu bytes of %s left out here]\n",
                 (unsigned long long)*dropped, stream_name);
    size_t raw_len = (size_t)kept + strlen(marker);
    char *raw = malloc(raw_len + 1);
    if (!raw) {
        rbx_capture_free(capture);
        *len = 0;
        return NULL;
    }
    size_t at = 0;
    if (capture->head_len)
        memcpy(raw, capture->head, capture->head_len);
    at += capture->head_len;
    memcpy(raw + at, marker, strlen(marker));
    at += strlen(marker);
    /* Unroll the ring: the oldest kept byte is at tail_pos once it wrapped. */
    if (capture->tail_len) {
        bool wrapped = capture->tail_len == capture->tail_cap;
        size_t start = wrapped ? capture->tail_pos : 0;
        size_t first = wrapped ? capture->tail_cap - start : capture->tail_len;
        memcpy(raw + at, capture->tail + start, first);
        memcpy(raw + at + first, capture->tail, capture->tail_len - first);
        at += capture->tail_len;
    }
    rbx_capture_free(capture);
    char *text = rbx_utf8_sanitize(raw, at, len);
    free(raw);
    return text;
}

/* Length of the valid UTF-8 sequence at s (at most avail bytes), or 0 when
 * it is not valid; then *bad is the length of its maximal valid prefix (at
 * least 1), replaced as a whole by one U+FFFD as Unicode recommends. A
 * valid prefix cut short by the end of the data is reported as -1. */
static int utf8_sequence(const unsigned char *s, size_t avail, size_t *bad)
{
    unsigned char c = s[0];
    int need;
    unsigned char lo = 0x80, hi = 0xBF;
    *bad = 1;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= avail) {
            *bad = (size_t)i;
            return -1;
        }
        unsigned char b = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) {
            *bad = (size_t)i;
            return 0;
        }
    }
    return need;
}

char *rbx_utf8_sanitize(const char *data, size_t len, size_t *out_len)
{
    /* Worst case: every byte becomes the three bytes of U+FFFD. */
    char *out = malloc(len * 3 + 1);
    if (!out) {
        *out_len = 0;
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)data;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t bad;
        int n = utf8_sequence(s + i, len - i, &bad);
        if (n > 0) {
            memcpy(out + o, s + i, (size_t)n);
            o += (size_t)n;
            i += (size_t)n;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += bad;
        }
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

size_t rbx_utf8_valid_prefix(const char *data, size_t len)
{
    const unsigned char *s = (const unsigned char *)data;
    size_t i = 0, bad;
    for (int n; i < len && (n = utf8_sequence(s + i, len - i, &bad)) > 0;)
        i += (size_t)n;
    return i;
}

size_t rbx_utf8_complete_prefix(const char *data, size_t len)
{
    /* Only the last three bytes can start an unfinished sequence. */
    size_t start = len > 3 ? len - 3 : 0;
    for (size_t i = start; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        size_t bad;
        if (c >= 0xC0 && utf8_sequence((const unsigned char *)data + i, len - i, &bad) == -1)
            return i;
    }
    return len;
}
