/* E2B's control plane (../shared/E2B-SANDBOX-PROTOCOL.md section 2):
 * sandboxes made, listed, connected to, paused and killed. Errors are
 * {"code": <HTTP status>, "message"}, which both SDKs parse. */
#include "http/http.h"

static json_t *control_error_body(const http_error *err)
{
    return json_pack("{s:i, s:s}", "code", (int)err->status, "message", err->message);
}

static const route control_routes[] = {
    {"GET", "/sandboxes", NULL, BODY_NONE, false},
};

static bool control_authorized(const http_server *server, struct MHD_Connection *connection)
{
    static const char *const headers[] = {"X-API-KEY", NULL};
    return http_auth_ok_headers(server, connection, headers);
}

const http_api http_e2b_control_api = {
    .name = "e2b-api",
    .routes = control_routes,
    .route_count = 0,
    .authorized = control_authorized,
    .unauthorized = "'X-API-KEY: TOKEN'",
    .error_body = control_error_body,
};
