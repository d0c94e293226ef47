/* What a node behind a session-affine load balancer needs (deploy/): the
 * session id where the balancer can hash it without reading the body (the
 * path form of execute, and the X-Runbox-Session header, which must agree
 * with the path and body), draining before the node is removed, and moving
 * sessions off it (export, import). */
#include "http/http.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_HEADER "X-Runbox-Session"

bool http_session_header_check(http_request *req, http_error *err)
{
    const char *header =
        MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, SESSION_HEADER);
    if (!header)
        return true;
    if (!rbx_session_id_valid(header)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "invalid_request",
                       "the " SESSION_HEADER
                       " header is not a session id: it must match " RBX_SESSION_ID_PATTERN);
        return false;
    }
    if (req->session_id && strcmp(header, req->session_id)) {
        http_error_set(err, MHD_HTTP_BAD_REQUEST, "session_mismatch",
                       "the " SESSION_HEADER " header names session %.64s but the path names "
                       "%.64s: a load balancer routes by the header, so they must agree",
                       header, req->session_id);
        return false;
    }
    return true;
}

const char *http_routed_session(const http_request *req)
{
    return req->session_id
               ? req->session_id
               : MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, SESSION_HEADER);
}

bool http_session_agrees(const http_request *req, const char *named, http_error *err)
{
    const char *routed = http_routed_session(req);
    if (!named || !routed || !strcmp(named, routed))
        return true;
    http_error_set(err, MHD_HTTP_BAD_REQUEST, "session_mismatch",
                   "the body's session_id is %.64s but the %s names %.64s: a load balancer "
                   "routes by the latter, so they must agree",
                   named, req->session_id ? "path" : SESSION_HEADER " header", routed);
    return false;
}

/* The session an execute request is for: the routed one is written into
 * a body that names none. */
static bool settle_session(http_request *req, json_t *body, http_error *err)
{
    const char *routed = http_routed_session(req);
    json_t *given = json_object_get(body, "session_id");
    if (!given || json_is_null(given)) {
        if (routed)
            json_object_set_new(body, "session_id", json_string(routed));
        return true;
    }
    return !json_is_string(given) || http_session_agrees(req, json_string_value(given), err);
}

/* While draining, the node keeps serving the sessions it holds and takes
 * no new work: no new session, no one-off execution, no new E2B context
 * (every front end of the server asks this). */
bool http_drain_refuses(http_request *req, const char *session_id, http_error *err)
{
    if (!atomic_load(&req->server->drain_requested))
        return false;
    if (session_id && rbx_session_exists(req->server->engine, session_id))
        return false;
    http_error_set(err, MHD_HTTP_SERVICE_UNAVAILABLE, "draining",
                   "this runbox node is draining: it serves only the sessions it holds, and "
                   "%s%.64s is not one of them; send it to another node",
                   session_id ? "session " : "new work (a one-off execution or a new context)",
                   session_id ? session_id : "");
    return true;
}

enum MHD_Result http_handle_execute(http_request *req)
{
    json_t *body;
    http_error err;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    if (!settle_session(req, body, &err) ||
        http_drain_refuses(req, json_string_value(json_object_get(body, "session_id")), &err)) {
        json_decref(body);
        return http_reply_error(req, &err);
    }
    return http_execute(req, body);
}

enum MHD_Result http_handle_drain(http_request *req)
{
    json_t *body;
    http_error err;
    if (!http_body_json(req, &body, &err))
        return http_reply_error(req, &err);
    json_t *drain = body ? json_object_get(body, "drain") : NULL;
    if (body &&
        (json_object_size(body) != (drain ? 1u : 0u) || (drain && !json_is_boolean(drain)))) {
        json_decref(body);
        return http_reply_fail(req, MHD_HTTP_BAD_REQUEST, "invalid_request",
                               "the body is optional; if given it is {\"drain\": true} or "
                               "{\"drain\": false}");
    }
    bool on = !drain || json_is_true(drain);
    json_decref(body);
    atomic_store(&req->server->drain_requested, on);
    json_t *line = http_log_event(on ? "drain_on" : "drain_off");
    http_log_emit(line);
    unsigned running, queued;
    http_admission_counts(&req->server->admission, &running, &queued);
    return http_reply_json(req, MHD_HTTP_OK,
                           json_pack("{s:b, s:I, s:I}", "draining", on, "running",
                                     (json_int_t)running, "queued", (json_int_t)queued),
                           NULL, NULL);
}

enum MHD_Result http_handle_live(http_request *req)
{
    return http_reply_json(req, MHD_HTTP_OK, json_pack("{s:s}", "status", "live"), NULL, NULL);
}

/* The archive goes to a file without a name in the state directory (or
 * memory where that cannot be), then out from there: its size is known
 * before the first byte is sent, and no pipe ties the export to the
 * client's pace. */
static int archive_file(http_server *server)
{
    int fd =
        open(rbx_engine_config(server->engine)->state_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    return fd >= 0 ? fd : memfd_create("runbox-export", MFD_CLOEXEC);
}

enum MHD_Result http_handle_session_export(http_request *req)
{
    int fd = archive_file(req->server);
    if (fd < 0)
        return http_reply_fail(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "system_error",
                               "cannot make room for the archive: %s", strerror(errno));
    http_hold_connection(req->connection);
    rbx_error err = {0};
    rbx_status status = rbx_session_export(req->server->engine, req->session_id, fd, &err);
    http_release_connection(req->server, req->connection);
    struct stat st;
    if (status != RBX_OK || fstat(fd, &st) != 0) {
        close(fd);
        return status != RBX_OK ? http_reply_engine(req, &err)
                                : http_reply_fail(req, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                                  "system_error", "cannot read the archive back");
    }
    struct MHD_Response *response = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!response) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_DISPOSITION, "attachment");
    return http_reply(req, MHD_HTTP_OK, response, (uint64_t)st.st_size);
}

enum MHD_Result http_handle_session_import(http_request *req)
{
    http_error refusal;
    if (http_drain_refuses(req, req->session_id, &refusal))
        return http_reply_error(req, &refusal);
    rbx_archive_source from = {.data = req->body.data, .len = req->body.len, .fd = -1};
    if (!from.data)
        from.data = "";
    rbx_session_import_info info;
    rbx_error err = {0};
    http_hold_connection(req->connection);
    rbx_status status =
        rbx_session_import(req->server->engine, req->session_id, &from, &info, &err);
    http_release_connection(req->server, req->connection);
    if (status != RBX_OK)
        return http_reply_engine(req, &err);
    char location[RBX_SESSION_ID_MAX + 16];
    snprintf(location, sizeof location, "/v1/sessions/%s", req->session_id);
    return http_reply_json(req, MHD_HTTP_CREATED,
                           json_pack("{s:s, s:I, s:I}", "session_id", req->session_id, "files",
                                     (json_int_t)info.files, "bytes", (json_int_t)info.bytes),
                           MHD_HTTP_HEADER_LOCATION, location);
}
