/* percent.c: percent-decoding (RFC 3986 section 2.1), shared by the front
 * ends that read URLs' parts: E2B's metadata filter (http/e2b_list.c) and
 * MCP's resource URIs (mcp/resource_uri.c). */
#ifndef RBX_API_PERCENT_H
#define RBX_API_PERCENT_H

#include <stdbool.h>

/* The byte of the escape at text ("%2F" is 0x2F, either case of hex), or -1
 * when text is not a '%' and two hex digits. Reads no further than a NUL. */
int api_percent_byte(const char *text);

/* Decodes text in place; false for a broken escape or an encoded NUL (%00),
 * which a C string cannot carry (text is then partly decoded). */
bool api_percent_decode(char *text);

#endif
