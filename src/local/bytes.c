/* Bytes through the local socket's JSON (see local.h): code that is not
 * UTF-8 (bash takes any byte) goes as "code_bytes", a string whose code
 * points U+0000 to U+00FF are its bytes one for one, which JSON can hold
 * whatever the bytes are. */
#include "local/local.h"

#include <stdlib.h>
#include <string.h>

json_t *local_bytes_to_json(const char *data, size_t len)
{
    char *text = malloc(len * 2 + 1);
    if (!text)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c < 0x80) {
            text[n++] = (char)c;
        } else {
            text[n++] = (char)(0xC0 | (c >> 6));
            text[n++] = (char)(0x80 | (c & 0x3F));
        }
    }
    json_t *value = json_stringn(text, n);
    free(text);
    return value;
}

json_t *local_bytes_from_json(json_t *value)
{
    const unsigned char *s = (const unsigned char *)json_string_value(value);
    if (!s)
        return NULL;
    size_t len = json_string_length(value), n = 0;
    char *bytes = malloc(len + 1);
    if (!bytes)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < 0x80) {
            bytes[n++] = (char)s[i];
        } else if ((s[i] == 0xC2 || s[i] == 0xC3) && i + 1 < len) {
            bytes[n++] = (char)(((s[i] & 0x03) << 6) | (s[i + 1] & 0x3F));
            i++;
        } else {
            free(bytes); /* a code point past U+00FF: not a byte */
            return NULL;
        }
    }
    json_t *raw = json_stringn_nocheck(bytes, n);
    free(bytes);
    return raw;
}
