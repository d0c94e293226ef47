/* Requests a browser sends on behalf of another site. Since runbox serve
 * has a page (playground.c), browsers are clients; two attacks reach a
 * server through them:
 * - cross-site requests: any page the operator visits may POST to
 *   http://127.0.0.1:8080 (a form needs no CORS preflight), which on a
 *   server without a token would drain it or create sessions;
 * - DNS rebinding: a page whose name the attacker re-points at 127.0.0.1
 *   talks to a token-less server as its own origin, past CORS.
 * So a request whose Origin is not the server's own is refused, and a
 * server without a token answers only names that are loopback by
 * definition. Clients that are not browsers send neither header. */
#include "http/http.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

/* The authority of an origin such as "http://host:port": what follows the
 * scheme, or NULL for "null" and anything that is not an origin. */
static const char *origin_authority(const char *origin)
{
    const char *sep = strstr(origin, "://");
    if (!sep || sep == origin)
        return NULL;
    const char *authority = sep + 3;
    return *authority && !strchr(authority, '/') ? authority : NULL;
}

/* The host of an authority ("h", "h:port", "[v6]:port") into out. */
static bool authority_host(const char *authority, char *out, size_t size)
{
    const char *end;
    if (*authority == '[') {
        end = strchr(authority, ']');
        if (!end)
            return false;
        authority++;
    } else {
        end = strchr(authority, ':');
        if (!end)
            end = authority + strlen(authority);
    }
    size_t len = (size_t)(end - authority);
    if (len == 0 || len >= size)
        return false;
    memcpy(out, authority, len);
    out[len] = 0;
    return true;
}

/* localhost and its subdomains (RFC 6761: they resolve to loopback, and
 * E2B's SDK addresses sandboxes that way), 127/8 and ::1. */
static bool host_is_loopback(const char *host)
{
    size_t len = strlen(host);
    if (len && host[len - 1] == '.')
        len--;
    static const char name[] = "localhost";
    const size_t name_len = sizeof name - 1;
    if (len >= name_len && !strncasecmp(host + len - name_len, name, name_len) &&
        (len == name_len || host[len - name_len - 1] == '.'))
        return true;
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1)
        return http_address_is_loopback((const struct sockaddr *)&v4);
    return inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 &&
           http_address_is_loopback((const struct sockaddr *)&v6);
}

bool http_origin_check(const http_server *server, struct MHD_Connection *connection,
                       http_error *err)
{
    const char *host =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *origin = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Origin");
    if (origin) {
        const char *authority = origin_authority(origin);
        if (!authority || !host || strcasecmp(authority, host) != 0) {
            http_error_set(err, MHD_HTTP_FORBIDDEN, "cross_origin",
                           "requests from another site's page are refused (Origin %.100s, this "
                           "server is %.100s): call the API from its own page or from a client "
                           "that is not a browser",
                           origin, host ? host : "unnamed");
            return false;
        }
    }
    char name[256];
    if (!server->token && host &&
        (!authority_host(host, name, sizeof name) || !host_is_loopback(name))) {
        http_error_set(err, MHD_HTTP_FORBIDDEN, "host_not_loopback",
                       "this server has no token, so it answers only requests addressed to "
                       "localhost, 127.0.0.1 or [::1] (Host %.100s could be a name re-pointed at "
                       "it by another site); give the server a token to serve other names",
                       host);
        return false;
    }
    return true;
}
