/* envd, the daemon of an E2B sandbox (../shared/E2B-SANDBOX-PROTOCOL.md
 * sections 3 to 5): /health, /files, and the Connect services
 * filesystem.Filesystem and process.Process. Every handler finds its
 * sandbox with e2b_sandbox_for_request, which checks the sandbox's own
 * access token; the server's token is not what envd's clients hold. */
#include "http/http.h"

/* Connect's error body: {"code": "<name>", "message"}. */
static const char *connect_code(unsigned status)
{
    switch (status) {
    case 400: return "invalid_argument";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 409: return "already_exists";
    case 429: return "resource_exhausted";
    case 501: return "unimplemented";
    case 502: case 503: return "unavailable";
    case 504: return "deadline_exceeded";
    default: return "internal";
    }
}

static json_t *envd_error_body(const http_error *err)
{
    return json_pack("{s:s, s:s}", "code", connect_code(err->status), "message", err->message);
}

static const route envd_routes[] = {
    {"GET", "/health", NULL, BODY_NONE, true},
    /* process.Process (e2b_process.c) */
    {"POST", "/process.Process/Start", http_e2b_process_start, BODY_RAW, true},
    {"POST", "/process.Process/Connect", http_e2b_process_connect, BODY_RAW, true},
    {"POST", "/process.Process/List", http_e2b_process_list, BODY_RAW, true},
    {"POST", "/process.Process/SendInput", http_e2b_process_send_input, BODY_RAW, true},
    {"POST", "/process.Process/StreamInput", http_e2b_process_stream_input, BODY_RAW, true},
    {"POST", "/process.Process/SendSignal", http_e2b_process_send_signal, BODY_RAW, true},
    {"POST", "/process.Process/CloseStdin", http_e2b_process_close_stdin, BODY_RAW, true},
    {"POST", "/process.Process/Update", http_e2b_process_update, BODY_RAW, true},
};

static bool envd_authorized(const http_server *server, struct MHD_Connection *connection)
{
    (void)server;
    (void)connection;
    return true; /* each handler checks its sandbox's token */
}

const http_api http_e2b_envd_api = {
    .name = "e2b-envd",
    .routes = envd_routes,
    .route_count = sizeof envd_routes / sizeof *envd_routes,
    .authorized = envd_authorized,
    .unauthorized = "'X-Access-Token: TOKEN'",
    .error_body = envd_error_body,
};
