/* base64.c: standard base64, shared by the front ends. */
#ifndef RBX_API_BASE64_H
#define RBX_API_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Padded or not; malloc'ed and NUL-terminated, *out_len (if not NULL) its
 * length. */
char *api_base64_encode(const void *data, size_t len, bool pad, size_t *out_len);
/* The standard and URL-safe alphabets, padded or not; *out malloc'ed and
 * NUL-terminated past its *out_len bytes (which may hold NULs of their own). */
bool api_base64_decode(const char *text, size_t len, char **out, size_t *out_len);

#endif
