/* envd, the daemon of an E2B sandbox (../shared/E2B-SANDBOX-PROTOCOL.md
 * sections 3 to 5): /health, /files, and the Connect services
 * filesystem.Filesystem and process.Process. A request's sandbox and its
 * access token are checked on the head (envd_admit), and every handler
 * finds its sandbox with e2b_sandbox_for_request, which checks them again;
 * the server's token is not what envd's clients hold. */
#include "http/e2b_envd.h"

#include <string.h>

/* GET /health: 204 while the sandbox runs; the SDK's is_running() reads
 * the 502 of e2b_sandbox_for_request as "not running". */
static enum MHD_Result handle_health(http_request *req)
{
    e2b_sandbox_view view;
    http_error err;
    if (!e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, &view, &err))
        return http_reply_error(req, &err);
    e2b_sandbox_view_release(&view);
    struct MHD_Response *response =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    return http_reply(req, MHD_HTTP_NO_CONTENT, response, 0);
}

#define FS "/filesystem.Filesystem/"

static const route envd_routes[] = {
    {"GET", "/health", handle_health, BODY_NONE, true},
    {"GET", "/files", e2b_handle_files_get, BODY_NONE, false},
    {"POST", "/files", e2b_handle_files_post, BODY_RAW, false},
    {"POST", FS "Stat", e2b_handle_fs_stat, BODY_RAW, false},
    {"POST", FS "MakeDir", e2b_handle_fs_make_dir, BODY_RAW, false},
    {"POST", FS "Move", e2b_handle_fs_move, BODY_RAW, false},
    {"POST", FS "ListDir", e2b_handle_fs_list_dir, BODY_RAW, false},
    {"POST", FS "Remove", e2b_handle_fs_remove, BODY_RAW, false},
    {"POST", FS "WatchDir", e2b_handle_fs_watch_dir, BODY_RAW, false},
    {"POST", FS "CreateWatcher", e2b_handle_fs_create_watcher, BODY_RAW, false},
    {"POST", FS "GetWatcherEvents", e2b_handle_fs_get_watcher_events, BODY_RAW, false},
    {"POST", FS "RemoveWatcher", e2b_handle_fs_remove_watcher, BODY_RAW, false},
    /* Any other method of the service: Connect's unimplemented. */
    {"POST", FS "{id}", e2b_handle_fs_unknown, BODY_RAW, false},
    /* process.Process (e2b_process.c) */
    {"POST", "/process.Process/Start", http_e2b_process_start, BODY_RAW, false},
    {"POST", "/process.Process/Connect", http_e2b_process_connect, BODY_RAW, false},
    {"POST", "/process.Process/List", http_e2b_process_list, BODY_RAW, false},
    {"POST", "/process.Process/SendInput", http_e2b_process_send_input, BODY_RAW, false},
    {"POST", "/process.Process/StreamInput", http_e2b_process_stream_input, BODY_RAW, false},
    {"POST", "/process.Process/SendSignal", http_e2b_process_send_signal, BODY_RAW, false},
    {"POST", "/process.Process/CloseStdin", http_e2b_process_close_stdin, BODY_RAW, false},
    {"POST", "/process.Process/Update", http_e2b_process_update, BODY_RAW, false},
};

/* The server's token is not what envd's clients hold: they show their
 * sandbox's (envd_admit). */
static bool envd_authorized(const http_server *server, struct MHD_Connection *connection)
{
    (void)server;
    (void)connection;
    return true;
}

/* Every request names a running sandbox and shows its access token, or is
 * a signed file URL that one of them signed, before its body is read: a
 * stranger gets the 502 or 401 at once and cannot make the server hold an
 * upload of --max-body bytes. The handlers check again, as the sandbox may
 * go while the body comes in. */
static bool envd_admit(http_request *req, enum MHD_Result *queued)
{
    http_error err;
    bool admitted = e2b_files_signed(req)
                        ? e2b_sandbox_for_signed_file(req->server, req->connection,
                                                         !strcmp(req->method, "POST"),
                                                         req->admitted, NULL, &err)
                        : e2b_sandbox_for_request(req->server, req->connection, E2B_PORT_ENVD, NULL,
                                                  &err);
    if (!admitted)
        *queued = e2b_connect_refuse(req, &err);
    return admitted;
}

const http_api http_e2b_envd_api = {
    .name = "e2b-envd",
    .routes = envd_routes,
    .route_count = sizeof envd_routes / sizeof *envd_routes,
    .authorized = envd_authorized,
    .unauthorized = "'X-Access-Token: TOKEN'",
    .admit = envd_admit,
    .error_body = e2b_connect_error_body,
};
