/* The bearer token. Running code is what this API does, so anything but a
 * loopback listener needs a token (serve.c refuses to start without one). */
#include "http/http.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TOKEN_MAX 4096

/* A token goes into a header: visible ASCII only, no spaces. */
static bool token_valid(const char *token, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (token[i] < 0x21 || token[i] > 0x7e)
            return false;
    return true;
}

int http_auth_load(const serve_options *options, char **token, char *why, size_t why_size)
{
    *token = NULL;
    const char *env = getenv("RUNBOX_TOKEN");
    const char *source = options->token_file ? options->token_file : "RUNBOX_TOKEN";
    char *text = NULL;
    size_t len = 0;
    if (options->token_file) {
        if (cli_read_file(options->token_file, TOKEN_MAX, &text, &len, why, why_size) != 0)
            return -1;
    } else if (env && *env) {
        text = strdup(env);
        len = text ? strlen(text) : 0;
    } else {
        return 0;
    }
    if (!text) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    /* Files usually end with a newline that is not part of the token. */
    while (len && strchr(" \t\r\n", text[len - 1]))
        text[--len] = 0;
    if (!token_valid(text, len)) {
        free(text);
        snprintf(why, why_size, "the token in %s must be printable ASCII without spaces", source);
        return -1;
    }
    *token = text;
    return 0;
}

/* Takes time that depends on the expected token's length only, never on
 * how much of it a guess got right. */
static bool same_secret(const char *given, const char *expected)
{
    size_t given_len = strlen(given), expected_len = strlen(expected);
    volatile unsigned char diff = given_len != expected_len;
    for (size_t i = 0; i < expected_len; i++)
        diff |= (unsigned char)(expected[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

bool http_auth_ok(const http_server *server, struct MHD_Connection *connection)
{
    if (!server->token)
        return true;
    const char *header =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    header += 7;
    while (*header == ' ')
        header++;
    return same_secret(header, server->token);
}

bool http_auth_ok_headers(const http_server *server, struct MHD_Connection *connection,
                          const char *const *headers)
{
    if (!server->token || http_auth_ok(server, connection))
        return true;
    for (const char *const *name = headers; *name; name++) {
        const char *given = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, *name);
        if (given && same_secret(given, server->token))
            return true;
    }
    return false;
}

bool http_address_is_loopback(const struct sockaddr *addr)
{
    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->sa_family == AF_INET6) {
        const struct in6_addr *in6 = &((const struct sockaddr_in6 *)addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(in6))
            return in6->s6_addr[12] == 127;
        return IN6_IS_ADDR_LOOPBACK(in6);
    }
    return false;
}
