/* Base64 for the front ends' protocols (base64.h): proto3 JSON's bytes in
 * envd's messages, MCP's blobs, E2B's signed file URLs. */
#include "api/base64.h"

#include <stdint.h>

#include <stdlib.h>
#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *api_base64_encode(const void *data, size_t len, bool pad, size_t *out_len)
{
    const unsigned char *in = data;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < len ? in[i + 2] : 0);
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        if (i + 1 < len || pad)
            out[o++] = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
        if (i + 2 < len || pad)
            out[o++] = i + 2 < len ? alphabet[v & 63] : '=';
    }
    out[o] = 0;
    if (out_len)
        *out_len = o;
    return out;
}

static int value_of(char c)
{
    const char *at = c ? strchr(alphabet, c) : NULL;
    if (at)
        return (int)(at - alphabet);
    return c == '-' ? 62 : c == '_' ? 63 : -1; /* the URL-safe alphabet, which proto3 JSON allows */
}

bool api_base64_decode(const char *text, size_t len, char **out, size_t *out_len)
{
    while (len && text[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return false;
    char *bytes = malloc(len / 4 * 3 + 3);
    if (!bytes)
        return false;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = value_of(text[i]);
        if (v < 0) {
            free(bytes);
            return false;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bytes[o++] = (char)(acc >> bits & 0xff);
        }
    }
    bytes[o] = 0; /* room: o is at most len / 4 * 3 + 2; callers read names with str* */
    *out = bytes;
    *out_len = o;
    return true;
}
