/* Headers whose reading must not depend on who reads them. A proxy in front
 * of runbox and runbox itself must agree on where a request ends and which
 * session it is for: a request with both Content-Length and
 * Transfer-Encoding, or with two of a header that frames or routes it, can
 * be read one way by the proxy and another by libmicrohttpd (which takes
 * the first of two, where a balancer may join them). Such requests are
 * refused before anything else is looked at. */
#include "http/http.h"

#include <strings.h>

/* The headers a request may carry once at most: framing first (the check
 * below knows Content-Length and Transfer-Encoding by their places), then
 * those that authenticate or route, runbox's and E2B's (which sandbox,
 * which of its ports, its tokens, the control plane's key). */
static const char *const SINGLE[] = {
    MHD_HTTP_HEADER_CONTENT_LENGTH, MHD_HTTP_HEADER_TRANSFER_ENCODING,
    MHD_HTTP_HEADER_HOST,           MHD_HTTP_HEADER_AUTHORIZATION,
    MHD_HTTP_HEADER_CONTENT_TYPE,   "X-Runbox-Session",
    "E2b-Sandbox-Id",               "E2b-Sandbox-Port",
    "X-Access-Token",               "E2B-Traffic-Access-Token",
    "X-API-KEY",
};
#define SINGLE_COUNT (sizeof SINGLE / sizeof *SINGLE)

typedef struct {
    unsigned seen[SINGLE_COUNT];
} header_counts;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    (void)value;
    header_counts *counts = cls;
    for (size_t i = 0; i < SINGLE_COUNT; i++)
        if (key && !strcasecmp(key, SINGLE[i]))
            counts->seen[i]++;
    return MHD_YES;
}

bool http_framing_check(http_request *req, http_error *err)
{
    header_counts counts = {{0}};
    MHD_get_connection_values(req->connection, MHD_HEADER_KIND, count_header, &counts);
    for (size_t i = 0; i < SINGLE_COUNT; i++)
        if (counts.seen[i] > 1) {
            http_error_set(err, MHD_HTTP_BAD_REQUEST, "duplicate_header",
                           "the %s header is sent %u times: send it once", SINGLE[i],
                           counts.seen[i]);
            return false;
        }
    if (counts.seen[0] && counts.seen[1]) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "ambiguous_framing",
                       "the request has both Content-Length and Transfer-Encoding: send one "
                       "(a proxy and runbox could read the body's end differently)");
        return false;
    }
    return true;
}
