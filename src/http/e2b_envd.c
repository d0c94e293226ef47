/* envd, the daemon of an E2B sandbox (../shared/E2B-SANDBOX-PROTOCOL.md
 * sections 3 to 5): /health, /files, and the Connect services
 * filesystem.Filesystem and process.Process. Every handler finds its
 * sandbox with e2b_sandbox_for_request, which checks the sandbox's own
 * access token; the server's token is not what envd's clients hold. */
#include "http/http.h"

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
    .error_body = e2b_connect_error_body,
};
